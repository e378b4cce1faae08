"""How a latency is written (workloads/CONTRACT.md, The latency histogram): rounded to
runner-contract.json's latencyFigures.significantDigits significant digits, never to fixed
decimals, which would write a 1.4 µs latency as 1 µs. The Go runner rounds alike
(significant in internal/runner/histogram.go)."""

from __future__ import annotations

from cxlab_contract import runner_contract

SIGNIFICANT_DIGITS: int = runner_contract().latency_significant_digits


def significant(value: float) -> float:
    """value to SIGNIFICANT_DIGITS significant digits: rounded from its exact binary value,
    half to even on a true tie, as Go's strconv.FormatFloat(v, 'g', 9, 64) rounds."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
