"""Benchmark: one deployed Aggregate round on loopback (worker processes, mutual TLS 1.3).

1,000 sources, 10 scramblers (n = 100, d = 50, σ = 0.2) and 20 compute nodes (one grouping
set). Reports the start-up (from the call to the plan sent: planning the round, certificates,
worker processes and every node's TLS registration with the coordinator, which overlap) and its
parts, and the round itself (plan sent -> result assembled). Checks that the round is the
in-memory engine's run.

Usage: python benchmarks/bench_deployment.py [--sources N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

SQL = "SELECT g1, COUNT(*), AVG(m1), SUM(m2) FROM synthetic GROUP BY g1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from dpcomm.data import synthetic_table
    from dpcomm.engine.memory import simulate
    from dpcomm.engine.network.deploy import NetworkEngine
    from dpcomm.plan import Scramblers
    from dpcomm.queries.aggregate import AggregateProgram

    table = synthetic_table(num_rows=args.sources, seed=0)
    program = AggregateProgram.from_sql(SQL, table, num_targets=20)
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    engine = NetworkEngine(transport="tls", timeout=120, idle_seconds=60)
    start = time.perf_counter()
    run = engine.execute(program, countermeasure, delta=1e-4, seed=0)
    wall = time.perf_counter() - start
    reference = simulate(program, countermeasure, delta=1e-4, seed=0)
    wire = run.details.wire
    timings = wire.timings
    startup = timings["startup_seconds"]
    document = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "sources": args.sources,
        "scramblers": run.transformed.num_scramblers(),
        "num_targets": 20,
        "wall_seconds": round(wall, 2),
        "startup_seconds": round(startup, 2),
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "frames": wire.frames,
        "data_frames": wire.data_frames,
        "bytes": wire.bytes,
        "frame_size": wire.frame_size,
        "plan_messages": sum(f.messages for f in run.traffic),
        "same_run_as_memory_engine": run.result == reference.result
        and all((run.delivered[f] == reference.delivered[f]).all() for f in run.delivered)
        and [(f.messages, f.dummies) for f in run.traffic]
        == [(f.messages, f.dummies) for f in reference.traffic],
        "errors": dict(run.details.errors),
    }
    if args.json:
        print(json.dumps(document, indent=2))
        return
    for key, value in document.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
