"""The documentation as pages: headings, anchors, links and inline code."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from helpers import ROOT


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown page: its headings' (a repeated one gets -1, -2, ...) and any
    <a name/id>."""
    page = Page.read(path)
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for line in page.prose.splitlines():
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            found.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    found.update(HTML_ANCHOR.findall(page.prose))
    return found


HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


@dataclass(frozen=True)
class Page:
    name: str
    """Its path from the repository root, as the messages name it."""
    path: Path
    code: tuple[str, ...]
    """The lines inside fenced code blocks."""
    prose: str
    """Everything else, each fenced block's lines left blank (the line numbers stay)."""

    @classmethod
    def read(cls, path: Path, text: str | None = None) -> Page:
        if text is None:
            text = path.read_text(encoding="utf-8")
        code: list[str] = []
        prose: list[str] = []
        fenced = False
        for line in text.splitlines():
            if FENCE.match(line):
                fenced = not fenced
                prose.append("")
            elif fenced:
                code.append(line)
                prose.append("")
            else:
                prose.append(line)
        return cls(path.relative_to(ROOT).as_posix(), path, tuple(code), "\n".join(prose))

    def inline_code(self) -> list[str]:
        """Each inline code span, its line breaks read as spaces."""
        return [" ".join(m.group(2).split()) for m in INLINE_CODE.finditer(self.prose)]

    def links(self) -> list[str]:
        """Each link's (and image's) target, outside code."""
        prose = INLINE_CODE.sub(lambda m: "code", self.prose)
        return [m.group(2) for m in LINK.finditer(prose)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lowercased, punctuation other than - and space
    dropped, spaces turned into -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


FENCE = re.compile(r"^\s*(```|~~~)")


INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)


LINK = re.compile(r"!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
