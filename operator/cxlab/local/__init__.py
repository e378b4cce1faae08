"""The local backend: an experiment on this machine, each trial a pinned subprocess."""
