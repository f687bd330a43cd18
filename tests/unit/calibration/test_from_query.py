"""``dpcomm.calibrate(sql, data, ...)``: the calibration reads the query, and runs as it is."""

from __future__ import annotations

import numpy as np
import pytest

import dpcomm
from dpcomm import datasets
from dpcomm.errors import InvalidParameterError

ROLLUP = "SELECT species, sex, COUNT(*) FROM penguins GROUP BY ROLLUP(species, sex)"


@pytest.fixture(scope="module")
def penguins(openml_table):
    """The Palmer penguins (344 rows), from scikit-learn's OpenML test files."""
    table = openml_table("id_42585")
    assert table.num_rows == 344
    return table


@pytest.fixture(scope="module")
def calibrated(penguins):
    return dpcomm.calibrate(ROLLUP, penguins, epsilon=1.0, delta=1e-4)


def test_rollup_counts_two_data_dependent_grouping_sets_not_three(penguins, calibrated):
    shape = calibrated.shape
    assert shape.num_clusters == 2 and shape.clusters == ("(species)", "(species, sex)")
    assert shape.free_clusters == ("()",)
    assert (shape.num_sources, shape.num_targets) == (344, 20)
    assert calibrated.details.request.num_clusters == 2
    # A fixed table: no source recruited beyond its rows.
    assert calibrated.extra_consents == 0 and calibrated.sources_recruited == 344
    assert calibrated.target_epsilon == 1.0 and calibrated.epsilon <= 1.0
    # Counting () as a third grouping set over-provisions: more dummies, more messages.
    by_hand = dpcomm.calibrate(
        sources=344, num_targets=20, grouping_sets=3, epsilon=1.0, delta=1e-4,
        max_extra_consents=0,
    )  # fmt: skip
    assert by_hand.countermeasure.num_dummies > calibrated.countermeasure.num_dummies
    # (3 clusters' dummies vs 2, though by hand the () set's messages are not even counted)
    assert by_hand.network_load_messages > calibrated.network_load_messages


def test_the_calibrated_run_meets_the_target_with_no_extra_consents(penguins, calibrated):
    run = dpcomm.run_sql(ROLLUP, penguins, countermeasure=calibrated, seed=3)
    report = run.report.to_dict()
    assert run.report.privacy.epsilon <= 1.0
    assert run.report.privacy.epsilon == pytest.approx(calibrated.epsilon, rel=1e-9)
    assert report["privacy"]["delta"] == calibrated.delta
    assert report["efficiency"]["extra_consents"] == 0
    # What the calibration said the run costs is what it sent (the empty set's messages too).
    assert report["efficiency"]["messages"] == calibrated.network_load_messages
    assert report["efficiency"]["max_channels_per_node"] == calibrated.max_channels_per_node


def test_another_query_shape_beyond_the_target_is_refused(penguins, calibrated):
    cube = "SELECT species, sex, island, COUNT(*) FROM penguins GROUP BY CUBE(species, sex, island)"
    with pytest.raises(InvalidParameterError) as refused:
        dpcomm.run_sql(cube, penguins, countermeasure=calibrated, seed=3)
    error = refused.value
    assert error.name == "countermeasure" and "\n" not in str(error)
    assert "7 data-dependent grouping sets" in str(error) and "nothing ran" in str(error)
    # Another T changes the plan too.
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        dpcomm.run_sql(ROLLUP, penguins, countermeasure=calibrated, num_targets=100, seed=3)


def test_a_calibration_reused_on_a_table_of_another_size_is_refused():
    """Made for S_t = recruited rows (σ > 0): on the S rows alone the batches are smaller and
    ε exceeds the target, which the run refuses instead of reporting it afterwards."""
    plan = dpcomm.calibrate(sources=300, num_targets=5, epsilon=1.0, delta=1e-4)
    assert plan.countermeasure.sampling_rate > 0 and plan.sources_recruited > 300
    sql = "SELECT g1, COUNT(*) FROM t GROUP BY g1"
    with pytest.raises(InvalidParameterError) as refused:
        dpcomm.run_sql(sql, datasets.synthetic(rows=300, seed=1), countermeasure=plan, seed=1)
    error = refused.value
    assert error.name == "countermeasure" and "\n" not in str(error)
    assert f"{plan.sources_recruited} sources" in error.allowed
    assert str(error.given).startswith("300 sources")
    # On the table it was made for, it runs, within the target.
    table = datasets.synthetic(rows=plan.sources_recruited, seed=1)
    run = dpcomm.run_sql(sql, table, countermeasure=plan, seed=1)
    assert run.report.privacy.epsilon == pytest.approx(plan.epsilon, rel=1e-9)
    assert run.report.privacy.epsilon <= 1.0


def test_another_size_within_the_target_runs():
    """σ = 0 (no consent to spare): ε depends on d and T only, so fewer rows stay within it."""
    sql = "SELECT g1, COUNT(*) FROM t GROUP BY g1"
    plan = dpcomm.calibrate(sql, datasets.synthetic(rows=200, seed=1), epsilon=1.0, delta=1e-4)
    # The calibration's target is the ε asked for: no note about the balanced batches.
    run = dpcomm.run_sql(sql, datasets.synthetic(rows=150, seed=1), countermeasure=plan)
    assert run.report.privacy.epsilon <= 1.0


def test_target_epsilon_refuses_before_running(monkeypatch):
    import dpcomm.engine.memory as memory

    def never(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(memory, "run_stages", never)
    scramblers = dpcomm.Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=2)
    with pytest.raises(InvalidParameterError) as refused:
        dpcomm.run_sql(
            "SELECT g1, COUNT(*) FROM t GROUP BY g1", datasets.synthetic(rows=100, seed=1),
            countermeasure=scramblers, target_epsilon=0.5, seed=1,
        )  # fmt: skip
    error = refused.value
    assert error.name == "target_epsilon" and error.given == 0.5
    assert "\n" not in str(error) and "nothing ran" in str(error)


def test_kmeans_calibrated_from_its_points():
    points = datasets.synthetic(rows=120, seed=2)[["m1", "m2"]].to_numpy()
    plan = dpcomm.calibrate(data=points, iterations=2, num_targets=3, epsilon=2.0, delta=1e-4)
    assert (plan.shape.workload, plan.shape.num_sources, plan.shape.num_clusters) == (
        "kmeans", 120, 2,
    )  # fmt: skip
    assert plan.extra_consents == 0
    run = dpcomm.kmeans(points, k=3, iterations=2, countermeasure=plan, seed=1)
    assert run.report.privacy.epsilon == pytest.approx(plan.epsilon, rel=1e-9)
    assert plan.epsilon <= 2.0
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        dpcomm.kmeans(points, k=3, iterations=5, countermeasure=plan, seed=1)


def test_a_query_without_a_non_empty_grouping_set_needs_no_calibration():
    with pytest.raises(InvalidParameterError, match="NoCountermeasure") as refused:
        dpcomm.calibrate(
            "SELECT COUNT(*) FROM t GROUP BY ()",
            datasets.synthetic(rows=50, seed=1),
            epsilon=1.0,
            delta=1e-4,
        )
    assert refused.value.name == "sql"


def test_a_table_without_rows_needs_no_calibration():
    empty = datasets.synthetic(rows=50, seed=1).take(np.arange(0))
    with pytest.raises(InvalidParameterError, match="NoCountermeasure") as refused:
        dpcomm.calibrate("SELECT g1, COUNT(*) FROM t GROUP BY g1", empty, epsilon=1.0, delta=1e-4)
    assert refused.value.name == "data" and "without rows" in str(refused.value)
