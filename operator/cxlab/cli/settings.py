"""What the commands read from outside their flags, read once at start-up (cxlab.cli.main)
into one frozen object handed to every command: no command reads the environment or the clock
itself, and a test builds its own (a fixed clock, an empty home)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cxlab.config import OperatorConfig
from cxlab.times import now


@dataclass(frozen=True)
class ClusterPlaces:
    """Where the kubernetes client looks for a cluster, in its order: a Pod's service account
    (in-cluster), then $KUBECONFIG, else ~/.kube/config. Named when none is found."""

    service_host: str | None  # $KUBERNETES_SERVICE_HOST: set in every Pod
    kubeconfig: str | None  # $KUBECONFIG (a list, as kubectl reads it)
    default: Path  # ~/.kube/config

    def looked_at(self) -> str:
        """e.g. "in-cluster (KUBERNETES_SERVICE_HOST not set), KUBECONFIG (not set),
        /home/me/.kube/config (no such file)"."""
        pod = "set" if self.service_host else "not set"
        places = [f"in-cluster (KUBERNETES_SERVICE_HOST {pod})"]
        if self.kubeconfig:
            places.append(f"KUBECONFIG={self.kubeconfig}")
        else:
            places.append("KUBECONFIG (not set)")
            exists = "found" if self.default.exists() else "no such file"
            places.append(f"{self.default} ({exists})")
        return ", ".join(places)


@dataclass(frozen=True)
class Settings:
    """The start-up object: the operator's settings (CXLAB_* variables), where a cluster's
    configuration is looked for, the default results folder and the clock."""

    config: OperatorConfig
    cluster: ClusterPlaces
    pod_namespace: str | None = None  # $POD_NAMESPACE: the Lease's namespace by default
    results: Path = Path("out")  # `cxlab run` writes out/<experiment name> by default
    clock: Callable[[], datetime] = field(default=now)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """ValueError when a CXLAB_* variable is not what it should be."""
        home = environ.get("HOME")
        default = (Path(home) if home else Path.home()) / ".kube" / "config"
        return cls(
            config=OperatorConfig.from_environment(environ),
            cluster=ClusterPlaces(
                service_host=environ.get("KUBERNETES_SERVICE_HOST") or None,
                kubeconfig=environ.get("KUBECONFIG") or None,
                default=default,
            ),
            pod_namespace=environ.get("POD_NAMESPACE") or None,
        )
