"""Which service variant runs now (cxlab run): the trials come variant by variant (plan_trials
puts the variants outermost); before a variant's first trial the previous one is stopped and
this one started and awaited; a variant that could not start fails its trials with why."""

from __future__ import annotations

import os
import time
from types import TracebackType

from cxlab.experiments.plan import Trial
from cxlab.experiments.service_run import copy_variants
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.spec.service import ServiceSubject, Variant
from cxlab.local.service import RunningService, service_argv, service_environment
from cxlab.local.service_meter import TreeMeter, settle
from cxlab_contract.durations import parse_duration

# At most this long for a ready service's start-up to end (cxlab.local.service_meter.settle).
SETTLE_MAX_SECONDS = 30.0


class ServiceRuns:
    """A context: whatever variant is running when it exits is stopped."""

    def __init__(self, spec: ExperimentSpec, url: str, cores: set[int]) -> None:
        assert spec.service is not None
        self.service: ServiceSubject = spec.service
        self.spec = spec
        self.url = url
        self.cores = cores
        self.running: RunningService | None = None
        self.index = 0  # the variant started last
        self.problem: str | None = None  # why it is not running, if it is not

    def __enter__(self) -> ServiceRuns:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop()

    def ready_for(self, trial: Trial) -> str | None:
        """The trial's variant running and ready; why not (then the trial fails)."""
        if trial.service_variant != self.index:
            self._stop()
            self.index = trial.service_variant
            self.problem = self._start(copy_variants(self.spec, [trial])[self.index])
        elif self.running is not None and self.running.process.poll() is not None:
            self.problem = self.running.failure("exited")
            self._stop()
        return self.problem

    def _start(self, variant: Variant) -> str | None:
        self.running = RunningService.start(
            service_argv(self.service, variant),
            service_environment(os.environ, variant),
            self.cores,
            variant,
        )
        timeout = parse_duration(self.service.ready_timeout)
        started = time.monotonic()
        problem = self.running.wait_ready(self.url, timeout)
        if problem is not None:
            self._stop()
            return problem
        # its other workers' start-up ends before the first trial's window opens; a service
        # still busy when readyTimeout ends is measured as it is (it answers)
        left = max(timeout - (time.monotonic() - started), 0)
        settle(self.running.pid, min(left, SETTLE_MAX_SECONDS))
        return None

    def meter(self) -> TreeMeter:
        """A meter of the running variant's process tree, not yet started."""
        assert self.running is not None
        return TreeMeter(self.running.pid, len(self.cores))

    def exited(self) -> str | None:
        """Why the variant is no longer running (it exited during a trial), if it is not."""
        if self.running is not None and self.running.process.poll() is not None:
            return self.running.failure("exited during the trial")
        return None

    def _stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running = None
