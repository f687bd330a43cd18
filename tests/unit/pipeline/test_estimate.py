"""Estimates that say what they are: Horvitz–Thompson values, standard errors, 95% intervals."""

import math
from dataclasses import replace

import numpy as np
import pytest

from dpcomm.data import synthetic_table, table_from_arrays
from dpcomm.engine.engines import MemoryEngine
from dpcomm.pipeline.estimate import (
    Z_95,
    estimate_name,
    interval_names,
    standard_error_name,
    unbiased_estimate,
)
from dpcomm.pipeline.runs import run_aggregate
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT g1, COUNT(*), SUM(m1), AVG(m1), MAX(m1) FROM t GROUP BY g1"
ESTIMATED = ("count_star()", "sum(m1)", "avg(m1)")
SAMPLED = Scramblers(sampling_rate=0.6, batch_size=100, num_dummies=5)


def synthetic_program(sql=SQL, rows=2000):
    table = synthetic_table(num_rows=rows, num_intervals=4, seed=2)
    return AggregateProgram.from_sql(sql, table, num_targets=4)


def runs(program, countermeasure, seeds):
    """The baseline, then one unaccounted run per seed (the estimate needs no guarantee)."""
    engine = MemoryEngine()
    baseline = engine.baseline(program, seed=0)
    return baseline, [engine.execute(program, countermeasure, seed=s, delta=None) for s in seeds]


def test_columns_say_estimate_and_carry_their_errors():
    program = synthetic_program()
    baseline, (run,) = runs(program, SAMPLED, [1])
    estimate = unbiased_estimate(program, run, baseline)
    expected = ["g1"]
    for name in ESTIMATED:
        expected += [estimate_name(name), standard_error_name(name), *interval_names(name)]
    assert list(estimate.columns) == [*expected, "max(m1)"]
    assert estimate.columns[1:5] == (
        "count_star() (estimate)",
        "count_star() (se)",
        "count_star() (95% low)",
        "count_star() (95% high)",
    )
    assert [list(row) for row in estimate.rows] == [list(estimate.columns)] * len(estimate.rows)
    assert set(estimate.types[1:-1]) == {"DOUBLE"}
    assert estimate.report.delivered_columns == ("max(m1)",)
    p = 1 - 0.6 + 0.6 / 4
    assert estimate.report.delivery_probability == {"(g1)": pytest.approx(p)}
    delivered = {row["g1"]: row for row in run.result}
    for row in estimate.rows:
        count = delivered[row["g1"]]["count_star()"]
        assert row["count_star() (estimate)"] == pytest.approx(count / p)
        assert row["count_star() (se)"] == pytest.approx(math.sqrt(count * (1 - p)) / p)
        assert row["sum(m1) (estimate)"] == pytest.approx(delivered[row["g1"]]["sum(m1)"] / p)
        assert row["avg(m1) (estimate)"] == delivered[row["g1"]]["avg(m1)"]
        for name in ESTIMATED:
            low, high = row[f"{name} (95% low)"], row[f"{name} (95% high)"]
            value, error = row[f"{name} (estimate)"], row[f"{name} (se)"]
            assert error > 0
            assert (low, high) == pytest.approx((value - Z_95 * error, value + Z_95 * error))


def test_the_sum_and_avg_errors_follow_the_delivered_values():
    """v̂ = Σ x² (1 − P)/P² for SUM; (1 − P) Σ (x − avg)² / c² for AVG (the delta method)."""
    program = synthetic_program()
    baseline, (run,) = runs(program, SAMPLED, [4])
    p = 1 - 0.6 + 0.6 / 4
    estimate = unbiased_estimate(program, run, baseline)
    table = program.source_rows()
    keys, values = table.column("g1").values, table.column("m1").values
    delivered = np.asarray(run.delivered["(g1)"], dtype=bool)
    for row in estimate.rows:
        x = values[delivered & (keys == row["g1"])]
        assert row["sum(m1) (se)"] == pytest.approx(math.sqrt((x * x).sum() * (1 - p)) / p)
        spread = ((x - x.mean()) ** 2).sum()
        assert row["avg(m1) (se)"] == pytest.approx(math.sqrt((1 - p) * spread) / len(x))


