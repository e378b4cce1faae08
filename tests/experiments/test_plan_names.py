"""Trial names, Pod names and label values stay within Kubernetes' limits for every spec the
bounds allow: the longest experiment name, the longest model, the largest worker count and
GOMAXPROCS, the longest-written RTT, the last repetition and trial index."""

from __future__ import annotations

import random
import re
from typing import Any

from cxlab.config import OperatorConfig
from cxlab.experiments.fields import LIMITS, MAX_LIST_ITEMS, NAME_MAX_LENGTH
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pods import build_target_pod, build_trial_pod
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import API_VERSION, KIND, MAX_TRIALS
from cxlab_contract.durations import format_duration, parse_duration

# Kubernetes' own rules (k8s.io/apimachinery/pkg/util/validation).
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
MAX_ATTEMPTS = 99  # far past any CXLAB_MAX_ATTEMPTS anyone sets

# Each unit's longest form (999.999 of it) and the longest of the minute forms.
LONGEST_RTTS = ["999.999us", "999.999ms", "59.999s", "3599.999s", "59m59s", "1h"]


def test_no_rtt_within_the_bounds_is_written_longer_than_nine_characters() -> None:
    most = parse_duration(LIMITS["rtt"].max)
    samples = [10 ** random.uniform(-9, 3.56) for _ in range(20_000)]
    samples += [parse_duration(r) for r in LONGEST_RTTS] + [0.0, most]
    longest = max((format_duration(s) for s in samples if s <= most), key=len)
    assert len(longest) <= 9, longest


def extreme() -> Any:
    """The longest names the bounds allow, as one valid experiment."""
    repetitions = MAX_LIST_ITEMS
    rtts = LONGEST_RTTS[: MAX_TRIALS // repetitions]
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "n" * NAME_MAX_LENGTH},
        "spec": {
            "workload": {"type": "sleep", "tasks": LIMITS["tasks"].max, "rtts": rtts},
            "models": [
                {
                    "model": "goroutines",
                    "workers": [LIMITS["workers"].max],
                    "gomaxprocs": [LIMITS["gomaxprocs"].max],
                }
            ],
            "repetitions": repetitions,
        },
    }
    return parse_experiment(document)


def test_every_trial_pod_of_the_longest_experiment_has_valid_names_and_labels() -> None:
    experiment = extreme()
    trials = plan_trials(experiment.spec)
    assert trials[-1].index >= 100 and trials[-1].repetition == MAX_LIST_ITEMS
    longest = max((t.name for t in trials), key=len)
    assert len(longest) <= 63, longest
    pods = [
        build_trial_pod(
            experiment=experiment.name,
            namespace="lab",
            uid="u",
            spec=experiment.spec,
            trial=trial,
            attempt=MAX_ATTEMPTS,
            config=OperatorConfig(),
            target_url=None,
        )
        for trial in trials
    ]
    pods.append(
        build_target_pod(
            experiment=experiment.name,
            namespace="lab",
            uid="u",
            spec=experiment.spec,
            config=OperatorConfig(),
        )
    )
    for pod in pods:
        name = pod["metadata"]["name"]
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        for key, value in pod["metadata"]["labels"].items():
            label = key.rpartition("/")[2]
            assert len(label) <= 63 and LABEL_NAME.match(label), key
            assert len(value) <= 63 and LABEL_VALUE.match(value), f"{key}={value}"
