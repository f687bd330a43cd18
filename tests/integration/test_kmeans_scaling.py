"""K-means with its columns scaled by their public bounds (``scale=True``, ``--scale``).

Two columns of very different units: the clusters differ in x (bounds [0, 1]) while y (bounds
[0, 1,000]) is noise. Unscaled, the distances are y's and the clusters split y; scaled onto
[0, 1] each, x separates them. The centroids come back in the columns' units; a release is
bound over [0, 1] per column (its sensitivities computed on the scaled bounds).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpcomm
from dpcomm.errors import InvalidParameterError

RNG = np.random.default_rng(11)
X = np.concatenate([RNG.normal(0.15, 0.03, 40), RNG.normal(0.85, 0.03, 40)])
Y = RNG.uniform(0.0, 1000.0, 80)
POINTS = np.column_stack([X, Y])
LABELS = [0] * 40 + [1] * 40
BOUNDS = [(0.0, 1.0), (0.0, 1000.0)]
NONE = dpcomm.NoCountermeasure()


def test_scaling_by_the_bounds_clusters_on_every_column_alike() -> None:
    common = {"k": 2, "iterations": 5, "countermeasure": NONE, "labels": LABELS, "seed": 1}
    unscaled = dpcomm.kmeans(POINTS, **common)
    scaled = dpcomm.kmeans(POINTS, bounds=BOUNDS, scale=True, **common)
    assert unscaled.adjusted_rand_index < 0.2  # split by y
    assert scaled.adjusted_rand_index == 1.0
    assert scaled.scaling == ((0.0, 1.0), (0.0, 1000.0))
    # The centroids in the columns' units: the clusters' means of x and y.
    order = np.argsort(scaled.centroids[:, 0])
    means = [POINTS[:40].mean(axis=0), POINTS[40:].mean(axis=0)]
    assert np.allclose(scaled.centroids[order], means, rtol=1e-5)
    assert np.allclose(scaled.run.state.centroids[order, 1] * 1000.0, [m[1] for m in means])


def test_a_scaled_release_is_bound_over_the_unit_interval() -> None:
    run = dpcomm.kmeans(
        POINTS, k=2, iterations=2, countermeasure=NONE, labels=LABELS, seed=1,
        release=dpcomm.Laplace(50.0), bounds=BOUNDS, scale=True, columns=["x", "y"],
    )  # fmt: skip
    assert run.program.release.bounds == ((0.0, 1.0), (0.0, 1.0))
    names = [a.aggregate for a in run.report.release.aggregates]
    assert names[0].startswith("SUM(x scaled from [0, 1] clamped to [0, 1], centred on 0.5)")
    assert names[1].startswith("SUM(y scaled from [0, 1000] clamped to [0, 1], centred on 0.5)")
    assert run.columns == ("x", "y")  # the centroids' columns keep their names
    # Sensitivity on the scaled bounds: hi − lo = 1 per coordinate (no countermeasure: own row).
    assert [a.sensitivity_l1 for a in run.report.release.aggregates[:2]] == [1.0, 1.0]
    assert np.all((run.centroids >= 0.0) & (run.centroids <= [1.0, 1000.0]))
    assert run.adjusted_rand_index > 0.5


def test_scaling_needs_the_bounds() -> None:
    with pytest.raises(InvalidParameterError, match="bounds"):
        dpcomm.kmeans(POINTS, k=2, iterations=1, countermeasure=NONE, scale=True)
    with pytest.raises(InvalidParameterError, match="scale"):
        dpcomm.kmeans(POINTS, k=2, iterations=1, countermeasure=NONE, bounds=BOUNDS, scale=1)


def test_cli_scale_flag(cli, tmp_path) -> None:
    table = tmp_path / "points.csv"
    table.write_text("x,y\n" + "\n".join(f"{a:.5f},{b:.3f}" for a, b in POINTS) + "\n")
    common = ["--data", table, "--columns", "x,y", "--k", "2", "--iterations", "5"]
    status, out, err = cli(
        "run", "kmeans", *common, "--mechanism", "none", "--scale", "--bounds", "x=0:1",
        "--bounds", "y=0:1000", "--json",
    )  # fmt: skip
    assert status == 0, err
    centroids = sorted(json.loads(out)["result"]["centroids"])
    assert centroids[0][0] == pytest.approx(POINTS[:40, 0].mean(), abs=1e-4)
    assert centroids[1][1] == pytest.approx(POINTS[40:, 1].mean(), abs=1e-2)
    status, _, err = cli("run", "kmeans", *common, "--mechanism", "none", "--scale")
    assert status != 0 and "bounds" in err
    status, _, err = cli("deploy", "kmeans-configs", *common, "--scale", "--bounds", "0:1",
                         "--out", tmp_path / "d")  # fmt: skip
    assert status != 0 and "--scale" in err
