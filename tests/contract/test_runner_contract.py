"""The Python half of the runner contract's shared cases (workloads/testdata): the Go
runner's tests (internal/runner/shared_cases_test.go) run the same files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import ROOT

from cxlab_contract import histogram, result, result_schema, runner_contract
from cxlab_contract.arrivals import RateProfile, parse_stages
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.result import encode, floor_seconds
from cxlab_contract.timeline import Timeline, halve
from cxlab_runner import host
from cxlab_runner.config import UsageError, build_parser, parse_config
from cxlab_runner.duration import FAILED, OK, TaskTimes, generator_verdict, result_parts

TESTDATA = ROOT / "workloads" / "testdata"


def test_an_oversized_result_is_cut_by_the_contracts_rule() -> None:
    # errors first (least frequent first), then the RSS timeline's resolution halved
    oversized = json.loads((TESTDATA / "oversized-result.json").read_text())
    line = encode(oversized) + "\n"
    assert len(line.encode()) <= runner_contract().result_max_bytes
    assert json.loads(line) == json.loads((TESTDATA / "truncated-result.json").read_text())


def test_an_oversized_arrival_result_is_cut_by_the_contracts_rule() -> None:
    # then the timeline halved to one interval, then the widest histograms lowered: the Go
    # runner's half is TestTheCutOfAnArrivalResultIsTheContractsRule
    oversized = json.loads((TESTDATA / "oversized-arrival-result.json").read_text())
    line = encode(oversized) + "\n"
    assert len(line.encode()) <= runner_contract().result_max_bytes
    assert json.loads(line) == json.loads((TESTDATA / "truncated-arrival-result.json").read_text())


@pytest.mark.parametrize("oversized", ["oversized-result.json", "oversized-arrival-result.json"])
def test_the_cut_keeps_the_host(oversized: str) -> None:
    # the longest host the schema allows, kept whole however far the cut goes: the Go
    # runner's half is TestTheCutKeepsTheHost
    longest: result.Host = {"cpuModel": "c" * 256, "kernel": "k" * 256}
    oversized_result = json.loads((TESTDATA / oversized).read_text())
    oversized_result["host"] = longest
    cut = json.loads(encode(oversized_result))
    assert len(json.dumps(cut, separators=(",", ":"))) + 1 <= runner_contract().result_max_bytes
    assert cut["host"] == longest


@pytest.mark.parametrize("oversized", ["oversized-result.json", "oversized-arrival-result.json"])
def test_the_cut_keeps_the_failure_kinds(oversized: str) -> None:
    # they sum to tasksFailed: dropping them would leave a Result that cannot say how its
    # tasks failed
    kinds: result.FailureKinds = {"connect": 1, "timeout": 2, "tls": 3, "status": 4, "other": 5}
    oversized_result = json.loads((TESTDATA / oversized).read_text())
    oversized_result["failureKinds"] = kinds
    cut = json.loads(encode(oversized_result))
    assert len(json.dumps(cut, separators=(",", ":"))) + 1 <= runner_contract().result_max_bytes
    assert cut["failureKinds"] == kinds


def test_the_failure_kinds_are_the_schemas() -> None:
    assert runner_contract().failure_kinds == result.FAILURE_KINDS
    assert result.FailureKinds.__required_keys__ == set(result.FAILURE_KINDS)


@pytest.mark.parametrize(
    "case",
    json.loads((TESTDATA / "cpuinfo.json").read_text())["cases"],
    ids=lambda case: case["name"],
)
def test_the_cpu_model_is_the_contracts(case: dict[str, Any]) -> None:
    # the Go runner's half: TestSharedCPUInfoCases (internal/measure/host_test.go)
    cpuinfo = None if case["cpuinfo"] is None else case["cpuinfo"].encode()
    assert host.cpu_model(cpuinfo, case["machine"].encode()) == case["cpuModel"]


def test_the_host_is_this_machines() -> None:
    uname_r = subprocess.run(["uname", "-r"], capture_output=True, text=True, check=True)
    read = host.read_host(host.CPUINFO)
    assert read["cpuModel"] not in ("", host.UNKNOWN)
    assert read["kernel"] == os.uname().release == uname_r.stdout.strip()


def test_an_unreadable_cpuinfo_is_an_unknown_cpu_not_an_error(tmp_path: Path) -> None:
    read = host.read_host(str(tmp_path / "no-cpuinfo"))
    assert read == {"cpuModel": "unknown", "kernel": os.uname().release}


def test_the_host_is_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    def counted(path: str) -> result.Host:
        reads.append(path)
        return {"cpuModel": "c", "kernel": "k"}

    monkeypatch.setattr(host, "read_host", counted)
    host.host.cache_clear()
    try:
        assert host.host() == host.host() == {"cpuModel": "c", "kernel": "k"}
        assert reads == [host.CPUINFO]
    finally:
        host.host.cache_clear()


def _with_host(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((TESTDATA / "truncated-arrival-result.json").read_text())
    doc["host"] = {"cpuModel": "AMD EPYC 7R13 Processor", "kernel": "6.1.0-18-amd64", **fields}
    return doc


def test_the_schema_takes_a_result_with_or_without_its_host() -> None:
    validator = jsonschema.Draft202012Validator(result_schema())
    doc = _with_host()
    validator.validate(doc)
    validator.validate(_with_host(cpuModel="c" * 256, kernel="k" * 256))
    del doc["host"]
    validator.validate(doc)  # a Result written before it


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d["host"].update(cores="8"),  # an extra key
        lambda d: d["host"].pop("kernel"),
        lambda d: d["host"].pop("cpuModel"),
        lambda d: d["host"].update(cpuModel="c" * 257),
        lambda d: d["host"].update(kernel="k" * 257),
        lambda d: d["host"].update(kernel=6.1),
        lambda d: d["host"].update(cpuModel=None),
        lambda d: d.update(host="x86_64"),
        lambda d: d.update(host=None),
    ],
    ids=[
        "extra key", "no kernel", "no cpuModel", "cpuModel too long", "kernel too long",
        "kernel a number", "cpuModel null", "host a string", "host null",
    ],
)  # fmt: skip
def test_the_schema_refuses_a_bad_host(spoil: Any) -> None:
    doc = _with_host()
    spoil(doc)
    assert list(jsonschema.Draft202012Validator(result_schema()).iter_errors(doc))


def test_the_latency_histogram_is_the_contracts() -> None:
    # the Go runner's half: TestSharedHistogramCases (shared_cases_test.go)
    for case in json.loads((TESTDATA / "histograms.json").read_text())["cases"]:
        built = histogram.build(case["latenciesSeconds"])
        want = case["histogram"]
        assert {k: built[k] for k in ("schema", "zeroCount", "offset", "counts")} == {
            k: want[k] for k in ("schema", "zeroCount", "offset", "counts")
        }, case["name"]
        for k in ("sum", "min", "max"):  # to 9 significant digits: relative, not absolute
            assert built[k] == pytest.approx(want[k], rel=1e-8, abs=1e-15), case["name"]


def test_a_barrier_needs_the_metrics_port() -> None:
    with pytest.raises(UsageError, match="--metrics-port"):
        parse_config(
            ["--model", "asyncio", "--workload", "sleep", "--tasks", "1", "--barrier-timeout", "5s"]
        )


def test_the_floor_is_the_contracts_formula() -> None:
    cases = json.loads((TESTDATA / "floors.json").read_text())["cases"]
    for case in cases:
        floor = floor_seconds(
            case["workload"], case["tasks"], case["workers"],
            parse_duration(case["rtt"]), parse_duration(case["hold"]),
        )  # fmt: skip
        assert floor == pytest.approx(case["floorSeconds"]), case


def test_the_python_runner_takes_the_contracts_flags() -> None:
    # the Go runner's half: TestTheGoRunnerTakesTheContractsFlags
    durations = {"rtt", "hold", "linger", "barrier-timeout", "final-read", "duration", "warmup"}
    durations |= {"max-lag", "request-timeout"}
    taken: dict[str, str | None] = {}
    for action in build_parser()._actions:
        if action.option_strings == ["-h", "--help"]:
            continue
        (option,) = action.option_strings
        name = option.removeprefix("--")
        if action.required:
            taken[name] = None
        elif name in durations:
            taken[name] = format_duration(action.default)
        elif isinstance(action.default, bool):  # a switch, as Go's flag.Bool prints it
            taken[name] = str(action.default).lower()
        else:
            taken[name] = "" if action.default is None else str(action.default)
    assert taken == runner_contract().flags


def _past(bound: object, step: int) -> str:
    if isinstance(bound, str):  # a duration: one millisecond past it
        return format_duration(parse_duration(bound) + step * 1e-3)
    assert isinstance(bound, int)
    return str(bound + step)


_ARRIVAL = ["--arrival", "uniform", "--rate", "1000", "--duration", "1s"]
_LIMITED = {  # flag: what else the command line needs for the flag to apply
    **{f: ["--tasks", "1"] for f in ("tasks", "workers", "iterations", "rtt", "hold", "pod")},
    "barrier-timeout": ["--tasks", "1"],
    "final-read": ["--tasks", "1"],
    "duration": ["--workers", "1"],
    "rate": ["--arrival", "uniform", "--stages", "2s:1"],  # 1 to 1,000,001 arrivals
    "max-lag": _ARRIVAL,
    "seed": ["--arrival", "poisson", "--rate", "1000", "--duration", "1s"],
    "request-timeout": ["--tasks", "1"],
}
_HTTP = ["--workload", "http", "--target-url", "http://127.0.0.1:1/"]
_WORKLOAD = {"request-timeout": _HTTP}  # flag: its workload, if not sleep


@pytest.mark.parametrize("flag", sorted(_LIMITED))
def test_the_python_runner_keeps_the_contracts_limits(flag: str) -> None:
    # The spec promises exactly these numbers: the runner must take all it lets through.
    limit = runner_contract().limits[flag]
    workload = _WORKLOAD.get(flag, ["--workload", "sleep"])
    base = ["--model", "asyncio", *workload, "--metrics-port", "9", *_LIMITED[flag]]
    for value, accepted in (
        (_past(limit.min, 0), True),
        (_past(limit.max, 0), True),
        (_past(limit.min, -1), False),
        (_past(limit.max, 1), False),
    ):
        argv = [*base, f"--{flag}", value]
        if accepted:
            parse_config(argv)
        else:
            with pytest.raises(UsageError):
                parse_config(argv)


def test_the_python_runner_keeps_the_bodys_limit() -> None:
    # limits.body bounds --body's bytes (UTF-8), not a number it is
    most = runner_contract().limits["body"].max
    base = ["--model", "asyncio", *_HTTP, "--tasks", "1", "--method", "POST"]
    assert parse_config([*base, "--body", "x" * most]).body == b"x" * most
    assert parse_config([*base, "--body", ""]).body == b""
    with pytest.raises(UsageError, match="--body"):
        parse_config([*base, "--body", "x" * (most + 1)])
    with pytest.raises(UsageError, match="--body"):  # 2 bytes each in UTF-8
        parse_config([*base, "--body", "\u00e9" * (most // 2 + 1)])


def test_every_limit_is_a_flag_or_a_spec_fields() -> None:
    # responseBytes: the delay target's; pods: a trial's Pods (spec.models[].pods);
    # stage-duration: each of --stages
    flags = set(runner_contract().flags)
    assert set(runner_contract().limits) - flags == {"responseBytes", "pods", "stage-duration"}


def _typed_keys(typed: type) -> dict[str, set[str]]:
    """A TypedDict's keys: (required, optional)."""
    return {"required": set(typed.__required_keys__), "optional": set(typed.__optional_keys__)}


