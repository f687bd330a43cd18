"""K-means released end to end: API and CLI, the guarantee composed with every iteration's
traffic and charged to a budget."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpcomm
from dpcomm.budget import Budget
from dpcomm.errors import DpcommWarning, InvalidParameterError
from dpcomm.plan.privacy import STATE_CAVEAT

RNG = np.random.default_rng(7)
POINTS = np.vstack([RNG.normal(c, 0.4, (60, 2)) for c in (0.0, 5.0)])
LABELS = [0] * 60 + [1] * 60
BOUNDS = [(-2.0, 7.0), (-2.0, 7.0)]
SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.5, batch_size=60, num_dummies=5)


def test_release_is_composed_with_every_iteration_and_charged(tmp_path) -> None:
    budget = Budget(epsilon=50.0, delta=1e-3, ledger=tmp_path / "ledger.json")
    common = {
        "countermeasure": SCRAMBLERS, "labels": LABELS, "delta": 1e-5,
        "release": dpcomm.Laplace(20.0), "bounds": BOUNDS, "budget": budget,
    }  # fmt: skip
    # Starting points chosen among the sources' own: sent to every node as they are, so no
    # charge covers them; a budget takes public ones.
    with pytest.raises(InvalidParameterError, match="init_points"):
        dpcomm.kmeans(POINTS, k=2, iterations=3, seed=1, init="k-means++", **common)
    assert budget.charges() == ()
    run = dpcomm.kmeans(POINTS, k=2, iterations=3, seed=1, init_points=[[0, 0], [5, 5]], **common)
    release = run.report.release
    assert release is not None and release.epsilon == pytest.approx(20.0)
    assert len(release.aggregates) == 3  # two centred sums and the count, over 3 iterations
    traffic = run.report.privacy.epsilon
    assert 20.0 < release.epsilon_total <= release.summed_epsilon
    assert release.summed_epsilon >= 20.0 + traffic  # the traffic's ε for the joint view
    charge = budget.charges()[0]
    assert (charge.epsilon, charge.delta) == (release.epsilon_total, release.composed_delta)
    assert charge.release is not None and charge.release["mechanism"] == "laplace"
    assert charge.release["bounds"] == {"x0": [-2.0, 7.0], "x1": [-2.0, 7.0]}
    caveats = " ".join(run.report.privacy.caveats)
    assert STATE_CAVEAT.split("{names}", 1)[1][:40] not in caveats
    assert "noisy centroids" in caveats
    assert np.all((run.centroids >= -2.0) & (run.centroids <= 7.0))
    assert run.adjusted_rand_index > 0.5  # the clusters are 12 standard deviations apart
    assert run.report.efficiency.seconds is None  # the timing is withheld


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ({"bounds": BOUNDS}, "release"),
        ({"release": dpcomm.Laplace(1.0)}, "bounds"),
        ({"release": dpcomm.Laplace(1.0), "bounds": BOUNDS[:1]}, "bounds"),
        ({"release": 1.0, "bounds": BOUNDS}, "release"),
    ],
)
def test_bad_release_arguments_are_refused(given, name) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        dpcomm.kmeans(POINTS, k=2, iterations=1, countermeasure=SCRAMBLERS, **given)


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "points.csv"
    rows = "\n".join(f"{x},{y},{label}" for (x, y), label in zip(POINTS, LABELS, strict=True))
    path.write_text("a,b,label\n" + rows + "\n")
    return path


def test_cli_releases_kmeans(cli, table) -> None:
    status, out, err = cli(
        "run", "kmeans", "--data", table, "--columns", "a,b", "--label-column", "label",
        "--k", "2", "--iterations", "2", "--release", "gaussian", "--release-epsilon", "8",
        "--bounds", "a=-2:7", "--bounds", "b=-2:7", "--json",
    )  # fmt: skip
    assert status == 0, err
    document = json.loads(out)
    release = document["report"]["release"]
    assert release["mechanism"] == "gaussian" and release["epsilon"] == pytest.approx(8.0)
    status, out, err = cli(
        "run", "kmeans", "--data", table, "--columns", "a,b", "--k", "2", "--release",
        "laplace", "--bounds=-2:7",
    )  # fmt: skip
    assert status == 0, err
    assert "Release (laplace, the K clusters" in out


@pytest.mark.parametrize(
    "extra",
    [
        ["--bounds", "a=-2:7"],
        ["--release", "laplace", "--bounds", "a=-2:7"],
        ["--release", "laplace"],
    ],
)
def test_cli_refuses_incomplete_release_options(cli, table, extra) -> None:
    status, _, err = cli(
        "run", "kmeans", "--data", table, "--columns", "a,b", "--k", "2", *extra
    )  # fmt: skip
    assert status == 2
    assert err.count("\n") == 1 and "bounds" in err


def test_outputs_keep_input_rows_and_column_names(cli, tmp_path) -> None:
    """After --drop-non-finite, source i of the assignments is its input row; the centroid
    columns are named after --columns (and after a DataFrame's columns in Python)."""
    import pandas as pd

    frame = pd.DataFrame(POINTS[:20], columns=["a", "b"])
    frame.loc[3, "a"] = np.nan
    with pytest.warns(DpcommWarning, match="dropped 1 of 20"):
        run = dpcomm.kmeans(
            frame, k=2, iterations=1, countermeasure=dpcomm.NoCountermeasure(),
            drop_non_finite=True, seed=1,
        )  # fmt: skip
    assert run.columns == ("a", "b") and 3 not in run.input_rows.tolist()
    assert run.input_rows.tolist()[3:5] == [4, 5] and run.to_dict()["result"]["columns"] == [
        "a",
        "b",
    ]
    with pytest.raises(InvalidParameterError, match="columns"):
        dpcomm.kmeans(POINTS, k=2, iterations=1, countermeasure=SCRAMBLERS, columns=["a"])
    data, out = tmp_path / "p.csv", tmp_path / "out.csv"
    frame.to_csv(data, index=False)
    status, _, err = cli(
        "run", "kmeans", "--data", data, "--columns", "a,b", "--k", "2", "--iterations", "1",
        "--drop-non-finite", "--out", out,
    )  # fmt: skip
    assert status == 0, err
    assert out.read_text().splitlines()[0] == "centroid,a,b"
    sources = [
        line.split(",")[0] for line in (tmp_path / "out-assignments.csv").read_text().split()
    ]
    assert sources[1:4] == ["0", "1", "2"] and sources[4] == "4" and len(sources) == 20  # + header


def test_calibrate_splits_the_budget_for_a_released_kmeans() -> None:
    """calibrate plans the traffic and the release's ε2 together; kmeans runs both."""
    calibration = dpcomm.calibrate(
        data=POINTS, iterations=2, num_targets=2, epsilon=4.0, delta=1e-4, release="laplace",
        bounds=BOUNDS,
    )  # fmt: skip
    assert calibration.release is not None and calibration.bounds == tuple(BOUNDS)
    run = dpcomm.kmeans(POINTS, k=2, iterations=2, countermeasure=calibration, seed=1)
    release = run.report.release
    assert release.epsilon == pytest.approx(calibration.release.epsilon)
    assert release.epsilon_total == pytest.approx(calibration.split.chosen.composition.epsilon)
    assert release.epsilon_total <= 4.0
    with pytest.raises(InvalidParameterError, match="bounds"):
        dpcomm.calibrate(
            data=POINTS, iterations=2, num_targets=2, epsilon=4.0, delta=1e-4, release="laplace"
        )
