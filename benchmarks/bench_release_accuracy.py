"""Accuracy of released averages: centred sums against the plain release (OpenDP's dp.mean).

On the Palmer penguins (scikit-learn's OpenML test copy, id 42585: 342 body masses, 2
missing), AVG(body_mass_g) by species, bounds [2500, 6500], species public, a Laplace
release of ε2 = 1 under no countermeasure (each tuple delivered: the ``own-row`` view):

* dpcomm: the published average, c + centred sum / COUNT, each run a `dpcomm.run_sql`;
* the plain release, as OpenDP's ``dp.mean`` does it: the SUM of the clamped values with
  Laplace noise at sensitivity 2M = 13,000, the COUNT with discrete Laplace at 2 (one row
  replaced moves it between two species), ε split evenly, AVG = SUM / COUNT.

The RMSE of each species' average against the exact average of the clamped values, and
over all three. Run: ``python benchmarks/bench_release_accuracy.py [--runs 200]``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd

import dpcomm

BOUNDS = (2500.0, 6500.0)
SQL = "SELECT species, AVG(body_mass_g) AS mass FROM penguins GROUP BY species"


def penguins(columns: tuple[str, ...] = ("species", "body_mass_g")) -> pd.DataFrame:
    """The Palmer penguins as scikit-learn ships them (its OpenML test data), ``columns``."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        raise SystemExit("scikit-learn is not installed")
    folder = Path(spec.origin).parent / "datasets/tests/data/openml/id_42585"
    path = sorted(folder.glob("data-*.arff.gz"))[0]
    names: list[str] = []
    rows: list[list[str]] = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        in_data = False
        for line in lines:
            if in_data and line.strip() and not line.startswith("%"):
                rows.append([v.strip().strip("'\"") for v in line.strip().split(",")])
            elif line.lower().startswith("@attribute"):
                names.append(line.split(None, 2)[1].strip("'"))
            elif line.lower().startswith("@data"):
                in_data = True
    frame = pd.DataFrame(rows, columns=names).replace("?", None)
    frame["body_mass_g"] = pd.to_numeric(frame["body_mass_g"])
    return frame[list(columns)]


def plain_release(exact: dict[str, tuple[float, int]], epsilon: float) -> dict[str, float]:
    """OpenDP's dp.mean shape: SUM at 2M and COUNT at 2, ε split evenly; SUM / COUNT."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    low, high = BOUNDS
    share = epsilon / 2.0
    sums = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float),
        scale=2.0 * max(abs(low), abs(high)) / share,
    )  # fmt: skip
    counts = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=2.0 / share
    )
    keys = sorted(exact)
    noisy_sums = sums([exact[k][0] for k in keys])
    noisy_counts = counts([exact[k][1] for k in keys])
    return {
        k: (s / c if c > 0 else math.nan)
        for k, s, c in zip(keys, noisy_sums, noisy_counts, strict=True)
    }


def _discrete_laplace(rng: np.random.Generator, scale: float, size: int) -> np.ndarray:
    """Discrete Laplace draws of scale t: the difference of two geometric variables."""
    p = 1.0 - math.exp(-1.0 / scale)
    return rng.geometric(p, size) - rng.geometric(p, size)


def split_effect(
    table: pd.DataFrame, exact: dict[str, tuple[float, int]], epsilon: float, draws: int
) -> dict[str, dict[str, float]]:
    """RMSE of the published averages at the release's scales, equal against minimum-error split.

    Without a countermeasure every tuple is delivered, so a published average is exactly
    c + (S_c + Z_S) / (C + Z_C): the release's own scales, drawn ``draws`` times (numpy).
    """
    import duckdb

    from dpcomm.data import table_from_relation
    from dpcomm.release.noise import noisy_program

    species = sorted(exact)
    relation = duckdb.from_df(table)
    program = noisy_program(
        SQL, table_from_relation(relation, "penguins"), release=dpcomm.Laplace(epsilon),
        bounds={"body_mass_g": BOUNDS}, keys={"species": species},
        countermeasure=dpcomm.NoCountermeasure(),
    )  # fmt: skip
    assert program.release is not None
    noises = {n.function: n for n in program.release.noises}
    total, count = noises["sum"], noises["count"]
    centre = sum(BOUNDS) / 2.0
    splits = {
        "minimum error": (total.scale, count.scale),
        "equal": (total.sensitivity.l1 / (epsilon / 2), count.sensitivity.l1 / (epsilon / 2)),
    }
    rng = np.random.default_rng(0)
    result: dict[str, dict[str, float]] = {}
    for name, (sum_scale, count_scale) in splits.items():
        result[name] = {}
        for key in species:
            s, c = exact[key]
            noisy_sum = s - centre * c + rng.laplace(0.0, sum_scale, draws)
            noisy_count = c + _discrete_laplace(rng, count_scale, draws)
            ok = noisy_count > 0
            published = centre + noisy_sum[ok] / noisy_count[ok]
            result[name][key] = math.sqrt(float(np.mean((published - s / c) ** 2)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--draws", type=int, default=200_000)
    args = parser.parse_args()
    table = penguins()
    species = sorted(table["species"].dropna().unique())
    clamped = table.dropna(subset=["body_mass_g"]).assign(
        body_mass_g=lambda f: f["body_mass_g"].clip(*BOUNDS)
    )
    exact = {k: (float(g["body_mass_g"].sum()), len(g)) for k, g in clamped.groupby("species")}
    truth = {k: s / c for k, (s, c) in exact.items()}
    errors: dict[str, dict[str, list[float]]] = {"dpcomm": {}, "plain": {}}
    for run in range(args.runs):
        result = dpcomm.run_sql(
            SQL, table, countermeasure=dpcomm.NoCountermeasure(), seed=run,
            release=dpcomm.Laplace(args.epsilon), bounds={"body_mass_g": BOUNDS},
            keys={"species": species},
        )  # fmt: skip
        for row in result.rows:
            value = row["mass"]
            miss = math.nan if value is None else value - truth[row["species"]]
            errors["dpcomm"].setdefault(row["species"], []).append(miss)
        for key, value in plain_release(exact, args.epsilon).items():
            errors["plain"].setdefault(key, []).append(value - truth[key])
    print(f"penguins, AVG(body_mass_g) by species, bounds {BOUNDS}, Laplace ε2 = {args.epsilon}, "
          f"{args.runs} runs (RMSE in g; runs with a count ≤ 0 left out, counted)")  # fmt: skip
    overall = {}
    for name, by_key in errors.items():
        cells = []
        for key in species:
            values = np.asarray(by_key[key], dtype=float)
            kept = values[np.isfinite(values)]
            cells.append(kept)
            rmse = math.sqrt(float(np.mean(kept**2)))
            print(f"  {name:7s} {key:10s} RMSE {rmse:8.1f}  (left out {values.size - kept.size})")
        pooled = np.concatenate(cells)
        overall[name] = math.sqrt(float(np.mean(pooled**2)))
        print(f"  {name:7s} {'all':10s} RMSE {overall[name]:8.1f}")
    print(f"ratio dpcomm / plain: {overall['dpcomm'] / overall['plain']:.3f} (goal ≤ 0.45)")
    print(f"ε2 split, at the release's scales ({args.draws:,} draws each, RMSE in g):")
    for name, by_key in split_effect(table, exact, args.epsilon, args.draws).items():
        cells = ", ".join(f"{key} {rmse:.1f}" for key, rmse in by_key.items())
        print(f"  {name:13s} {cells}")


if __name__ == "__main__":
    main()
