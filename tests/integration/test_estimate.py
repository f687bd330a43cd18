"""Honest results: what the values are, and --estimate unbiased (COUNT and SUM divided by P)."""

import json

import numpy as np
import pytest

from dpcomm.cli.main import main
from dpcomm.data import synthetic_table
from dpcomm.engine.estimate import unbiased_estimate
from dpcomm.engine.report import RESULT_SEMANTICS
from dpcomm.engine.runs import run_aggregate
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT g1, COUNT(*), SUM(m1), AVG(m1) FROM t GROUP BY GROUPING SETS ((g1), ())"


def program():
    table = synthetic_table(num_rows=2000, num_intervals=4, seed=2)
    return AggregateProgram.from_sql(SQL, table, num_targets=4)


def test_without_sampling_the_estimate_is_the_delivered_result():
    compiled = program()
    outcome = run_aggregate(
        compiled, Scramblers(sampling_rate=0.0, batch_size=100, num_dummies=5), delta=1e-4, seed=1
    )
    rows, probabilities = unbiased_estimate(compiled, outcome.run)
    assert set(probabilities.values()) == {1.0}
    assert rows == [
        {k: float(v) if k in ("count_star()", "sum(m1)") else v for k, v in row.items()}
        for row in outcome.rows
    ]
    assert outcome.report.result_semantics == RESULT_SEMANTICS
    estimated = outcome.with_unbiased_estimate()
    assert estimated.rows == rows and estimated.report.estimate.startswith("unbiased")


def test_the_unbiased_count_averages_to_the_true_count():
    compiled = program()
    truth = {
        row["g1"]: row["count_star()"]
        for row in compiled.nonprivate_result()
        if row["g1"] is not None
    }
    chosen = Scramblers(sampling_rate=0.6, batch_size=100, num_dummies=5)
    estimates: dict[object, list[float]] = {g: [] for g in truth}
    for seed in range(30):
        outcome = run_aggregate(compiled, chosen, delta=1e-4, seed=seed)
        rows, probabilities = unbiased_estimate(compiled, outcome.run)
        assert probabilities["()"] == 1.0  # the grand total's cluster has one target
        assert probabilities["(g1)"] == pytest.approx(1 - 0.6 + 0.6 / 4)
        for row in rows:
            if row["g1"] is not None:
                estimates[row["g1"]].append(row["count_star()"])
    for group, values in estimates.items():
        # 30 runs; each estimate's sd is about sqrt(N (1 − P) / P) ≈ 16: 5 standard errors.
        assert abs(np.mean(values) - truth[group]) < 5 * np.std(values) / np.sqrt(30) + 1


def test_the_cli_labels_the_estimate(capsys):
    args = ["run", "aggregate", "--sql", "SELECT A, COUNT(*) FROM diabetes GROUP BY A"]
    assert main([*args, "--seed", "1", "--json", "--estimate", "unbiased"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["report"]["estimate"].startswith("unbiased: COUNT and SUM divided by")
    assert document["report"]["result_semantics"] == RESULT_SEMANTICS
    assert main([*args, "--seed", "1"]) == 0
    assert "not differentially private" in capsys.readouterr().out


def test_run_sql_gives_the_cli_estimate(capsys):
    import dpcomm

    sql = "SELECT A, COUNT(*), SUM(I), AVG(I) FROM diabetes GROUP BY A"
    chosen = dpcomm.Scramblers(sampling_rate=0.3, batch_size=100, num_dummies=50)
    run = dpcomm.run_sql(
        sql,
        dpcomm.datasets.diabetes(),
        countermeasure=chosen,
        num_targets=5,
        seed=3,
        estimate="unbiased",
    )
    argv = ["run", "aggregate", "--sql", sql, "--targets", "5", "--seed", "3"]
    options = ["--mechanism", "scrambler", "--sampling", "0.3", "--batch", "100", "--dummies", "50"]
    assert main([*argv, *options, "--json", "--estimate", "unbiased"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert run.report.estimate == printed["report"]["estimate"]
    assert str(run.result["count_star()"].dtype) == "float64"
    by_group = {row["A"]: row for row in printed["result"]}
    for row in run.result.to_dict("records"):
        assert row["count_star()"] == pytest.approx(by_group[row["A"]]["count_star()"], rel=1e-12)
        assert row["sum(I)"] == pytest.approx(by_group[row["A"]]["sum(I)"], rel=1e-12)
    delivered = dpcomm.run_sql(
        sql, dpcomm.datasets.diabetes(), countermeasure=chosen, num_targets=5, seed=3
    )
    assert (run.result["count_star()"] > delivered.result["count_star()"]).all()
    with pytest.raises(dpcomm.InvalidParameterError, match="estimate"):
        dpcomm.run_sql(sql, dpcomm.datasets.diabetes(), countermeasure=chosen, estimate="x")
