"""The CLI's start-up object: everything the commands read from outside their flags, from
the environment it is given (not os.environ behind its back), and a bad CXLAB_* variable
told in one line, exit 2, whichever command was asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import EXAMPLES, ROOT

from cxlab.cli import main
from cxlab.cli.exits import USAGE_ERROR
from cxlab.cli.settings import Settings
from cxlab.experiments.spec import API_VERSION, KIND


def test_settings_come_from_the_environment_given(tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("kind: Config\n")
    environ = {"HOME": str(tmp_path), "CXLAB_WORKERS": "7", "CXLAB_RUNNER_IMAGE": "mine:1",
               "POD_NAMESPACE": "cxlab-system"}  # fmt: skip
    settings = Settings.from_environment(environ)
    assert (settings.config.workers, settings.config.runner_image) == (7, "mine:1")
    assert settings.pod_namespace == "cxlab-system"
    assert settings.results == Path("out")
    places = settings.cluster
    assert (places.service_host, places.kubeconfig) == (None, None)
    assert places.default == tmp_path / ".kube" / "config"
    assert places.looked_at() == (
        f"in-cluster (KUBERNETES_SERVICE_HOST not set), KUBECONFIG (not set), "
        f"{tmp_path / '.kube' / 'config'} (found)"
    )
    inside = Settings.from_environment({"HOME": str(tmp_path), "KUBECONFIG": "/a:/b",
                                        "KUBERNETES_SERVICE_HOST": "10.96.0.1"})  # fmt: skip
    assert inside.cluster.looked_at() == (
        "in-cluster (KUBERNETES_SERVICE_HOST set), KUBECONFIG=/a:/b"
    )
    assert inside.pod_namespace is None and inside.config.workers == 16


def test_a_bad_operator_variable_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CXLAB_WORKERS", "many")
    assert main(["plan", str(EXAMPLES / "quickstart.yaml")]) == USAGE_ERROR
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("cxlab: the operator's settings (CXLAB_* variables): "), err
    assert "'many'" in err, err


@pytest.mark.parametrize(
    ("variable", "value"),
    [("CXLAB_WORKERS", "many"), ("CXLAB_HOST_PORT", "80a"), ("CXLAB_RECONCILE_INTERVAL", "soon")],
)
def test_a_bad_operator_variable_is_named(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["plan", str(EXAMPLES / "quickstart.yaml")]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert variable in err and repr(value) in err, err


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """`cxlab plan ... | head -1`: the pipe closes under cxlab; it ends quietly, status 0.
    The plan is far larger than a pipe holds (64 KiB), so its writes meet the closed pipe."""
    spec = {"workload": {"type": "sleep", "tasks": 10, "rtts": [f"{i}ms" for i in range(1, 31)]},
            "models": [{"model": "threads", "workers": list(range(1, 31))}]}  # fmt: skip
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": API_VERSION, "kind": KIND,
                                    "metadata": {"name": "big"}, "spec": spec}))  # fmt: skip
    plan = subprocess.Popen(
        [sys.executable, "-m", "cxlab.cli", "plan", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "operator")},
    )  # fmt: skip
    assert plan.stdout is not None and plan.stderr is not None
    plan.stdout.readline()
    plan.stdout.close()
    err = plan.stderr.read().decode()
    assert plan.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
