"""A small DOM over html.parser, strict about nesting: the HTML report parsed back, its charts
found by title, their series' coordinates and its tables' cells read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def find_all(self, tag: str, css: str | None = None) -> list[Node]:
        found = []
        for child in self.children:
            if child.tag == tag and (css is None or css in child.attrs.get("class", "").split()):
                found.append(child)
            found += child.find_all(tag, css)
        return found

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


class TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].text += data


def parse(html: str) -> Node:
    builder = TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root


def charts(root: Node) -> dict[str, Node]:
    svgs = root.find_all("svg", "chart")
    titles = [svg.find_all("title")[0].text for svg in svgs]
    assert len(set(titles)) == len(titles), "chart titles are unique"
    return dict(zip(titles, svgs, strict=True))


def series_of(chart: Node) -> list[Node]:
    return chart.find_all("g", "series")


def plot_area(chart: Node) -> tuple[float, float, float, float]:
    rect = chart.find_all("rect", "plot-area")[0]
    x, y = float(rect.attrs["x"]), float(rect.attrs["y"])
    return x, y, x + float(rect.attrs["width"]), y + float(rect.attrs["height"])


def coordinates(series: Node) -> list[tuple[float, float]]:
    coords = []
    for line in series.find_all("polyline"):
        for pair in line.attrs["points"].split():
            x, y = pair.split(",")
            coords.append((float(x), float(y)))
    for marker in series.find_all("path", "marker"):
        match = re.fullmatch(r"translate\((\S+) (\S+)\)", marker.attrs["transform"])
        assert match, marker.attrs["transform"]
        coords.append((float(match[1]), float(match[2])))
    return coords


def column(table: Node, header: str) -> list[str]:
    """The text of one column of a table, found by its header."""
    headers = [th.all_text() for th in table.find_all("th")]
    index = headers.index(header)
    return [
        row.find_all("td")[index].all_text() for row in table.find_all("tbody")[0].find_all("tr")
    ]


def rows(table: Node) -> list[list[str]]:
    """The text of each body row's cells."""
    return [[td.all_text() for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]
