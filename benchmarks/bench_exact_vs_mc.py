"""Benchmark: ε at δ = 1e-4 by the exact method, and by Algorithm 2 as the paper runs it.

Usage: python benchmarks/bench_exact_vs_mc.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import statistics
import time

import numpy
import scipy

from dpcomm.accounting import ScramblerMechanism
from dpcomm.accounting.exact import ExactLemma2
from dpcomm.accounting.montecarlo import MonteCarloLemma2
from dpcomm.accounting.pure import local_pure_epsilon
from dpcomm.accounting.search import epsilon_for_delta

DELTA = 1e-4


def exact_epsilon(mechanism: ScramblerMechanism) -> float:
    upper = local_pure_epsilon(mechanism.local_randomizer)
    return epsilon_for_delta(ExactLemma2(mechanism).delta, DELTA, upper=upper)


def mc_epsilon(mechanism: ScramblerMechanism) -> float:
    upper = local_pure_epsilon(mechanism.local_randomizer)
    estimator = MonteCarloLemma2(mechanism, num_samples=5000, rng=0)
    return epsilon_for_delta(estimator.estimate, DELTA, upper=upper)


def timed(function, *args, repeats: int = 1) -> tuple[float, float]:
    times, value = [], math.nan
    for _ in range(repeats):
        start = time.perf_counter()
        value = function(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    batches = [10, 100, 1000] if args.quick else [10, 100, 500, 1000]
    dummies = [0, 50, 1000] if args.quick else [0, 50, 500, 1000]
    targets = [20, 100]
    sigmas = [0.05, 0.2, 0.5]
    print(
        f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}, numpy {numpy.__version__}, scipy {scipy.__version__}"
    )
    rows, exact_times = [], []
    for n, d, size, sigma in itertools.product(batches, dummies, targets, sigmas):
        mechanism = ScramblerMechanism(
            num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
        )
        seconds, value = timed(exact_epsilon, mechanism, repeats=5)
        exact_times.append(seconds)
        rows.append((n, d, size, sigma, seconds, value))
    print(
        f"exact method, {len(rows)} configurations (n <= 1000, d <= 1000, T <= 100), "
        "median of 5 runs each:"
    )
    print(
        f"  median {1000 * statistics.median(exact_times):.1f} ms, "
        f"p95 {1000 * sorted(exact_times)[int(0.95 * len(exact_times)) - 1]:.1f} ms, "
        f"max {1000 * max(exact_times):.1f} ms"
    )
    print(
        "\n| n | d | T | σ | exact ε | exact ms | Algorithm 2 ε (R=5000) | Algorithm 2 s | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    subset = [r for r in rows if r[3] == 0.2 and r[2] == 20]
    ratios = []
    for n, d, size, sigma, seconds, value in subset:
        mechanism = ScramblerMechanism(
            num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
        )
        mc_seconds, mc_value = timed(mc_epsilon, mechanism)
        ratios.append(mc_seconds / seconds)
        print(
            f"| {n} | {d} | {size} | {sigma} | {value:.4f} | {1000 * seconds:.1f} | "
            f"{mc_value:.4f} | {mc_seconds:.2f} | {mc_seconds / seconds:.0f}x |"
        )
    print(f"\nmedian speed ratio (Algorithm 2 / exact): {statistics.median(ratios):.0f}x")


if __name__ == "__main__":
    main()
