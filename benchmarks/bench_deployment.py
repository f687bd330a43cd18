"""Benchmark: one deployed Aggregate round on loopback (separate processes, mutual TLS 1.3).

1,000 sources, 10 scramblers (n = 100, d = 50, σ = 0.2) and 20 compute nodes (one grouping
set). Reports the wall time split into certificates, process start-up, registration (every
node's TLS connection to the coordinator) and the round itself (plan sent -> result
assembled), and the bytes on the wire against the simulator's count (messages × frame size).

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
    from dpcomm.engine.network.deploy import deploy_local
    from dpcomm.plan import Scramblers
    from dpcomm.queries.aggregate import AggregateProgram
    from dpcomm.queries.groupby import compare_results, reference_result

    table = synthetic_table(num_rows=args.sources, seed=0)
    program = AggregateProgram.from_sql(SQL, table, num_compute_nodes=20)
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    start = time.perf_counter()
    report = deploy_local(
        program, countermeasure, delta=1e-4, seed=0, timeout=120, collect_seconds=60
    )
    wall = time.perf_counter() - start
    expected = reference_result(program.query, program.table, report.masks(args.sources))
    wire = report.wire_summary()
    data_bytes = sum(link.bytes for link in report.links if link.data_frames)
    document = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "sources": args.sources,
        "scramblers": len(report.scramblers),
        "compute_nodes": 20,
        "seconds": {**report.timings, "total_with_simulation_and_accounting": wall},
        "result_matches_duckdb": compare_results(report.result, expected) == [],
        "errors": report.errors,
        "frame_size": report.frame_size,
        "data_frames": wire["data_frames"],
        "simulated_data_messages": report.simulated["data_messages"],
        "control_frames": wire["control_frames"],
        "bytes_on_the_wire": wire["bytes"],
        "bytes_on_data_links": data_bytes,
        "simulated_bytes_at_deployed_frame_size": report.simulated["bytes_at_deployed_frame_size"],
        "simulated_bytes_at_simulator_frame_size": report.simulated["bytes"],
        "max_data_channels_by_role": wire["max_data_channels_by_role"],
        "simulated_max_channels_by_role": report.simulated["max_channels_by_role"],
    }
    if args.json:
        print(json.dumps(document, indent=2))
        return
    for key, value in document.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
