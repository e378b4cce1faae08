"""What the handlers start with (cxlab.controller.handlers' start-up handler), handed over
by `cxlab operator` in kopf's memo rather than set as module globals; made from the
environment when kopf runs the handlers itself (`kopf run -m cxlab.controller.handlers`)."""

from __future__ import annotations

from dataclasses import dataclass

from cxlab.config import OperatorConfig
from cxlab.controller.metrics import OperatorMetrics

# The key of the operator's memo it is handed over under.
MEMO_KEY = "start"


@dataclass(frozen=True)
class OperatorStart:
    config: OperatorConfig
    # Served already (a standby's too, so Prometheus sees both replicas); None: the start-up
    # handler makes and serves them on config.operator_metrics_port.
    metrics: OperatorMetrics | None = None
    # The --namespace patterns served (none: every namespace).
    namespaces: tuple[str, ...] = ()
