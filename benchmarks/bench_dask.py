"""Benchmark: the Dask engine on 10^6 to 10^8 sources (issue 13), against the memory engine.

Aggregate over 4 grouping sets (g1), (g2), (g3), (g4) of the synthetic table, C = 20 compute
nodes per set, scramblers n = 100, d = 50, σ = 0.2, seed 7. With ``--engine dask`` the rows
are generated per partition on the workers (``SyntheticRows``), never in the client; the
baseline (no countermeasure) of the report runs on the cluster too, as ``dpcomm run`` does.

Prints one JSON line per run: wall time of the whole ``run_aggregate`` (run + baseline + report)
and of the run alone, seconds per 10^6 sources, the peak resident memory of the client and of
each worker (``ru_maxrss``), and a digest of the result and of the delivered tuples (two runs
with the same digests gave the same result and delivered the same tuples).

Usage:
    python benchmarks/bench_dask.py --sources 1000000 --engine memory
    python benchmarks/bench_dask.py --sources 10000000 --engine dask --workers 2
    python benchmarks/bench_dask.py --sources 10000000 --engine dask --scheduler tcp://HOST:PORT
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import time
from typing import Any

SQL = (
    "SELECT g1, g2, g3, g4, COUNT(*), SUM(m1), AVG(m2) FROM synthetic "
    "GROUP BY GROUPING SETS ((g1), (g2), (g3), (g4))"
)


def _peak_mib() -> float:
    """Peak resident memory of this process, MiB (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def digest(outcome: Any) -> dict[str, str]:
    """Fingerprints of the result rows and of every flow's delivered mask."""
    from dpcomm.engine.run import PackedMasks

    result = hashlib.sha256(repr(outcome.rows).encode()).hexdigest()[:16]
    masks = outcome.run.delivered
    delivered = hashlib.sha256()
    for name in sorted(masks):
        if isinstance(masks, PackedMasks):
            delivered.update(masks.bits(name).tobytes())
        else:
            import numpy as np

            delivered.update(np.packbits(masks[name]).tobytes())
    return {"result": result, "delivered": delivered.hexdigest()[:16]}


def main() -> None:
    """Run the benchmark and print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sources", type=int, default=1_000_000)
    parser.add_argument("--engine", choices=["memory", "dask"], default="dask")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster workers")
    parser.add_argument("--scheduler", help="a running scheduler instead of a LocalCluster")
    parser.add_argument("--partitions", type=int, default=None)
    args = parser.parse_args()

    from dpcomm.data.partitioned import SyntheticRows
    from dpcomm.pipeline.runs import run_aggregate
    from dpcomm.plan import Scramblers
    from dpcomm.queries.aggregate import AggregateProgram

    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    rows = SyntheticRows(args.sources, seed=3)
    record: dict[str, Any] = {
        "sources": args.sources,
        "engine": args.engine,
        "grouping_sets": 4,
        "countermeasure": countermeasure.describe(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }
    started = time.perf_counter()
    if args.engine == "memory":
        program = AggregateProgram.from_sql(SQL, rows.read(0, args.sources), num_targets=20)
        outcome = run_aggregate(program, countermeasure, delta=1e-6, seed=7)
        workers_peak: list[float] = []
    else:
        from distributed import Client, LocalCluster

        from dpcomm.engine.dask_engine import DaskEngine

        program = AggregateProgram.from_sql(SQL, rows, num_targets=20)
        if args.scheduler:
            client = Client(args.scheduler)
            cluster = None
        else:
            cluster = LocalCluster(
                n_workers=args.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                memory_limit="4GiB",
            )
            client = Client(cluster)
        record["workers"] = len(client.scheduler_info()["workers"])
        started = time.perf_counter()
        engine = DaskEngine(client, partitions=args.partitions)
        outcome = run_aggregate(program, countermeasure, delta=1e-6, seed=7, engine=engine)
        record["partitions"] = outcome.run.details.partitions
        peaks = client.run(_peak_mib)
        workers_peak = [round(v, 1) for v in peaks.values()]
        client.close()
        if cluster is not None:
            cluster.close()
    seconds = time.perf_counter() - started
    record.update(
        {
            "seconds_total": round(seconds, 2),
            "seconds_run": round(outcome.run.seconds, 2),
            "seconds_baseline": round(outcome.baseline.seconds, 2),
            "seconds_per_million_sources": round(outcome.run.seconds / args.sources * 1e6, 3),
            "client_peak_mib": round(_peak_mib(), 1),
            "worker_peak_mib": workers_peak,
            "epsilon": outcome.report.privacy.epsilon,
            "messages": outcome.report.efficiency.messages,
            "max_channels_per_node": outcome.report.efficiency.max_channels_per_node,
            "tuples_used": outcome.report.utility.tuples_used,
            **digest(outcome),
        }
    )
    print(json.dumps(record))


if __name__ == "__main__":
    main()
