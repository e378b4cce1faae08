"""The ConcurrencyExperiment kind, pure: its spec, its trials, what a trial's Pods say, the
decision of a pass and the status it records (what the measurements say is cxlab.analysis).
Shared by both backends (cxlab.local runs trials as processes, cxlab.controller as Pods); no I/O
here."""
