import pytest

from cxlab_contract.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("50ms", 0.05), ("1s", 1.0), ("1.5s", 1.5), ("1m30s", 90.0), ("250us", 250e-6), ("0", 0.0)],
)
def test_parses_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["100", "100 ms", "1sec", "-1s", "", "ms", "1.s"])
def test_rejects_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("seconds", [0.0, 0.0005, 0.05, 0.29, 1.0, 1.5, 60.0, 90.0, 3600.0])
def test_format_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_format_is_short() -> None:
    assert [format_duration(s) for s in (0.05, 1.0, 90.0, 120.0)] == ["50ms", "1s", "1m30s", "2m"]
