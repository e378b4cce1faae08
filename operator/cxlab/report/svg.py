"""Small line charts as inline SVG for the HTML report: no JavaScript, no dependencies, and the
same bytes for the same data, so a report can be diffed and archived."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Literal

Scale = Literal["linear", "log"]
Formatter = Callable[[float], str]

# Okabe-Ito first (readable by colour-blind readers), then darker extras for long legends.
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#7F3C8D",
    "#8C6D31",
    "#B22222",
    "#444444",
)
REFERENCE_COLOR = "#777777"
SHAPES = ("circle", "square", "diamond", "triangle")

WIDTH = 560
PLOT_HEIGHT = 250
MARGIN_LEFT = 64
MARGIN_RIGHT = 18
MARGIN_TOP = 46
AXIS_BAND = 46  # below the plot: tick labels and the x-axis title
LEGEND_ROW = 18
INSET = 10  # data never touches the frame: markers on the domain's edge stay whole
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
_CHAR_WIDTH = 6.1  # rough width of one 11px character, to wrap the legend
_EPS = 1e-9


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    error: float = 0.0  # drawn as a ±error bar when positive


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[Point, ...]
    color: str
    shape: str = "circle"
    dashed: bool = False
    markers: bool = True  # a single-point series always gets its marker
    joined: bool = True  # False: markers only, points that are not on a curve
    hollow: bool = False  # outlined markers, told apart from filled ones of the same shape


@dataclass(frozen=True)
class Axis:
    title: str
    scale: Scale = "linear"
    format: Formatter = str
    include_zero: bool = False


@dataclass(frozen=True)
class _Frame:
    """An axis laid out: its domain and tick values, mapped onto pixels [start, end]."""

    scale: Scale
    low: float
    high: float
    ticks: tuple[float, ...]
    start: float
    end: float

    def pixel(self, value: float) -> float:
        if self.scale == "log":
            value = max(value, self.low)
            fraction = math.log10(value / self.low) / math.log10(self.high / self.low)
        else:
            fraction = (value - self.low) / (self.high - self.low)
        fraction = min(max(fraction, 0.0), 1.0)
        return self.start + fraction * (self.end - self.start)


# --- tick values and labels ---------------------------------------------------------------


def _decimal(mantissa: int, exponent: int) -> float:
    # Parsing the decimal text gives the nearest float (5e-2 is 0.05, not 0.05000000000000001).
    return float(f"{mantissa}e{exponent}")


def nice_floor(value: float) -> float:
    """The largest 1, 2 or 5 x 10^k not above a positive value."""
    exponent = math.floor(math.log10(value))
    for mantissa in (5, 2, 1):
        if _decimal(mantissa, exponent) <= value * (1 + _EPS):
            return _decimal(mantissa, exponent)
    return _decimal(5, exponent - 1)


def nice_ceil(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k not below a positive value."""
    exponent = math.floor(math.log10(value))
    for mantissa in (1, 2, 5, 10):
        if _decimal(mantissa, exponent) >= value * (1 - _EPS):
            return _decimal(mantissa, exponent)
    return _decimal(2, exponent + 1)


def log_ticks(low: float, high: float) -> list[float]:
    """Tick values of a log axis over [low, high]: the powers of ten, or 1-2-5 steps when the
    range holds fewer than three of them; at most about eight labels."""
    first = math.ceil(math.log10(low) - _EPS)
    last = math.floor(math.log10(high) + _EPS)
    decades = [_decimal(1, e) for e in range(first, last + 1)]
    if len(decades) >= 3:
        stride = math.ceil(len(decades) / 8)
        return decades[::stride]
    steps = (
        _decimal(m, e) for e in range(math.floor(math.log10(low)), last + 1) for m in (1, 2, 5)
    )
    return [v for v in steps if low * (1 - _EPS) <= v <= high * (1 + _EPS)]


def nice_step(span: float, target: int = 5) -> float:
    """A 1, 2 or 5 x 10^k step that cuts `span` into about `target` intervals."""
    raw = span / target
    exponent = math.floor(math.log10(raw))
    for mantissa in (1, 2, 5):
        if _decimal(mantissa, exponent) >= raw * (1 - _EPS):
            return _decimal(mantissa, exponent)
    return _decimal(1, exponent + 1)


def linear_ticks(low: float, high: float) -> list[float]:
    step = nice_step(high - low)
    first = math.ceil(low / step - _EPS)
    last = math.floor(high / step + _EPS)
    # round() removes the float noise of k * step (0.30000000000000004).
    return [round(i * step, 12) for i in range(first, last + 1)]


def _significant(value: float) -> str:
    """Three significant digits, never in exponent notation."""
    rounded = float(f"{value:.3g}")
    return f"{rounded:f}".rstrip("0").rstrip(".")


def _rounded(value: float) -> float:
    # Pick a unit after rounding, so 0.9999 s reads "1 s" and not "1e+03 ms".
    return float(f"{value:.3g}")


