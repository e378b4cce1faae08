"""The operator's shell: kopf handlers (handlers.py, every @kopf decorator and nothing else),
the passes that read, decide and act (experiment_pass.py, schedule_pass.py), the Kubernetes
I/O (kube.py), Prometheus (prometheus.py), leader election (leader.py), the wake-ups
(wakes.py), the operator's own metrics and settings. What is decided and built lives in the
kinds' pure packages, cxlab.experiments and cxlab.schedules.
"""
