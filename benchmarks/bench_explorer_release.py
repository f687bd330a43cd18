"""Benchmark: the explorer's release panel, CPU per update (goal: the explorer's ≤ 300 ms).

For every configuration of the numbers panel's grid (σ ∈ {0.05, 0.2, 0.5, 0.9},
n ∈ {10, 100, 1,000}, d ∈ {0, 10, 100, 1,000}, S ∈ {1,000, 10,000}, T = 20, G = 1 and 4),
the traffic's numbers computed first (as the page does), then
:func:`dpcomm.experiments.explore_release.release_numbers` of the default Laplace release
("a traffic control moved"), then of ε2 = 0.5 on the same traffic ("ε2 moved"), each once:
median, p90 and max CPU time. The release callback runs beside the numbers panel's, in its own
request.

Usage: python benchmarks/bench_explorer_release.py
"""

from __future__ import annotations

import itertools
import statistics
import time

from dpcomm.experiments.explore import ExplorerSettings, explore
from dpcomm.experiments.explore_release import ReleaseSettings, release_numbers


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (
        f"median {statistics.median(ordered) * 1e3:.0f} ms, p90 {p90 * 1e3:.0f} ms, "
        f"max {ordered[-1] * 1e3:.0f} ms"
    )


def main() -> None:
    release_numbers(ExplorerSettings(), ReleaseSettings())  # imports and OpenDP loaded
    for clusters in (1, 4):
        moved: list[float] = []
        epsilon_moved: list[float] = []
        grid = itertools.product((0.05, 0.2, 0.5, 0.9), (10, 100, 1000), (0, 10, 100, 1000))
        for sources in (1000, 10_000):
            for sampling, batch, dummies in grid:
                settings = ExplorerSettings(
                    sampling_rate=sampling,
                    batch_size=batch,
                    num_dummies=dummies,
                    num_sources=sources,
                    num_clusters=clusters,
                )
                explore(settings)
                start = time.process_time()
                release_numbers(settings, ReleaseSettings())
                moved.append(time.process_time() - start)
                start = time.process_time()
                release_numbers(settings, ReleaseSettings(epsilon=0.5))
                epsilon_moved.append(time.process_time() - start)
            grid = itertools.product((0.05, 0.2, 0.5, 0.9), (10, 100, 1000), (0, 10, 100, 1000))
        print(f"G = {clusters}: a traffic control moved: {_summary(moved)}")
        print(f"G = {clusters}: ε2 moved: {_summary(epsilon_moved)}")


if __name__ == "__main__":
    main()
