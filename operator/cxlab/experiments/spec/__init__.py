"""The ConcurrencyExperiment resource as typed models: the one reading of the YAML a user
`kubectl apply`s, shared by the CLI (local backend) and the operator, and the source of the
CRD (cxlab.crd). Every rule is declared once beside the fields it spans (cxlab.rules), with the
message that names the field and says what to change, its CEL and its examples.

- workload.py: spec.workload (counted, duration and arrival runs, the target)
- models.py: spec.models, spec.resources, spec.placement
- capacity.py: spec.capacity, spec.search
- objectives.py: spec.objectives
- experiment.py: the spec as a whole and the rules across its parts
- limits.py, examples.py: the spec's own limits; what the rules' examples are written with
"""

from cxlab.experiments.spec.capacity import (
    Capacity,
    CapacityTarget,
    LatencyTarget,
    RateSearchSpec,
    SearchSpec,
    VerifySpec,
)
from cxlab.experiments.spec.examples import EXAMPLE
from cxlab.experiments.spec.experiment import ExperimentSpec, spec_json
from cxlab.experiments.spec.limits import (
    API_VERSION,
    DEFAULT_RESPONSE_BYTES,
    GO_MODELS,
    KIND,
    MAX_MODELS,
    MAX_OBJECTIVES,
    MAX_PROBES,
    MAX_PROCESS_WORKERS,
    MAX_RESULTS,
    MAX_THREAD_WORKERS,
    MAX_TRIALS,
    MAX_VERIFY_ATTEMPTS,
)
from cxlab.experiments.spec.models import ModelSpec, Placement, Resources
from cxlab.experiments.spec.objectives import (
    GROWS_WITH_LOAD,
    OBJECTIVE_METRICS,
    LatencyBound,
    Objective,
)
from cxlab.experiments.spec.workload import ArrivalSpec, StageSpec, WorkloadSpec

__all__ = [
    "API_VERSION",
    "DEFAULT_RESPONSE_BYTES",
    "EXAMPLE",
    "GO_MODELS",
    "GROWS_WITH_LOAD",
    "KIND",
    "MAX_MODELS",
    "MAX_OBJECTIVES",
    "MAX_PROBES",
    "MAX_PROCESS_WORKERS",
    "MAX_RESULTS",
    "MAX_THREAD_WORKERS",
    "MAX_TRIALS",
    "MAX_VERIFY_ATTEMPTS",
    "OBJECTIVE_METRICS",
    "ArrivalSpec",
    "Capacity",
    "CapacityTarget",
    "ExperimentSpec",
    "LatencyBound",
    "LatencyTarget",
    "ModelSpec",
    "Objective",
    "Placement",
    "RateSearchSpec",
    "Resources",
    "SearchSpec",
    "StageSpec",
    "VerifySpec",
    "WorkloadSpec",
    "spec_json",
]
