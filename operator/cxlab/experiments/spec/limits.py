"""The spec's own limits: what bounds an experiment's matrix, its Results and the cost of the
CRD's validation rules (each field's own bounds are in cxlab.experiments.fields)."""

from __future__ import annotations

API_VERSION = "cxlab.dev/v1alpha1"
KIND = "ConcurrencyExperiment"

GO_MODELS = ("goroutines",)

# A cluster experiment's status keeps a compact entry per trial (about 0.5 KiB) and its
# Results go to ConfigMaps of 100 trials each (cxlab.experiments.results_store): at 1,000
# trials the status is about 0.5 MiB, a third of etcd's limit on one object. A trial of N > 1
# Pods keeps N + 1 Results (each Pod's and the merged one): MAX_RESULTS counts them, so that
# a chunk of 100 trials stays under the 1 MiB a ConfigMap holds (about 0.6 KiB gzip'd each).
MAX_TRIALS = 1000
MAX_RESULTS = 2000
# Limits that let the apiserver bound the cost of the CRD's validation rules (and
# fields.MAX_LIST_ITEMS).
MAX_MODELS = 7
DEFAULT_RESPONSE_BYTES = 64  # body size the delay target sends when responseBytes is unset
# One OS process per worker: past this a trial measures fork storms, not the model.
MAX_PROCESS_WORKERS = 512
# Plans a verification tries before it says the plan is refuted: each adds a Pod.
MAX_VERIFY_ATTEMPTS = 5
# Probes of one model's rate search: doubling from 1/s past a million takes 20.
MAX_PROBES = 20
# Probes at each of a search's boundary rates (search.rate.repeats): a rate holds only if all
# of them hold; past a handful they add time, not sureness a spread would not show.
MAX_REPEATS = 10
# One OS thread per worker: every thread stack is two memory mappings, and the kernel's
# default vm.max_map_count (65530) runs out near 32,000 threads in one process.
MAX_THREAD_WORKERS = 30_000
# Objectives an experiment may gate on (spec.objectives); bounds the CRD rules' cost too.
MAX_OBJECTIVES = 16