def _schema_keys(node: dict[str, object]) -> dict[str, set[str]]:
    properties = set(node["properties"])  # type: ignore[call-overload]
    required = set(node.get("required", []))  # type: ignore[call-overload]
    return {"required": required, "optional": properties - required}


@pytest.mark.parametrize(
    ("typed", "path"),
    [
        (result.Result, ()),
        (result.Latencies, ("latencySeconds",)),
        (result.ContextSwitches, ("taskContextSwitches",)),
        (result.Syscalls, ("syscalls",)),
        (result.RssTimeline, ("rssTimeline",)),
        (result.Error, ("errors", "items")),
        (histogram.Histogram, ("latencyHistogram",)),
        (histogram.Histogram, ("arrival", "waitHistogram")),
        (result.Arrival, ("arrival",)),
        (result.Lag, ("arrival", "lagSeconds")),
        (result.Warmup, ("warmup",)),
        (Timeline, ("timeline",)),
        (result.Host, ("host",)),
        (result.FailureKinds, ("failureKinds",)),
    ],
)
def test_the_typed_result_has_the_schemas_keys(typed: type, path: tuple[str, ...]) -> None:
    root = node = result_schema()
    for step in path:
        node = node["properties"][step] if step != "items" else node["items"]
        if "$ref" in node:  # "#/$defs/histogram"
            node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
    assert _typed_keys(typed) == _schema_keys(node)


