"""Scheduled runs of an experiment: when they fire, their compact history, regressions across
them."""
