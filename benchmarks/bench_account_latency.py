"""Benchmark: latency of ``dpcomm.account`` with its defaults, over a grid of T, σ, n, d.

What an interactive caller (the explorer, a sweep) pays per configuration once the library is
imported: one call ``dpcomm.account(mechanism, delta=1e-4)`` per point, in one process (as a
long-lived caller runs it), CPU milliseconds (``time.process_time``) and wall milliseconds.
Uncapped scramblers on T x σ x n x d, capped scramblers on T x n x d (σ = 0.2), local
randomizers on T x d. Then the start-up: ``import dpcomm`` + the accountant, and one whole
``dpcomm account`` process, each in a fresh child (CPU of the child).

``--mc-samples R`` / ``--all-methods`` pass those options (the former default was R = 5000);
run against another checkout with ``PYTHONPATH=/path/to/src`` (options it lacks are not
passed unless given). ``--large`` adds n = 10^6 points.

Usage: python benchmarks/bench_account_latency.py [--quick] [--large] [--mc-samples R]
       [--all-methods] [--rows]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

DELTA = 1e-4


def _grid(quick: bool) -> list[tuple[str, dict[str, Any]]]:
    """(family, mechanism parameters) of every point."""
    targets = (2, 20) if quick else (2, 20, 1000)
    sigmas = (0.2, 0.9) if quick else (0.01, 0.2, 0.9)
    sizes = (10, 1000) if quick else (10, 100, 1000)
    dummies = (0, 1000) if quick else (0, 50, 1000)
    points: list[tuple[str, dict[str, Any]]] = []
    for size in targets:
        for sigma in sigmas:
            for n in sizes:
                for d in dummies:
                    points.append(
                        (
                            "scrambler",
                            {
                                "num_targets": size,
                                "sampling_rate": sigma,
                                "batch_size": n,
                                "num_dummies": d,
                            },
                        )
                    )
    for size in targets:
        for n in sizes:
            for d in dummies:
                if d <= (size - 1) * n:
                    points.append(
                        (
                            "capped",
                            {
                                "num_targets": size,
                                "sampling_rate": 0.2,
                                "batch_size": n,
                                "num_dummies": d,
                                "capped": True,
                            },
                        )
                    )
    for size in targets:
        for d in sorted({0, 1, size - 1}):
            points.append(("local", {"num_targets": size, "sampling_rate": 0.2, "num_dummies": d}))
    return points


def _large() -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "scrambler",
            {"num_targets": size, "sampling_rate": sigma, "batch_size": 10**6, "num_dummies": 50},
        )
        for size, sigma in ((20, 0.01), (20, 0.2), (20, 0.5), (1000, 0.2))
    ]


def measure(
    points: list[tuple[str, dict[str, Any]]], options: dict[str, Any]
) -> list[dict[str, Any]]:
    """One ``dpcomm.account`` call per point: CPU and wall milliseconds, ε and the method."""
    import dpcomm

    rows = []
    for family, parameters in points:
        if family == "local":
            mechanism: Any = dpcomm.LocalRandomizer(**parameters)
        else:
            mechanism = dpcomm.ScramblerMechanism(**parameters)
        cpu, wall = time.process_time(), time.perf_counter()
        report = dpcomm.account(mechanism, delta=DELTA, **options)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rows.append(
            {
                "family": family,
                **parameters,
                "epsilon": report.guarantee.epsilon,
                "lower": report.lower_bound,
                "method": report.guarantee.method,
                "cpu_ms": 1000.0 * cpu,
                "wall_ms": 1000.0 * wall,
            }
        )
    return rows


def _child_cpu(code: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(code, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def start_up(repeat: int) -> dict[str, tuple[float, float]]:
    """Best CPU and wall seconds: ``import dpcomm`` + the accountant, and ``dpcomm account``."""
    imports = [sys.executable, "-c", "import dpcomm; dpcomm.account; dpcomm.ScramblerMechanism"]
    command = [
        sys.executable, "-m", "dpcomm", "account", "scrambler", "--targets", "20",
        "--sampling", "0.2", "--batch", "100", "--dummies", "50", "--delta", "1e-4",
    ]  # fmt: skip
    results = {}
    cases = (("import dpcomm + accountant", imports), ("dpcomm account (process)", command))
    for name, argv in cases:
        runs = [_child_cpu(argv) for _ in range(repeat)]
        results[name] = (min(r[0] for r in runs), min(r[1] for r in runs))
    return results


def _summary(rows: list[dict[str, Any]], family: str) -> str:
    chosen = [r for r in rows if r["family"] == family]
    if not chosen:
        return ""
    cpu = sorted(r["cpu_ms"] for r in chosen)
    wall = sorted(r["wall_ms"] for r in chosen)
    p90 = cpu[min(len(cpu) - 1, int(0.9 * len(cpu)))]
    return (
        f"| {family} | {len(chosen)} | {statistics.median(cpu):.0f} | {p90:.0f} | {cpu[-1]:.0f} "
        f"| {statistics.median(wall):.0f} | {wall[-1]:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller grid")
    parser.add_argument("--large", action="store_true", help="also n = 10^6 points")
    parser.add_argument("--mc-samples", type=int, help="monte_carlo_samples passed to account")
    parser.add_argument("--all-methods", action="store_true", help="all_methods=True")
    parser.add_argument("--rows", action="store_true", help="print every point")
    parser.add_argument("--repeat", type=int, default=3, help="start-up runs (best is kept)")
    args = parser.parse_args()
    options: dict[str, Any] = {}
    if args.mc_samples is not None:
        options["monte_carlo_samples"] = args.mc_samples
    if args.all_methods:
        options["all_methods"] = True
    import dpcomm

    # Warm-up: the first call pays lazy imports and table caches, which a live caller pays once.
    dpcomm.account(
        dpcomm.ScramblerMechanism(num_targets=20, sampling_rate=0.2, batch_size=10, num_dummies=5),
        delta=DELTA,
        **options,
    )
    rows = measure(_grid(args.quick), options)
    print(f"dpcomm.account(mechanism, delta={DELTA:g}, {options}) per point, ms:")
    print("| family | points | CPU median | CPU p90 | CPU max | wall median | wall max |")
    print("|---|---|---|---|---|---|---|")
    for family in ("scrambler", "capped", "local"):
        print(_summary(rows, family))
    slowest = sorted(rows, key=lambda r: -r["cpu_ms"])[: len(rows) if args.rows else 5]
    print("slowest points:" if not args.rows else "every point:")
    for row in slowest:
        print(
            f"  {row['family']:9} T={row['num_targets']:<5} σ={row['sampling_rate']:<5} "
            f"n={row.get('batch_size', '-')!s:<5} d={row['num_dummies']:<5} "
            f"ε={row['epsilon']:.5g} ({row['method']}) lower={row['lower']} "
            f"CPU {row['cpu_ms']:.1f} ms, wall {row['wall_ms']:.1f} ms"
        )
    if args.large:
        print("n = 10^6 (d = 50):")
        for point in _large():
            try:
                (row,) = measure([point], options)
            except ValueError as error:  # an InvalidParameterError: the defaults refused n
                print(f"  {point[1]}: fails: {error}")
                continue
            print(
                f"  T={row['num_targets']} σ={row['sampling_rate']}: ε={row['epsilon']:.6g} "
                f"lower={row['lower']:.6g} CPU {row['cpu_ms'] / 1000:.2f} s, "
                f"wall {row['wall_ms'] / 1000:.2f} s"
            )
    print(f"start-up (best of {args.repeat}, fresh process):")
    for name, (cpu, wall) in start_up(args.repeat).items():
        print(f"  {name}: CPU {cpu:.2f} s, wall {wall:.2f} s")


if __name__ == "__main__":
    main()
