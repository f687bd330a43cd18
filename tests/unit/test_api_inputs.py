"""The front door checks what it is given: K-means' points and labels, and every parameter's type.

A wrong value is an InvalidParameterError naming the parameter (one line), never an error of a
library below (numpy's overflow warnings, DuckDB's TypeError, an AttributeError) nor an
allocation that kills the process.
"""

import math

import numpy as np
import pandas as pd
import pytest

import dpcomm
from dpcomm.errors import DpcommWarning, InvalidParameterError

NONE = dpcomm.NoCountermeasure()
MEASUREMENTS = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]


@pytest.fixture(scope="module")
def penguins(openml_table):
    """The Palmer penguins: 344 birds, two of them without any measurement (NaN)."""
    return openml_table("id_42585").to_pandas()


def two_blobs(rows=10):
    return np.vstack([np.zeros((rows, 2)), np.ones((rows, 2)) * 10])


def refused(call):
    with pytest.raises(InvalidParameterError) as caught:
        call()
    assert "\n" not in str(caught.value)
    return caught.value


# ---------------------------------------------------------------- K-means' points and labels


def test_kmeans_refuses_penguins_with_nan_measurements(penguins):
    points = penguins[MEASUREMENTS].to_numpy()
    missing = int(np.isnan(points).any(axis=1).sum())
    assert missing == 2
    error = refused(lambda: dpcomm.kmeans(points, k=3, iterations=2, countermeasure=NONE))
    assert error.name == "points"
    assert "2 rows with NaN or inf (of 344)" in str(error)
    assert "drop_non_finite=True" in str(error)


def test_kmeans_drops_them_when_asked_and_says_how_many(penguins):
    """The species are text labels: the Rand index is measured on the 342 birds kept."""
    points = penguins[MEASUREMENTS].to_numpy()
    species = penguins["species"].to_numpy()
    with pytest.warns(
        DpcommWarning,
        match=r"dropped 2 of 344 points \(2 rows with NaN or inf\): K-means runs on the other 342",
    ):
        run = dpcomm.kmeans(
            points, k=3, iterations=3, countermeasure=NONE, labels=species, seed=1,
            drop_non_finite=True,
        )  # fmt: skip
    assert run.program.num_sources == 342
    assert np.isfinite(run.centroids).all()
    assert 0.5 < run.rand_index <= 1.0
    assert run.report.utility.test_points == 342


def test_kmeans_drops_test_points_with_their_labels():
    points = two_blobs()
    tests = np.vstack([two_blobs(3), [[math.nan, 0.0], [math.inf, 1.0]]])
    labels = ["a"] * 3 + ["b"] * 3 + ["c", "c"]
    error = refused(
        lambda: dpcomm.kmeans(
            points, k=2, iterations=1, countermeasure=NONE, test_points=tests, test_labels=labels
        )
    )
    assert error.name == "test_points" and "2 rows with NaN or inf (of 8)" in str(error)
    with pytest.warns(
        DpcommWarning,
        match="dropped 2 of 8 test points .*: the Rand index is measured on the other 6",
    ):
        run = dpcomm.kmeans(
            points, k=2, iterations=1, countermeasure=NONE, test_points=tests,
            test_labels=labels, seed=1, drop_non_finite=True,
        )  # fmt: skip
    assert run.report.utility.test_points == 6 and run.rand_index == 1.0


def test_kmeans_refuses_values_float32_cannot_hold():
    """Points travel as float32: 1e39 would become inf (numpy warned; the centroid was inf)."""
    points = two_blobs()
    points[0, 0] = 1e39
    points[1, 1] = -3.5e38
    error = refused(lambda: dpcomm.kmeans(points, k=2, iterations=1, countermeasure=NONE))
    assert error.name == "points"
    assert "2 rows with a value beyond float32's range (of 20)" in str(error)
    with pytest.warns(DpcommWarning, match="dropped 2 of 20 points"):
        run = dpcomm.kmeans(
            points, k=2, iterations=1, countermeasure=NONE, seed=1, drop_non_finite=True
        )
    assert np.isfinite(run.centroids).all()
    largest = float(np.finfo(np.float32).max)
    points[0, 0], points[1, 1] = largest, -largest  # the extremes travel as they are
    run = dpcomm.kmeans(points, k=2, iterations=1, countermeasure=NONE, seed=1)
    assert np.isfinite(run.centroids).all()