def format_count(value: float) -> str:
    """1, 10, 100, 1k, 10k, 1.5M."""
    value = _rounded(value)
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return _significant(value / factor) + suffix
    return _significant(value)


def format_seconds(value: float) -> str:
    """50 ms, 1.5 s, 200 µs."""
    value = _rounded(value)
    if value == 0:
        return "0 s"
    if abs(value) < 1e-3:
        return f"{_significant(value * 1e6)} µs"
    if abs(value) < 1:
        return f"{_significant(value * 1e3)} ms"
    return f"{_significant(value)} s"


def format_percent(value: float) -> str:
    return f"{_significant(value)}%"


def format_mib(value: float) -> str:
    """A value already in MiB."""
    return f"{_significant(value)} MiB"


# --- layout ---------------------------------------------------------------------------------


def _frame(axis: Axis, values: list[float], start: float, end: float) -> _Frame:
    if axis.scale == "log":
        positive = [v for v in values if v > 0] or [1.0]
        low, high = min(positive), max(positive)
        if math.isclose(low, high):
            low, high = low / 2, high * 2  # one value: give it room either side
        low, high = nice_floor(low), nice_ceil(high)
        return _Frame("log", low, high, tuple(log_ticks(low, high)), start, end)
    low, high = min(values, default=0.0), max(values, default=1.0)
    if axis.include_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if math.isclose(low, high):
        low, high = low - (abs(low) or 1.0) / 2, high + (abs(high) or 1.0) / 2
    step = nice_step(high - low)
    low, high = math.floor(low / step + _EPS) * step, math.ceil(high / step - _EPS) * step
    return _Frame("linear", low, high, tuple(linear_ticks(low, high)), start, end)


def _axis_values(series: Sequence[Series], horizontal: bool) -> list[float]:
    values = []
    for line in series:
        for point in line.points:
            if horizontal:
                values.append(point.x)
            else:
                values += [point.y, point.y + point.error]
                if point.y - point.error > 0:
                    values.append(point.y - point.error)
    return values


def _legend_rows(series: Sequence[Series], width: float) -> list[list[tuple[float, Series]]]:
    """Legend entries flowed left to right into rows no wider than the plot."""
    rows: list[list[tuple[float, Series]]] = [[]]
    x = 0.0
    for line in series:
        item = 30 + len(line.label) * _CHAR_WIDTH + 16
        if rows[-1] and x + item > width:
            rows.append([])
            x = 0.0
        rows[-1].append((x, line))
        x += item
    return rows if rows[0] else []


# --- drawing --------------------------------------------------------------------------------


def _num(value: float) -> str:
    return f"{value:.1f}"


def _marker(shape: str, x: float, y: float, color: str, hollow: bool = False) -> str:
    paths = {
        "circle": "M-3.6,0a3.6,3.6 0 1,0 7.2,0a3.6,3.6 0 1,0 -7.2,0Z",
        "square": "M-3.2,-3.2h6.4v6.4h-6.4Z",
        "diamond": "M0,-4.4L4.4,0L0,4.4L-4.4,0Z",
        "triangle": "M0,-4.4L4,3.2H-4Z",
        "cross": "M-3.6,-3.6L3.6,3.6M3.6,-3.6L-3.6,3.6",  # strokes only: no area to fill
    }
    if shape == "cross":
        paint = f'fill="none" stroke="{color}" stroke-width="1.8"'
    elif hollow:
        paint = f'fill="#fff" stroke="{color}" stroke-width="1.4"'
    else:
        paint = f'fill="{color}" stroke="#fff" stroke-width="0.8"'
    return (
        f'<path class="marker" transform="translate({_num(x)} {_num(y)})" '
        f'd="{paths.get(shape, paths["circle"])}" {paint}/>'
    )


def _dash(line: Series) -> str:
    return ' stroke-dasharray="6 4"' if line.dashed else ""


def _series(line: Series, xf: _Frame, yf: _Frame) -> str:
    points = sorted(line.points, key=lambda p: p.x)
    parts = [f'<g class="series" data-label="{escape(line.label)}">']
    if line.joined and len(points) > 1:
        coords = " ".join(f"{_num(xf.pixel(p.x))},{_num(yf.pixel(p.y))}" for p in points)
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{line.color}" '
            f'stroke-width="1.8" stroke-linejoin="round"{_dash(line)}/>'
        )
    for p in points:
        if p.error > 0:
            parts.append(_error_bar(p, xf, yf, line.color))
    if line.markers or len(points) == 1:
        parts += [
            _marker(line.shape, xf.pixel(p.x), yf.pixel(p.y), line.color, line.hollow)
            for p in points
        ]
    parts.append("</g>")
    return "".join(parts)


def _error_bar(point: Point, xf: _Frame, yf: _Frame, color: str) -> str:
    x = xf.pixel(point.x)
    # On a log axis y - error can be ≤ 0; the frame clamps it to the bottom of the plot.
    top, bottom = _num(yf.pixel(point.y + point.error)), _num(yf.pixel(point.y - point.error))
    return (
        f'<path class="error-bar" d="M{_num(x)},{top}V{bottom}'
        f'M{_num(x - 3)},{top}h6M{_num(x - 3)},{bottom}h6" '
        f'stroke="{color}" stroke-width="1" fill="none"/>'
    )


