"""The cluster, for the commands that read one (summary, report, wait, compare and plan
--capacity of cx/NAME, the operator): its configuration loaded as the kubernetes client finds
it, or one line naming where it looked and exit 2, never the client's traceback."""

from __future__ import annotations

from cxlab.cli.exits import usage
from cxlab.cli.settings import ClusterPlaces, Settings


def connect(settings: Settings, label: str) -> None:
    """Load the cluster configuration (in-cluster, else $KUBECONFIG or ~/.kube/config)."""
    import yaml
    from kubernetes.config import ConfigException

    from cxlab.controller.kube import load_configuration

    try:
        load_configuration()
    # a kubeconfig that is not YAML, or not readable, reaches here past the client's checks
    except (ConfigException, yaml.YAMLError, OSError) as error:
        raise usage(label, unusable(settings.cluster, str(error))) from None


def unusable(places: ClusterPlaces, said: str) -> str:
    """Why no cluster can be read, in one line: nothing found, or what was found is broken."""
    if not (places.service_host or places.kubeconfig or places.default.exists()):
        return f"no cluster configuration found: looked for {places.looked_at()}"
    return f"cannot use the cluster configuration ({places.looked_at()}): {' '.join(said.split())}"
