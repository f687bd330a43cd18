"""Benchmark: the simulator on the issue #3 scenarios (wall time, peak memory, messages/s).

Each scenario runs in a fresh Python process so that its peak resident memory is its own.

Usage: python benchmarks/bench_simulator.py [--quick] [--scenario NAME]

Scenarios:
  aggregate-1m   Aggregate, 1,000,000 sources, 4 grouping sets of C = 20 compute nodes,
                 scramblers n = 100, d = 50, σ = 0.2 (goal: <= 10 s, <= 2 GB)
  kmeans-fashion K-means on Fashion-MNIST (60k train, 10k test), K = 10, I = 10,
                 scramblers n = 100, d = 50, σ = 0.9 (goal: <= 60 s); needs `make data`
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time

SCENARIOS = ("aggregate-1m", "kmeans-fashion")
SQL = (
    "SELECT g1, g2, g3, g4, COUNT(*), AVG(m1), SUM(m2) FROM synthetic "
    "GROUP BY GROUPING SETS ((g1), (g2), (g3), (g4))"
)


def run_scenario(name: str, quick: bool) -> dict[str, object]:
    """Run one scenario in this process; return its measurements."""
    from dpcomm.plan import Scramblers

    timings: dict[str, float] = {}
    start = time.perf_counter()
    if name == "aggregate-1m":
        from dpcomm.data import synthetic_table
        from dpcomm.pipeline.runs import run_aggregate
        from dpcomm.queries.aggregate import AggregateProgram

        rows = 100_000 if quick else 1_000_000
        table = synthetic_table(num_rows=rows, seed=0)
        timings["data"] = time.perf_counter() - start
        begin = time.perf_counter()
        program = AggregateProgram.from_sql(SQL, table, num_targets=20)
        countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
        outcome = run_aggregate(program, countermeasure, delta=1e-4, seed=0)
        timings["run"] = time.perf_counter() - begin
        report = outcome.report
        extra = {"sources": rows, "result_rows": len(outcome.rows)}
    else:
        from dpcomm.data import load_fashion_mnist
        from dpcomm.pipeline.runs import run_kmeans
        from dpcomm.queries.kmeans import KMeansProgram

        dataset = load_fashion_mnist()
        timings["data"] = time.perf_counter() - start
        begin = time.perf_counter()
        train = dataset.train_images[:10_000] if quick else dataset.train_images
        program = KMeansProgram(train, 10, 10, seed=0)
        countermeasure = Scramblers(sampling_rate=0.9, batch_size=100, num_dummies=50)
        kmeans = run_kmeans(
            program,
            countermeasure,
            test_points=dataset.test_images,
            test_labels=dataset.test_labels,
            delta=1e-4,
            seed=0,
        )
        timings["run"] = time.perf_counter() - begin
        report = kmeans.report
        extra = {
            "sources": len(train),
            "rand_index": kmeans.rand_index,
            "rand_index_nonprivate": kmeans.rand_index_nonprivate,
        }
    efficiency = report.efficiency
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "scenario": name,
        "quick": quick,
        "data_seconds": timings["data"],
        "run_seconds": timings["run"],
        "private_simulation_seconds": efficiency.seconds,
        "messages": efficiency.messages,
        "messages_per_second": efficiency.messages_per_second,
        "peak_memory_mb": peak_kib / 1024,
        "epsilon": report.privacy.epsilon,
        "delta": report.privacy.delta,
        **extra,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
    parser.add_argument("--scenario", choices=SCENARIOS, action="append")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(run_scenario(args.inner, args.quick)))
        return 0
    import numpy

    print(
        f"machine: {platform.machine()}, {__import__('os').cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {numpy.__version__}"
    )
    print()
    print(
        "| scenario | sources | run s (incl. baseline) | private simulation s | messages | "
        "messages/s | peak MB | ε (plan) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.scenario or SCENARIOS:
        command = [sys.executable, __file__, "--inner", name] + (["--quick"] if args.quick else [])
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            reason = completed.stderr.strip().splitlines()[-1] if completed.stderr else "failed"
            print(f"| {name} | skipped: {reason} | | | | | | |")
            continue
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        print(
            f"| {name} | {row['sources']:,} | {row['run_seconds']:.2f} | "
            f"{row['private_simulation_seconds']:.2f} | {row['messages']:,} | "
            f"{row['messages_per_second']:,.0f} | {row['peak_memory_mb']:,.0f} | "
            f"{row['epsilon']:.4f} |"
        )
        details = {k: v for k, v in row.items() if k not in {"scenario", "quick"}}
        print(f"<!-- {name}: {json.dumps(details)} -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