def _grid(xf: _Frame, yf: _Frame, x_axis: Axis, y_axis: Axis) -> str:
    """Grid lines across the whole plot rectangle, tick labels outside it."""
    left, right = xf.start - INSET, xf.end + INSET
    bottom, top = yf.start + INSET, yf.end - INSET
    parts = []
    for tick in yf.ticks:
        y = _num(yf.pixel(tick))
        parts.append(
            f'<line x1="{_num(left)}" x2="{_num(right)}" y1="{y}" y2="{y}" stroke="#e6e6e6"/>'
            f'<text x="{_num(left - 6)}" y="{y}" text-anchor="end" dominant-baseline="middle">'
            f"{escape(y_axis.format(tick))}</text>"
        )
    for tick in xf.ticks:
        x = _num(xf.pixel(tick))
        parts.append(
            f'<line x1="{x}" x2="{x}" y1="{_num(top)}" y2="{_num(bottom)}" stroke="#e6e6e6"/>'
            f'<text x="{x}" y="{_num(bottom + 15)}" text-anchor="middle">'
            f"{escape(x_axis.format(tick))}</text>"
        )
    return f'<g class="grid" font-size="10.5" fill="#555">{"".join(parts)}</g>'


def _axis_titles(xf: _Frame, yf: _Frame, x_axis: Axis, y_axis: Axis) -> str:
    middle_x = (xf.start + xf.end) / 2
    middle_y = (yf.start + yf.end) / 2
    return (
        f'<text x="{_num(middle_x)}" y="{_num(yf.start + INSET + 34)}" text-anchor="middle" '
        f'font-size="11.5" fill="#333">{escape(x_axis.title)}</text>'
        f'<text transform="translate(14 {_num(middle_y)}) rotate(-90)" text-anchor="middle" '
        f'font-size="11.5" fill="#333">{escape(y_axis.title)}</text>'
    )


def _legend(rows: list[list[tuple[float, Series]]], top: float) -> str:
    parts = ['<g class="legend" font-size="11" fill="#222">']
    for index, row in enumerate(rows):
        y = top + index * LEGEND_ROW
        for offset, line in row:
            x = MARGIN_LEFT + offset
            if line.joined:
                parts.append(
                    f'<line x1="{_num(x)}" x2="{_num(x + 24)}" y1="{_num(y)}" y2="{_num(y)}" '
                    f'stroke="{line.color}" stroke-width="1.8"{_dash(line)}/>'
                )
            if line.markers or len(line.points) == 1:
                parts.append(_marker(line.shape, x + 12, y, line.color, line.hollow))
            parts.append(
                f'<text x="{_num(x + 30)}" y="{_num(y)}" dominant-baseline="middle">'
                f"{escape(line.label)}</text>"
            )
    parts.append("</g>")
    return "".join(parts)


def line_chart(
    title: str,
    x_axis: Axis,
    y_axis: Axis,
    series: Sequence[Series],
    subtitle: str = "",
) -> str:
    """One chart as an <svg> element: a line and markers per series, a legend below."""
    series = [s for s in series if s.points]
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    rows = _legend_rows(series, plot_width)
    height = MARGIN_TOP + PLOT_HEIGHT + AXIS_BAND + len(rows) * LEGEND_ROW + 6
    xf = _frame(
        x_axis, _axis_values(series, True), MARGIN_LEFT + INSET, MARGIN_LEFT + plot_width - INSET
    )
    yf = _frame(
        y_axis, _axis_values(series, False), MARGIN_TOP + PLOT_HEIGHT - INSET, MARGIN_TOP + INSET
    )
    body = [
        f'<text x="{MARGIN_LEFT}" y="18" font-size="14" font-weight="600" fill="#111">'
        f"{escape(title)}</text>",
        f'<text x="{MARGIN_LEFT}" y="34" font-size="11" fill="#666">{escape(subtitle)}</text>',
        f'<rect class="plot-area" x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{plot_width}" '
        f'height="{PLOT_HEIGHT}" fill="#fff" stroke="#bbb"/>',
        _grid(xf, yf, x_axis, y_axis),
        _axis_titles(xf, yf, x_axis, y_axis),
    ]
    if series:
        body += [_series(line, xf, yf) for line in series]
    else:
        body.append(
            f'<text x="{_num(MARGIN_LEFT + plot_width / 2)}" '
            f'y="{_num(MARGIN_TOP + PLOT_HEIGHT / 2)}" text-anchor="middle" fill="#888">'
            "no data yet</text>"
        )
    body.append(_legend(rows, MARGIN_TOP + PLOT_HEIGHT + AXIS_BAND + LEGEND_ROW / 2))
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}" '
        f'font-family="{escape(FONT)}"><title>{escape(title)}</title>{"".join(body)}</svg>'
    )
