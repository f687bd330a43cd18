"""Layer 6: executors of a plan (the vectorized simulator; the networked runtime comes later)."""

from dpcomm.engine.runs import AggregateRun, KMeansRun, run_aggregate, run_kmeans
from dpcomm.engine.simulator import SimulationRun, extra_consents, simulate

__all__ = [
    "AggregateRun",
    "KMeansRun",
    "SimulationRun",
    "extra_consents",
    "run_aggregate",
    "run_kmeans",
    "simulate",
]
