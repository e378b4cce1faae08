"""What one operator process remembers about one experiment between passes. All of it can be
lost (a restart) without losing results: status is the record, this only saves requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from cxlab.experiments.followups import Trials
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.refusal import Refusal


@dataclass
class Memory:
    scraped: set[str] = field(default_factory=set)  # trials whose /metrics answered
    # Running trials' Pods whose final read was tried (once each: whether it said finished)
    final_reads: dict[str, dict[str, bool]] = field(default_factory=dict)
    # Pods whose runner gave its Result at the final read (Pod name → the Result's text):
    # seen as ended with it, before the container exits and the kubelet reports it
    results: dict[str, str] = field(default_factory=dict)
    last_progress_patch: float = 0.0
    next_scrape: float = 0.0  # time.monotonic() from which running trials are read again
    tasks_done: dict[str, int] = field(default_factory=dict)  # running trials, last read
    # Pods this process created, until the index has them (time.monotonic(), as sent)
    created: dict[str, tuple[float, PodView]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)  # Pods it deleted, while still indexed
    released: set[tuple[str, int]] = field(default_factory=set)  # (trial, attempt)
    # The trials after the sweep, by the ended trials they follow from: planned by the pass
    # that recorded those (its decision), not again from the Results' ConfigMaps every pass.
    followed: tuple[frozenset[str], Trials] | None = None
    # A Pod the apiserver refused when this process created it, until the experiment ends:
    # the next pass's decision (gather hands it to decide). Lost in a restart, the attempt
    # counted in status finds no Pod and is created again, refused again the same way.
    refused: Refusal | None = None
    # spec.service: variants whose copy this process could not make, and why (their trials
    # fail in the next pass; lost in a restart, the copy is tried again and refused again).
    copy_refused: dict[int, str] = field(default_factory=dict)
    # Copies this process deleted (variant → time.monotonic()), until seen gone: timed.
    copy_deleted: dict[int, float] = field(default_factory=dict)
