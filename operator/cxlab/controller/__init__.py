"""The kopf operator: ConcurrencyExperiment → pinned trial Pods → Results in status.

handlers.py holds every @kopf decorator and nothing else; service.py runs one reconcile
pass; reconcile.py decides (pure), pods.py builds manifests (pure), observe.py reads Pods
(pure), kube.py talks to the apiserver.
"""