def test_kmeans_without_a_usable_row_or_with_too_many_centroids():
    error = refused(
        lambda: dpcomm.kmeans(
            [[math.nan]], k=1, iterations=1, countermeasure=NONE, drop_non_finite=True
        )
    )
    assert error.name == "points" and "at least one row" in str(error)
    error = refused(lambda: dpcomm.kmeans(two_blobs(), k=21, iterations=1, countermeasure=NONE))
    assert error.name == "k" and "[1, 20]" in str(error)


def test_text_labels_give_the_rand_index_of_their_codes():
    by_text = kmeans(seed=1, labels=["x"] * 10 + ["y"] * 10)
    by_code = kmeans(seed=1, labels=[7] * 10 + [3] * 10)
    assert by_text.rand_index == by_code.rand_index == 1.0
    mixed = refused(lambda: kmeans(labels=pd.Series(["x", 1] * 10)))  # objects that do not sort
    assert mixed.name == "labels"


# ---------------------------------------------------------------- types at the door


FRAME = pd.DataFrame({"g": [1, 2, 3] * 10, "v": np.arange(30.0)})
SQL = "SELECT g, COUNT(*) FROM t GROUP BY g"
LOCAL = dpcomm.LocalRandomizer(num_targets=5, sampling_rate=0.5)


def run_sql(**changed):
    return dpcomm.run_sql(**{"sql": SQL, "data": FRAME, "countermeasure": NONE, **changed})


def kmeans(**changed):
    baseline = {"points": two_blobs(), "k": 2, "iterations": 1, "countermeasure": NONE}
    return dpcomm.kmeans(**{**baseline, **changed})


def calibrate(**changed):
    baseline = {"sources": 100, "num_targets": 5, "epsilon": 1.0, "delta": 1e-4}
    return dpcomm.calibrate(**{**baseline, **changed})


def capped_scrambler(capped):
    return dpcomm.ScramblerMechanism(
        num_targets=5, sampling_rate=0.5, batch_size=2, num_dummies=1, capped=capped
    )


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: dpcomm.account("scrambler"), "mechanism"),
        (lambda: dpcomm.account(LOCAL, epsilon=1e308), "epsilon"),
        (lambda: run_sql(data=FRAME["g"]), "data"),
        (lambda: run_sql(data=pd.DataFrame()), "data"),
        (lambda: run_sql(data=""), "data"),
        (lambda: run_sql(num_targets=10**9), "num_targets"),
        (lambda: run_sql(estimate=FRAME), "estimate"),
        (lambda: run_sql(progress=FRAME), "progress"),
        (lambda: run_sql(target_epsilon="1"), "target_epsilon"),
        (lambda: run_sql(delta=1.0), "delta"),
        (lambda: kmeans(delta=-1e-4), "delta"),
        (lambda: run_sql(countermeasure=FRAME), "countermeasure"),
        (lambda: calibrate(sql=5, data=FRAME, sources=None), "sql"),
        (lambda: calibrate(sql="SELECT g FROM t GROUP BY g", sources=None), "data"),
        (lambda: calibrate(data=FRAME), "sources"),
        (lambda: calibrate(data=FRAME, sources=None), "data"),
        (lambda: calibrate(sources=None), "sources"),
        (lambda: kmeans(points="abc"), "points"),
        (lambda: kmeans(iterations=10**9), "iterations"),
        (lambda: kmeans(start_seed=-1), "start_seed"),
        (lambda: kmeans(test_points=[[1j, 1]], test_labels=[0]), "test_points"),
        (lambda: kmeans(test_points=[[1, 1]], test_labels=[{}]), "test_labels"),
        (lambda: calibrate(sources=10**30), "sources"),
        (lambda: calibrate(epsilon=1e308), "epsilon"),
        (lambda: calibrate(grouping_sets=10**30), "grouping_sets G"),
        (lambda: calibrate(progress=FRAME), "progress"),
        (lambda: capped_scrambler(FRAME), "capped"),
        (lambda: dpcomm.datasets.synthetic(rows=10, seed=1, distribution=FRAME), "distribution"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_parameter(call, name):
    assert refused(call).name == name


def test_what_was_given_stays_on_one_line():
    error = refused(lambda: kmeans(start_seed=FRAME))
    assert str(error).endswith("got <DataFrame of shape (30, 2)>")
