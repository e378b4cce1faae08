"""The documentation (README.md and docs/*.md) names only what exists: every `make` target it
shows is a target of the Makefile, every repository path it names is there, every relative link
resolves and every #anchor is a heading of its page; and the front page stays a front page.

Pure text checks: no cluster, no build, no network."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.docs import Page, anchors, slug

ROOT = Path(__file__).resolve().parents[2]
FRONT_PAGE = ROOT / "README.md"
DOCS = ROOT / "docs"
FRONT_PAGE_MAX_LINES = 260

# A path the docs name is checked when it starts with one of these (relative to the root) ...
TOP_FOLDERS = (
    "operator/",
    "workloads/",
    "charts/",
    "dashboards/",
    "manifests/",
    "tests/",
    "hack/",
    "docs/",
    ".ci/",
)
TOP_FILES = ("Makefile", "pyproject.toml", "README.md")
# ... or is a module written from its package's folder, as the prose does (`cxlab/plan.py`).
PACKAGE_FOLDERS = {
    "cxlab/": "operator/cxlab/",
    "cxlab_runner/": "workloads/python/cxlab_runner/",
    "cxlab_contract/": "workloads/python/cxlab_contract/",
}
# What these characters start is a pattern, not a name: only the folder before it is checked.
WILDCARDS = re.compile(r"[*?\[<{…]|\.\.\.")

URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A Makefile rule: `name [name...]:` (or `&:`, `::`), not a variable (`X := ...`, `X ?= ...`).
RULE = re.compile(r"^([^\s:#=][^:#=]*?)\s*&?::?(?!=)")
SHELL_SEPARATOR = re.compile(r"&&|\|\||;|\||\$\(|`|\(")
# Inline code that quotes a message about a command rather than showing one: the command it
# names (tests/cluster/conftest.py fails with "make {target} failed (exit N)").
QUOTED_MESSAGES = {"make cluster-up failed": "make cluster-up"}


def doc_paths() -> list[Path]:
    return [FRONT_PAGE, *sorted(DOCS.glob("*.md"))]


def pages() -> list[Page]:
    return [Page.read(path) for path in doc_paths()]


def page_ids() -> list[str]:
    return [path.relative_to(ROOT).as_posix() for path in doc_paths()]


# ---- make targets


def makefile_targets(makefile: Path) -> set[str]:
    targets: set[str] = set()
    for line in makefile.read_text(encoding="utf-8").splitlines():
        if line.startswith(("\t", " ")):
            continue  # a recipe, or a continued assignment
        rule = RULE.match(line)
        if rule:
            targets.update(
                name for name in rule.group(1).split() if "$" not in name and name[0] != "."
            )
    return targets


def make_commands(page: Page) -> Iterator[str]:
    """Every `make ...` command the page shows: a code block's command (after a `$ ` prompt,
    `&&`, `;` or `|`; its `# comment` left out) or an inline code span that starts with it."""
    for line in page.code:
        line = re.sub(r"(^|\s)#.*", "", line).strip().removeprefix("$ ")
        for part in SHELL_SEPARATOR.split(line):
            if re.match(r"make(\s|$)", part.strip()):
                yield part.strip()
    for span in page.inline_code():
        if re.match(r"make(\s|$)", span):
            yield QUOTED_MESSAGES.get(span, span)


def make_targets(command: str) -> tuple[str, list[str]]:
    """The folder whose Makefile a `make` command runs (`-C dir`) and the targets it names:
    `make run EXAMPLE=file.yaml` names `run`; options and variable assignments are not targets."""
    tokens = command.split()[1:]
    folder = "."
    targets: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "-C" and i + 1 < len(tokens):
            folder = tokens[i + 1]
            i += 1
        elif token.startswith("-C"):
            folder = token[2:]
        elif token.startswith("-") or "=" in token or token.isdigit():
            pass  # an option (or a -j/-l count), or VARIABLE=value
        else:
            targets.append(token)
        i += 1
    return folder, targets


def make_target_problems(page: Page) -> list[str]:
    problems = []
    for command in make_commands(page):
        folder, targets = make_targets(command)
        makefile = ROOT / folder / "Makefile"
        if not makefile.is_file():
            problems.append(f"{page.name}: `{command}`: there is no {folder}/Makefile")
            continue
        known = makefile_targets(makefile)
        if not targets:
            continue  # plain `make`: the default goal
        problems += [
            f"{page.name}: `{command}`: {target!r} is not a target of "
            f"{makefile.relative_to(ROOT).as_posix()}"
            for target in targets
            if target not in known
        ]
    return list(dict.fromkeys(problems))


# ---- repository paths


def path_tokens(page: Page) -> Iterator[str]:
    """Every whitespace-separated word of the page's code (blocks and inline spans)."""
    for text in [*page.code, *page.inline_code()]:
        yield from text.split()


