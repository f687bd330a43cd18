"""MEDIAN and QUANTILE_CONT under a noisy release: rewriting, calibration, draws, accounting."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import dpcomm
from dpcomm.data.table import table_from_arrays
from dpcomm.engine.memory import simulate
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.query import BoundAggregate
from dpcomm.release.compose import compose_release
from dpcomm.release.noise import noisy_program, release_from_spec, release_spec
from dpcomm.release.report import release_report

KEYS = {"k": ["a", "b"]}
BOUNDS = {"v": (0.0, 32.0)}


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(3)
    keys = np.array(["a", "b"] * 40, dtype=object)
    values = np.where(keys == "a", 10.0, 20.0) + rng.integers(-2, 3, 80)
    values[:4] = 500.0  # clamped to 32
    return table_from_arrays("t", {"k": keys, "v": values, "w": np.arange(80.0)})


@pytest.mark.parametrize(
    ("sql", "options", "match"),
    [
        ("SELECT k, MEDIAN(v) FROM t GROUP BY k", {}, "release="),
        ("SELECT k, MEDIAN(v) FROM t GROUP BY k", {"bounds": {"w": (0, 1)}}, "bounds"),
        ("SELECT k, MEDIAN(v) FROM t GROUP BY k", {"bounds": {"v": (1, 1)}}, "lo < hi"),
        ("SELECT k, MEDIAN(v + 1) FROM t GROUP BY k", {"bounds": BOUNDS}, "column with bounds"),
        (
            "SELECT k, QUANTILE_CONT(v, [0.1, 0.5]) FROM t GROUP BY k",
            {"bounds": BOUNDS},
            "one number",
        ),
        (
            "SELECT k, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY v) FROM t GROUP BY k",
            {"bounds": BOUNDS},
            "QUANTILE_CONT",
        ),
    ],
)
def test_refusals_are_one_line(table, sql, options, match):
    release = {"release": dpcomm.Laplace(1.0), "keys": KEYS} if options else {}
    with pytest.raises(InvalidParameterError, match=match) as caught:
        noisy_program(sql, table, num_targets=3, **release, **options)
    assert "\n" not in str(caught.value)


def test_views_set_the_distance(table):
    sql = "SELECT k, MEDIAN(v) AS m FROM t GROUP BY ROLLUP (k)"
    shared = noisy_program(
        sql, table, num_targets=3, release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS
    )
    alone = noisy_program(
        sql, table, num_targets=3, release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS,
        countermeasure=dpcomm.NoCountermeasure(),
    )  # fmt: skip
    # (k): 3 under scramblers with sampling (2 keys on one node or not), 2 without; (): 2
    assert shared.release.quantiles[0].distance == 5
    assert alone.release.quantiles[0].distance == 4
    assert (
        shared.release.quantiles[0].shared_blanket and not alone.release.quantiles[0].shared_blanket
    )


def test_a_huge_epsilon_releases_the_snapped_median(table):
    sql = (
        "SELECT k, MEDIAN(v) AS m, QUANTILE(v, 0.25) FILTER (WHERE w >= 40) AS q FROM t GROUP BY k"
    )
    run = dpcomm.run_sql(
        sql, table, countermeasure=dpcomm.NoCountermeasure(), seed=1,
        release=dpcomm.Laplace(1e6), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    values = np.clip(np.array(table.column("v").values, dtype=float), 0, 32)
    keys = np.array(table.column("k").values)
    step = 32.0 / 32  # 33 candidates over [0, 32]
    for row in run.rows:
        mine = values[keys == row["k"]]
        assert row["m"] == pytest.approx(np.round(np.median(mine) / step) * step)
        late = values[(keys == row["k"]) & (np.arange(80) >= 40)]
        assert row["q"] == pytest.approx(np.quantile(late, 0.25, method="nearest"), abs=1.0)
    release = run.report.release
    assert release is not None and release.epsilon == pytest.approx(1e6)
    assert release.split[0][0].startswith("MEDIAN(v)")


def test_the_quantile_is_composed_and_rebound(table):
    sql = "SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY k"
    program = noisy_program(
        sql, table, num_targets=3, release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS
    )
    release = program.release
    assert len(release.noises) == 1 and len(release.quantiles) == 1
    assert release.epsilon == pytest.approx(1.0)
    scramblers = dpcomm.Scramblers(sampling_rate=0.1, batch_size=40, num_dummies=0)
    run = simulate(program, scramblers, delta=1e-4, seed=1)
    privacy = run.privacy
    assert compose_release(privacy, release.charged).release_epsilon == pytest.approx(1.0)
    assert compose_release(privacy, release.noises).release_epsilon == pytest.approx(0.5)
    bound = BoundAggregate.from_dict(program.query.to_dict())
    assert bound.quantiles == program.query.quantiles
    again = release_from_spec(bound, release_spec(release), num_targets=program.num_targets)
    assert again.quantiles == release.quantiles
    counts = [o.name for o in program.query.outputs if o.function == "count"]
    assert len(counts) == 33  # one hidden COUNT per candidate, never published
    for row in run.result:
        assert set(row) == {"k", "n", "m"}
    report = release_report(program, privacy)
    assert report.composed_epsilon is not None and report.epsilon == pytest.approx(1.0)


def test_calibrate_plans_a_median_and_its_error(table):
    """calibrate splits ε between traffic and a release with a MEDIAN: the quantile's
    expected error (its scale and candidates) is in the model the split minimises, and the
    run reports the planned guarantee."""
    from dpcomm.calibration.split import expected_relative_error

    sql = "SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY k"
    options = {"bounds": BOUNDS, "keys": KEYS}
    calibration = dpcomm.calibrate(
        sql, table, epsilon=2.0, delta=1e-4, release="laplace", max_messages=500, **options
    )
    split = calibration.split
    assert split is not None and calibration.release is not None
    ((output, alpha, candidates),) = split.shape.quantiles
    assert alpha == 0.5 and (candidates[0], candidates[-1], len(candidates)) == (0.0, 32.0, 33)
    assert 0.05 < split.chosen.traffic_share < 0.95  # flooding is over the load limit
    program = noisy_program(
        sql, table, release=calibration.release, countermeasure=calibration.countermeasure,
        **options,
    )  # fmt: skip
    assert program.release is not None
    (median,) = program.release.quantiles
    assert median.output == output
    noises = (*program.release.noises, median)
    rate = calibration.countermeasure.sampling_rate
    assert expected_relative_error(split.shape, noises, sampling_rate=rate) == pytest.approx(
        split.expected_relative_error, rel=1e-9
    )
    louder = (*program.release.noises, replace(median, scale=median.scale / 4))
    assert expected_relative_error(split.shape, louder, sampling_rate=rate) < (
        split.expected_relative_error
    )  # the median's noise weighs in the model
    run = dpcomm.run_sql(sql, table, countermeasure=calibration, seed=1)
    report = run.report.release
    assert report is not None
    assert report.epsilon_total == split.composition.epsilon <= 2.0
    assert {row["k"] for row in run.rows} == {"a", "b"}


def test_the_audit_runs_a_median_and_its_seeded_fault(table):
    from dpcomm.experiments.release_audit import audit_release, seeded_release_fault

    sql = "SELECT k, MEDIAN(v) AS m FROM t GROUP BY k"
    scramblers = dpcomm.Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=0)
    faulty = audit_release(
        scramblers, sql=sql, runs=100, pairs=["third-key"], fault="quantile-own-row", rng=1
    )
    assert faulty.fault == "quantile-own-row" and faulty.passed  # 100 runs show nothing
    program = noisy_program(
        sql, table, num_targets=2, release=dpcomm.Laplace(3.0), bounds=BOUNDS, keys=KEYS
    )
    wrong = seeded_release_fault(program, "quantile-own-row")
    (right,), (fault,) = program.release.quantiles, wrong.release.quantiles
    assert (right.distance, fault.distance) == (3, 2) and fault.epsilon == right.epsilon
    assert fault.scale == pytest.approx(right.scale * 2 / 3)
    (one,) = seeded_release_fault(program, "quantile-add-remove").release.quantiles
    assert one.distance == 1 and one.scale == pytest.approx(right.scale / 3)
    counting = noisy_program(
        "SELECT k, COUNT(*) AS n FROM t GROUP BY k", table,
        release=dpcomm.Laplace(1.0), keys=KEYS, num_targets=2,
    )  # fmt: skip
    with pytest.raises(InvalidParameterError, match="MEDIAN"):
        seeded_release_fault(counting, "quantile-own-row")


def test_the_uncharged_quantile_fault_claims_the_count_alone(table):
    """``quantile-uncharged``: the median drawn as before, its share left out of the claim."""
    from dpcomm.experiments.release_audit import seeded_release_fault

    sql = "SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY k"
    program = noisy_program(
        sql, table, num_targets=2, release=dpcomm.Laplace(2.0), bounds=BOUNDS, keys=KEYS
    )
    wrong = seeded_release_fault(program, "quantile-uncharged")
    assert wrong.release.quantiles == program.release.quantiles
    assert wrong.release.charged == program.release.noises
    privacy = simulate(program, dpcomm.LocalFlooding(sampling_rate=0.0), delta=1e-4, seed=1).privacy
    assert release_report(wrong, privacy).epsilon == pytest.approx(1.0)  # the COUNT's share
    median = noisy_program(
        "SELECT k, MEDIAN(v) AS m FROM t GROUP BY k", table,
        num_targets=2, release=dpcomm.Laplace(2.0), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    with pytest.raises(InvalidParameterError, match="beside a noisy COUNT"):
        seeded_release_fault(median, "quantile-uncharged")
