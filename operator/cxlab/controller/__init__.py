"""The kopf operator: ConcurrencyExperiment → pinned trial Pods → Results in status.

handlers.py holds every @kopf decorator and nothing else; reconciler.py runs one pass, the
only place with I/O: gather, decide, build the status, write it, act on Pods; decide.py
decides (pure), cxlab/status.py builds the status (pure), pods.py builds manifests (pure),
observe.py reads Pods (pure), kube.py talks to the apiserver.
"""
