"""Time `groupby.evaluate` (the memory engine's group-by) and the partials of a split table.

Usage: .venv/bin/python benchmarks/bench_groupby.py [--rows N] [--repeats R]

On a synthetic table (g1..g4 with 20 intervals, DOUBLE measures m1, m2) it prints the median
and best wall time of `evaluate` for three queries: the simulator benchmark's (4 grouping sets
of 20 groups, AVG and SUM of floats), every aggregate of the floats over those sets, and one
set of ~8,000 groups plus the empty set; then the time to compute the partials of 8 partitions
of the rows, merge them and finalize (what a distributed engine does), checked equal to
`evaluate`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dpcomm.data import synthetic_table
from dpcomm.queries.groupby import (
    evaluate,
    finalize_partials,
    grouping_set_partials,
    merge_partials,
)
from dpcomm.queries.sql import bind_sql

QUERIES = {
    "4 sets x 20 groups, AVG+SUM": (
        "SELECT g1, g2, g3, g4, COUNT(*), AVG(m1), SUM(m2) FROM synthetic "
        "GROUP BY GROUPING SETS ((g1), (g2), (g3), (g4))"
    ),
    "4 sets x 20 groups, all": (
        "SELECT g1, g2, g3, g4, COUNT(*), COUNT(m1), SUM(m1), AVG(m1), MIN(m1), MAX(m1), "
        "SUM(m2), AVG(m2) FROM synthetic GROUP BY GROUPING SETS ((g1), (g2), (g3), (g4))"
    ),
    "8000 groups + ()": (
        "SELECT g1, g2, g3, COUNT(*), AVG(m1), SUM(m2) FROM synthetic "
        "GROUP BY GROUPING SETS ((g1, g2, g3), ())"
    ),
}


def timed(function, repeats: int) -> tuple[float, float]:
    """Median and best seconds of ``repeats`` calls (after one warm-up call)."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    table = synthetic_table(num_rows=args.rows, seed=0)
    print(f"| query ({args.rows:,} rows) | evaluate median | best | 8 partitions merged |")
    print("|---|---|---|---|")
    for name, sql in QUERIES.items():
        bound = bind_sql(sql, table)
        masks = [np.ones(table.num_rows, dtype=bool)] * bound.num_grouping_sets
        median, best = timed(lambda b=bound, m=masks: evaluate(b, table, m), args.repeats)
        labels = np.random.default_rng(0).integers(0, 8, table.num_rows)

        def distributed(bound=bound, labels=labels) -> list[dict[str, object]]:
            rows: list[dict[str, object]] = []
            for index in range(bound.num_grouping_sets):
                parts = [grouping_set_partials(bound, table, index, labels == p) for p in range(8)]
                rows.extend(finalize_partials(bound, merge_partials(parts))[0])
            return rows

        assert str(distributed()) == str(evaluate(bound, table, masks))
        split, _ = timed(distributed, max(1, args.repeats // 2))
        print(f"| {name} | {median * 1e3:.0f} ms | {best * 1e3:.0f} ms | {split * 1e3:.0f} ms |")


if __name__ == "__main__":
    main()
