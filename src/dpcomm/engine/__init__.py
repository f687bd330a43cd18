"""Layer 5: engines that execute a plan's roles: in memory (the simulator) and over a network.

Every engine returns a :class:`Run` and gets the same report. Names are imported on first use
(a network worker imports only what it runs).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.engine.memory import (
        simulate,
    )
    from dpcomm.engine.report import (
        AggregateRun,
        Engine,
        KMeansRun,
        MemoryEngine,
        privacy_report,
        run_aggregate,
        run_kmeans,
    )
    from dpcomm.engine.run import (
        Run,
        prepare,
    )

__getattr__, __dir__ = attach(
    __name__,
    {
        "dpcomm.engine.run": (
            "Run",
            "prepare",
        ),
        "dpcomm.engine.memory": ("simulate",),
        "dpcomm.engine.report": (
            "AggregateRun",
            "Engine",
            "KMeansRun",
            "MemoryEngine",
            "privacy_report",
            "run_aggregate",
            "run_kmeans",
        ),
    },
)

__all__ = [
    "AggregateRun",
    "Engine",
    "KMeansRun",
    "MemoryEngine",
    "Run",
    "prepare",
    "privacy_report",
    "run_aggregate",
    "run_kmeans",
    "simulate",
]