def repository_path(word: str) -> str | None:
    """The repository path a word of code names, from the root, or None if it names none."""
    word = word.lstrip("'\"([{").rstrip("'\")]},;.")
    word = re.sub(r"::.*$", "", word)  # tests/test_x.py::test_y
    word = re.sub(r":\d+(?:[-:]\d+)*$", "", word)  # operator/cxlab/experiments/spec.py:44
    word = word.rstrip(":")
    for short, full in PACKAGE_FOLDERS.items():
        if word.startswith(short):
            return full + word.removeprefix(short)
    if word.startswith(TOP_FOLDERS) or word in TOP_FILES:
        return word
    return None


def path_problems(page: Page) -> list[str]:
    problems = []
    for word in path_tokens(page):
        path = repository_path(word)
        if path is None:
            continue
        wildcard = WILDCARDS.search(path)
        if wildcard:  # check the folder the pattern is in
            path = path[: wildcard.start()].rpartition("/")[0] + "/"
        if not (ROOT / path).exists():
            problems.append(f"{page.name}: `{word}` names {path}, which does not exist")
    return sorted(set(problems))


# ---- links and anchors


def link_problems(page: Page) -> list[str]:
    problems = []
    for target in page.links():
        if URL_SCHEME.match(target):
            continue  # https:, mailto:
        location, _, anchor = target.partition("#")
        destination = (page.path.parent / location).resolve() if location else page.path
        if not destination.is_relative_to(ROOT):
            problems.append(f"{page.name}: link ({target}) leaves the repository")
        elif not destination.exists():
            problems.append(f"{page.name}: link ({target}): {location} does not exist")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            where = destination.relative_to(ROOT).as_posix()
            problems.append(f"{page.name}: link ({target}): {where} has no heading #{anchor}")
    return list(dict.fromkeys(problems))


def linked_files(page: Page) -> set[Path]:
    return {(page.path.parent / target.partition("#")[0]).resolve() for target in page.links()}


# ---- the tests


@pytest.mark.parametrize("page", pages(), ids=page_ids())
def test_every_make_target_is_in_the_makefile(page: Page) -> None:
    problems = make_target_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", pages(), ids=page_ids())
def test_every_path_named_exists(page: Page) -> None:
    problems = path_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", pages(), ids=page_ids())
def test_every_relative_link_and_anchor_resolves(page: Page) -> None:
    problems = link_problems(page)
    assert not problems, "\n".join(problems)


def test_the_front_page_stays_short_and_names_the_ci_command() -> None:
    text = FRONT_PAGE.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines < FRONT_PAGE_MAX_LINES, (
        f"README.md: {lines} lines, at most {FRONT_PAGE_MAX_LINES - 1}: move the detail to docs/"
    )
    # .ci/run runs exactly `make test`, and says it is the README's test command.
    assert "make test" in text, "README.md: no longer names `make test`, the command CI runs"
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_docs_page_is_linked_from_the_front_page_and_the_index() -> None:
    front = linked_files(Page.read(FRONT_PAGE))
    index = linked_files(Page.read(DOCS / "README.md"))
    problems = [
        f"{where}: no link to docs/{path.name}"
        for path in sorted(DOCS.glob("*.md"))
        if path.name != "README.md"
        for where, linked in (("README.md", front), ("docs/README.md", index))
        if path.resolve() not in linked
    ]
    assert not problems, "\n".join(problems)


def test_the_checks_see_what_they_check() -> None:
    """The parsers find what the checks rely on, so that a check cannot pass by seeing nothing."""
    assert {"run", "demo", "test", "help", "bench-scale", "kwok-up"} <= makefile_targets(
        ROOT / "Makefile"
    )
    assert make_targets("make run EXAMPLE=manifests/examples/x.yaml") == (".", ["run"])
    assert make_targets("make -C hack -j 2 up down") == ("hack", ["up", "down"])
    assert (
        repository_path("operator/cxlab/experiments/spec.py:44,")
        == "operator/cxlab/experiments/spec.py"
    )
    assert repository_path("cxlab/analysis/merge.py") == "operator/cxlab/analysis/merge.py"
    assert repository_path("build/bin/helm") is None
    assert slug("make bench-scale: 5,000 trials on 100 fake nodes") == (
        "make-bench-scale-5000-trials-on-100-fake-nodes"
    )
    assert slug("The summary, and how sure it is") == "the-summary-and-how-sure-it-is"
    assert slug("Bad input at `kubectl apply`") == "bad-input-at-kubectl-apply"
    all_pages = pages()
    assert sum(1 for page in all_pages for _ in make_commands(page)) > 20
    assert sum(1 for page in all_pages for word in path_tokens(page) if repository_path(word)) > 50
    assert sum(len(page.links()) for page in all_pages) > 30
