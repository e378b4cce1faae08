"""asyncio: W coroutines pulling tasks, or (W = tasks) one coroutine per task gathered at
once — the bare program's shape, so the comparison is like for like."""

from __future__ import annotations

import asyncio
import time

from cxlab_runner.config import RunnerConfig
from cxlab_runner.openloop import run_async
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import AsyncTask, async_task


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    if config.duration:
        workers, phase.times = asyncio.run(
            run_async(config, recorder, phase, lambda: async_task(config))
        )
        return workers
    asyncio.run(_run(config, recorder, phase))
    return config.workers


async def _run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> None:
    started, ok, failed, clock = recorder.started, recorder.ok, recorder.failed, time.perf_counter

    if config.workload in ("sleep", "hold"):
        # Sleep awaited right here: one coroutine frame per task, as in a bare program,
        # instead of a second one around asyncio.sleep. A sleep cannot fail.
        seconds = config.rtt if config.workload == "sleep" else config.hold
        sleep = asyncio.sleep

        async def one(task: AsyncTask) -> None:
            started()
            begin = clock()
            await sleep(seconds)
            ok(clock() - begin)

    else:

        async def one(task: AsyncTask) -> None:
            started()
            begin = clock()
            try:
                await task()
            except Exception as error:
                failed(error)
                return
            ok(clock() - begin)

    remaining = iter(range(config.tasks))

    async def worker() -> None:
        task = async_task(config)
        for _ in remaining:  # a shared iterator: each task is taken by exactly one worker
            await one(task)

    phase.begin()
    if config.one_per_task:
        task = async_task(config)
        await asyncio.gather(*(one(task) for _ in range(config.tasks)))
    else:
        await asyncio.gather(*(worker() for _ in range(config.workers)))
    phase.end()
