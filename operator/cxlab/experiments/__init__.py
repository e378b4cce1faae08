"""The ConcurrencyExperiment kind, pure: its spec, its trials, what a trial's Pods and Results
say, the decision of a pass, the status it records, the summary and the capacity plan. Shared
by both backends (cxlab.local runs trials as processes, cxlab.controller as Pods); no I/O here."""
