"""Published counts: raw, clamped at 0, and consistent totals (least squares), against the truth.

On the Palmer penguins (scikit-learn's OpenML test copy, id 42585), ``COUNT(*)`` by
``CUBE(species, island)`` with both domains public (3 × 3 finest cells, 4 of them empty),
a Laplace release of ε2 = 1 without countermeasure (each tuple delivered). Each draw is the
release's own noise on the exact cells (`Release.released_rows`) and its post-processing
(`Release.published_rows`), with and without ``consistent_totals``. Prints the RMSE and the
mean error (bias) per grouping set. Run: ``python benchmarks/bench_release_totals.py``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import numpy as np

import dpcomm
from bench_release_accuracy import penguins

SQL = "SELECT species, island, COUNT(*) AS n FROM penguins GROUP BY CUBE(species, island)"
KEYS = {"species": ["Adelie", "Chinstrap", "Gentoo"], "island": ["Biscoe", "Dream", "Torgersen"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    frame = penguins(("species", "island"))
    run = dpcomm.run_sql(
        SQL, frame, countermeasure=dpcomm.NoCountermeasure(), seed=0,
        release=dpcomm.Laplace(args.epsilon), keys=KEYS,
    )  # fmt: skip
    program = run.program
    release = program.release
    assert release is not None
    consistent = replace(release, consistent_totals=True)
    exact = program.without_release().core_result(run.run.state)
    count = release.noises[0].output
    columns = program.query.grouping_sets
    present = [
        {tuple(r[c] for c in columns[i]): float(r[count]) for r in rows}
        for i, rows in enumerate(exact)
    ]
    truth = [
        [present[i].get(tuple(r[c] for c in columns[i]), 0.0) for r in rows]
        for i, rows in enumerate(release.released_rows(program.query, exact))
    ]  # every key of the domains, absent ones 0
    errors: dict[str, list[list[list[float]]]] = {
        k: [[] for _ in truth] for k in ("raw", "clamped", "consistent")
    }
    for _ in range(args.draws):
        raw = release.released_rows(program.query, exact)
        views = {
            "raw": raw,
            "clamped": release.published_rows(program.query, raw),
            "consistent": consistent.published_rows(program.query, raw),
        }
        for name, view in views.items():
            for index, set_rows in enumerate(view):
                errors[name][index].append(
                    [float(r[count]) - t for r, t in zip(set_rows, truth[index], strict=True)]
                )
    print(f"penguins COUNT(*) by CUBE(species, island), Laplace ε2 = {args.epsilon}, "
          f"{args.draws:,} draws; RMSE (mean error) per cell, by grouping set")  # fmt: skip
    for index, flow in enumerate(program.flow_names):
        cells = ", ".join(
            f"{name} {math.sqrt(float(np.mean(np.square(e[index])))):.2f} "
            f"({float(np.mean(e[index])):+.2f})"
            for name, e in errors.items()
        )
        print(f"  {flow:18s} {cells}")


if __name__ == "__main__":
    main()
