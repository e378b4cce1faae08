"""workload.target on this machine (cxlab run): only a url, on loopback unless the user says
otherwise, its secret headers read from cxlab run's own environment, never from the file."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from cxlab.experiments.target import HEADER_ENV_PREFIX, TargetSpec
from cxlab.local.cores import DoesNotFit


class TargetRefused(DoesNotFit):
    """A target cxlab run will not call: one line naming the field (exit 2)."""


@dataclass(frozen=True)
class LocalTarget:
    url: str
    env: dict[str, str] = field(default_factory=dict, repr=False)  # never shown: secrets


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: where it points is not known before the runner resolves it


def local_target(
    target: TargetSpec, environ: Mapping[str, str], allow_remote: bool = False
) -> LocalTarget:
    """The URL the runners call and the variables they get, or why not."""
    where = "workload.target"
    if target.service is not None or target.url is None:
        raise TargetRefused(
            f"{where}.service: cxlab run has no cluster to find a Service in: give a url "
            f"(e.g. http://127.0.0.1:8080/), or apply the experiment to a cluster"
        )
    if target.tls is not None and target.tls.ca is not None:
        raise TargetRefused(
            f"{where}.tls.ca: a ConfigMap or Secret needs a cluster; cxlab run checks "
            f"certificates against this machine's CAs (or set insecureSkipVerify: true)"
        )
    host = urlsplit(target.url).hostname or ""
    if not allow_remote and not is_loopback(host):
        raise TargetRefused(
            f"{where}.url: {host} is not a loopback address: cxlab run loads only this "
            f"machine unless given --allow-remote-target (be sure the service is yours to load)"
        )
    env = {}
    for index, header in target.secret_headers():
        source = header.value_from
        assert source is not None
        at = f"{where}.headers[{index}].valueFrom"
        if source.env is None:
            raise TargetRefused(
                f"{at}.secretKeyRef: a Secret needs a cluster; cxlab run reads a header's "
                f"secret from its own environment: use valueFrom.env naming a variable"
            )
        value = environ.get(source.env, "")
        if not value:
            raise TargetRefused(f"{at}.env: the environment variable {source.env} is not set")
        env[f"{HEADER_ENV_PREFIX}{index}"] = value
    return LocalTarget(target.url, env)
