"""Go-style durations ("50ms", "1.5s", "1m30s"): the one format shared by the spec, both
runners and the CRD, so a value means the same thing everywhere."""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)"
# Also the pattern of duration fields in the CRD schema.
DURATION_PATTERN = rf"^(0|({_PART})+)$"
_WHOLE = re.compile(DURATION_PATTERN)
_PARTS = re.compile(_PART)


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration; ValueError names what is wrong."""
    text = text.strip()
    if not _WHOLE.match(text):
        raise ValueError(
            f"{text!r} is not a duration: use a number with a unit, like 50ms, 1s, 1.5s or 1m30s"
        )
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PARTS.findall(text))


def format_duration(seconds: float) -> str:
    """Shortest readable form that parse_duration reads back: 0.05 -> '50ms', 90 -> '1m30s'."""
    if seconds == 0:
        return "0s"
    if seconds < 1e-3:
        return f"{_trim(seconds * 1e6)}us"
    if seconds < 1:
        return f"{_trim(seconds * 1e3)}ms"
    if seconds < 60 or not math.isclose(seconds, round(seconds)):
        return f"{_trim(seconds)}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest}s" if rest else f"{minutes}m"


def _trim(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