def test_the_results_limits_are_the_schemas() -> None:
    properties = result_schema()["properties"]
    assert result.MAX_ERRORS == properties["errors"]["maxItems"] == 5
    assert result.MAX_SYSCALL_COUNTS == 12
    assert result.MAX_TIMELINE_SAMPLES == 64


ARRIVALS = json.loads((TESTDATA / "arrivals.json").read_text())


@pytest.mark.parametrize("case", ARRIVALS["schedules"], ids=lambda case: case["name"])
def test_the_schedule_is_the_contracts(case: dict[str, Any]) -> None:
    # the Go runner's half: TestSharedScheduleCases; the values are closed-form, by hand
    stages = parse_stages(",".join(case["stages"])) if case["stages"] else ()
    duration = parse_duration(case["duration"]) if case["duration"] else 0.0
    profile = RateProfile(case["rate"], stages, duration)
    assert profile.expected_arrivals() == pytest.approx(case["expectedArrivals"], abs=1e-9)
    for s, t in case["points"]:
        assert profile.inverse(s) == pytest.approx(t, abs=1e-9), s
    assert profile.schedule("uniform") == pytest.approx(case["uniform"], abs=1e-9)


@pytest.mark.parametrize("case", ARRIVALS["timelines"], ids=lambda case: case["name"])
def test_the_timeline_and_warmup_are_the_contracts(case: dict[str, Any]) -> None:
    tasks = case["tasks"]
    times = TaskTimes(
        [t[0] for t in tasks],
        [t[0] for t in tasks],
        [t[1] for t in tasks],
        [t[2] for t in tasks],
        bytearray(OK if t[3] else FAILED for t in tasks),
    )
    end = max(t[2] for t in tasks)
    parts = result_parts(times, duration=end, warmup=case["warmup"], wall=end, arrival=None)
    for key, value in case["timeline"].items():
        assert parts["timeline"][key] == pytest.approx(value, abs=1e-9), key
    assert parts["latencySeconds"] == pytest.approx(case["latencySeconds"])
    assert parts["warmup"] == case["warmupFigures"]


@pytest.mark.parametrize("case", ARRIVALS["halvings"], ids=lambda case: case["name"])
def test_a_timeline_is_halved_by_the_contracts_rule(case: dict[str, Any]) -> None:
    assert halve(case["timeline"]) == case["halved"]


@pytest.mark.parametrize("case", ARRIVALS["generators"], ids=lambda case: case["name"])
def test_the_generators_verdict_is_the_contracts(case: dict[str, Any]) -> None:
    times = TaskTimes(case["scheduled"], case["issued"])
    verdict = generator_verdict(
        times, parse_duration(case["duration"]), parse_duration(case["maxLag"]), case["warmup"]
    )
    assert verdict["ratePerSecond"] == pytest.approx(case["ratePerSecond"])
    assert verdict["achievedRatePerSecond"] == pytest.approx(case["achievedRatePerSecond"])
    assert verdict["lagSeconds"] == pytest.approx(case["lagSeconds"], abs=1e-9)
    assert verdict["generatorSaturated"] is case["saturated"]
    assert (verdict["saturation"] is not None) is case["saturated"]