def test_without_sampling_the_estimate_is_the_delivered_result_with_no_error():
    program = synthetic_program(
        "SELECT g1, COUNT(*), SUM(m1) FROM t GROUP BY GROUPING SETS ((g1), ())"
    )
    chosen = Scramblers(sampling_rate=0.0, batch_size=100, num_dummies=5)
    baseline, (run,) = runs(program, chosen, [1])
    estimate = unbiased_estimate(program, run, baseline)
    assert set(estimate.report.delivery_probability.values()) == {1.0}
    for row, exact in zip(estimate.rows, run.result, strict=True):
        for name in ("count_star()", "sum(m1)"):
            value = row[estimate_name(name)]
            assert value == pytest.approx(float(exact[name]))
            assert row[standard_error_name(name)] == 0.0
            assert row[f"{name} (95% low)"] == row[f"{name} (95% high)"] == value


def test_the_95_percent_intervals_cover_the_exact_values_about_95_percent_of_the_time():
    """200 seeds × 4 groups per column: a coverage outside [0.88, 0.99] fails.

    At the nominal 0.95 the binomial standard deviation over 800 intervals is 0.008, so the
    range is 8 of them below and 5 above: a correct interval never leaves it, while a standard
    error off by a factor 1.5 (coverage 0.81 or 0.998) does.
    """
    program = synthetic_program()
    exact = {row["g1"]: row for row in program.nonprivate_result()}
    baseline, all_runs = runs(program, SAMPLED, range(200))
    hits: dict[str, list[bool]] = {name: [] for name in ESTIMATED}
    values: dict[tuple[object, str], list[float]] = {}
    errors: dict[tuple[object, str], list[float]] = {}
    for run in all_runs:
        for row in unbiased_estimate(program, run, baseline).rows:
            for name in ESTIMATED:
                low, high = interval_names(name)
                hits[name].append(row[low] <= exact[row["g1"]][name] <= row[high])
                values.setdefault((row["g1"], name), []).append(row[estimate_name(name)])
                errors.setdefault((row["g1"], name), []).append(row[standard_error_name(name)])
    for name, covered in hits.items():
        assert len(covered) == 800
        assert 0.88 <= np.mean(covered) <= 0.99, (name, np.mean(covered))
    for key, drawn in values.items():
        # The standard error estimates the spread of the estimates over runs.
        assert np.std(drawn) == pytest.approx(np.mean(errors[key]), rel=0.2), key
        if key[1] != "avg(m1)":  # COUNT and SUM are unbiased: within 4 standard errors
            truth = exact[key[0]][key[1]]
            assert abs(np.mean(drawn) - truth) < 4 * np.std(drawn) / math.sqrt(200)


def rare_program():
    """400 rows, three of key 'rare': it often receives no tuple at P = 0.325."""
    keys = np.array(["common"] * 397 + ["rare"] * 3, dtype=object)
    table = table_from_arrays("t", {"k": keys, "x": np.arange(400, dtype=np.float64)})
    return AggregateProgram.from_sql(
        "SELECT k, COUNT(*), SUM(x), AVG(x), MIN(x) FROM t GROUP BY k", table, num_targets=4
    )


def test_a_group_that_received_nothing_is_estimated_as_zero_so_the_mean_is_unbiased():
    program = rare_program()
    chosen = Scramblers(sampling_rate=0.9, batch_size=50, num_dummies=2)
    baseline, all_runs = runs(program, chosen, range(300))
    counts, empty_runs = [], 0
    for run in all_runs:
        estimate = unbiased_estimate(program, run, baseline)
        rows = {row["k"]: row for row in estimate.rows}
        assert list(rows) == ["common", "rare"]  # key order, the empty group included
        rare = rows["rare"]
        counts.append(rare["count_star() (estimate)"])
        delivered = {row["k"] for row in run.result}
        if "rare" not in delivered:
            empty_runs += 1
            assert estimate.report.groups_estimated_empty == {"(k)": 1}
            assert rare["count_star() (estimate)"] == rare["sum(x) (estimate)"] == 0.0
            assert rare["count_star() (se)"] == 0.0
            assert rare["avg(x) (estimate)"] is None and rare["avg(x) (se)"] is None
            assert rare["min(x)"] is None
        else:
            assert estimate.report.groups_estimated_empty == {"(k)": 0}
    assert 50 < empty_runs < 150  # (1 − 0.325)³ ≈ 0.31 of 300 runs
    # Unbiased with the zeros (3 tuples; the sd of one estimate is √(3 (1 − P))/P ≈ 4.4).
    assert abs(np.mean(counts) - 3) < 4 * np.std(counts) / math.sqrt(300)
    # Dropping the empty groups would have biased the mean upward.
    assert np.mean([c for c in counts if c > 0]) > 4


