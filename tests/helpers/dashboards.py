"""A schedule's status as the dashboards' and alerts' tests read it."""

from __future__ import annotations

# What the operator writes in a schedule's status (operator/cxlab/schedules/), by hand.
SCHEDULE_STATUS = {
    "startedRuns": 3,
    "skippedRuns": 1,
    "regressed": True,
    "capacityPlan": {
        "target": {
            "ratePerSecond": 100.0,
            "percentile": "p99",
            "latencySeconds": 0.25,
            "cpuUtilization": 0.7,
        },
        "rttSeconds": 0.1,
        "choice": "asyncio",
        "models": [
            {"variant": "asyncio", "model": "asyncio", "meets": True, "pods": 3, "cores": 3}
        ],
        "display": "3 Pods x 1 CPU, asyncio",
        "message": "asyncio: 3 Pods",
    },
    "history": [
        {
            "run": "s-1",
            "phase": "Succeeded",
            "points": [
                {
                    "point": "asyncio w=per-task",
                    "model": "asyncio",
                    "n": 1,
                    "wallSeconds": 0.06,
                    "throughputPerSecond": 16.0,
                    "cpuSecondsPerTask": 0.001,
                    "latencyP99Seconds": 0.05,
                    "peakRssBytes": 3e7,
                },
                {  # a service variant's (a template with spec.service and a capacity target)
                    "point": "service sync-4",
                    "model": "service",
                    "n": 1,
                    "capacityPerCore": 300.0,
                    "plannedReplicas": 3.0,
                },
            ],
        }
    ],
}