def test_without_a_key_domain_the_empty_groups_are_missing_and_the_report_says_so():
    program = rare_program()
    chosen = Scramblers(sampling_rate=0.9, batch_size=50, num_dummies=2)
    _, all_runs = runs(program, chosen, range(40))
    run = next(r for r in all_runs if "rare" not in {row["k"] for row in r.result})
    estimate = unbiased_estimate(program, run)
    assert [row["k"] for row in estimate.rows] == ["common"]
    assert estimate.report.key_domain is None
    assert "groups that received no tuple are missing" in estimate.report.describe()


def test_without_the_table_sum_and_avg_have_no_interval():
    program = synthetic_program()
    baseline, (run,) = runs(program, SAMPLED, [2])
    rowless = replace(program, table=None)
    estimate = unbiased_estimate(rowless, run, baseline)
    row = estimate.rows[0]
    assert row["count_star() (se)"] > 0
    for name in ("sum(m1)", "avg(m1)"):
        assert row[estimate_name(name)] is not None
        assert row[standard_error_name(name)] is None and row[f"{name} (95% low)"] is None
    assert set(estimate.report.no_interval) == {"sum(m1) (estimate)", "avg(m1) (estimate)"}
    assert "no interval" in estimate.report.describe()


def test_a_sum_of_nulls_stays_null_and_counts_of_a_column_are_estimated():
    keys = np.repeat(np.array([1, 2]), 50)
    table = table_from_arrays("t", {"k": keys, "x": np.ones(100)})
    nulls = keys == 2
    table = replace(
        table,
        columns=tuple(replace(c, is_null=nulls) if c.name == "x" else c for c in table.columns),
    )
    program = AggregateProgram.from_sql(
        "SELECT k, COUNT(x), SUM(x) FROM t GROUP BY k", table, num_targets=2
    )
    baseline, (run,) = runs(
        program, Scramblers(sampling_rate=0.5, batch_size=20, num_dummies=1), [3]
    )
    rows = {row["k"]: row for row in unbiased_estimate(program, run, baseline).rows}
    assert rows[2]["count(x) (estimate)"] == 0.0 and rows[2]["sum(x) (estimate)"] is None
    assert rows[2]["sum(x) (se)"] is None
    assert rows[1]["count(x) (estimate)"] > 0


def test_the_run_reports_the_utility_of_its_estimates():
    program = synthetic_program()
    outcome = run_aggregate(program, SAMPLED, delta=1e-4, seed=5)
    estimated = outcome.with_unbiased_estimate()
    exact = {row["g1"]: row for row in program.nonprivate_result()}
    utility = estimated.report.utility
    for name in ESTIMATED:
        errors = [
            abs(row[estimate_name(name)] - exact[row["g1"]][name]) / abs(exact[row["g1"]][name])
            for row in estimated.rows
        ]
        assert utility.mean_relative_error[estimate_name(name)] == pytest.approx(np.mean(errors))
    # The delivered COUNT is off by 1 − P ≈ 0.45; its estimate by a few percent.
    assert outcome.report.utility.mean_relative_error["count_star()"] > 0.4
    assert utility.mean_relative_error["count_star() (estimate)"] < 0.1
    assert utility.tuples_used == outcome.report.utility.tuples_used
    assert estimated.report.privacy == outcome.report.privacy  # post-processing


def test_no_countermeasure_estimates_are_exact():
    program = synthetic_program()
    outcome = run_aggregate(program, NoCountermeasure(), delta=1e-4, seed=1)
    estimated = outcome.with_unbiased_estimate()
    assert set(estimated.report.utility.mean_relative_error.values()) == {0.0}
    assert estimated.report.estimate.delivery_probability == {"(g1)": 1.0}
