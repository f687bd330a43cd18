"""Estimates that say what they are, in every output: DataFrame, CLI table, --out, JSON."""

import csv
import json

import pytest

from dpcomm.cli.main import main
from dpcomm.engine.estimate import ESTIMATE_SEMANTICS
from dpcomm.engine.report import RESULT_SEMANTICS

SQL = "SELECT A, COUNT(*), SUM(I), AVG(I), MAX(I) FROM diabetes GROUP BY A"
OPTIONS = ["--mechanism", "scrambler", "--sampling", "0.3", "--batch", "100", "--dummies", "50"]
COLUMNS = (
    ["A"]
    + [
        f"{name} ({what})"
        for name in ("count_star()", "sum(I)", "avg(I)")
        for what in ("estimate", "se", "95% low", "95% high")
    ]
    + ["max(I)"]
)


def test_run_sql_and_every_cli_output_name_the_estimates_alike(capsys, tmp_path):
    import dpcomm

    chosen = dpcomm.Scramblers(sampling_rate=0.3, batch_size=100, num_dummies=50)
    run = dpcomm.run_sql(
        SQL,
        dpcomm.datasets.diabetes(),
        countermeasure=chosen,
        num_targets=5,
        seed=3,
        estimate="unbiased",
    )
    assert list(run.result.columns) == COLUMNS == list(run.columns)
    assert str(run.result["count_star() (estimate)"].dtype) == "float64"
    argv = ["run", "aggregate", "--sql", SQL, "--targets", "5", "--seed", "3", *OPTIONS]
    out, report = tmp_path / "result.csv", tmp_path / "report.json"
    assert main([*argv, "--json", "--estimate", "unbiased"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed["result"][0]) == COLUMNS
    assert printed["report"]["result_semantics"] == ESTIMATE_SEMANTICS
    assert printed["report"]["estimate"]["method"] == "horvitz-thompson"
    assert printed["report"]["estimate"] == run.report.estimate.to_dict()
    errors = printed["report"]["utility"]["mean_relative_error"]
    assert list(errors) == [*COLUMNS[1:13:4], "max(I)"]
    assert errors["count_star() (estimate)"] < 0.05  # the delivered count is off by ~0.28
    for row, frame_row in zip(printed["result"], run.result.to_dict("records"), strict=True):
        for column in COLUMNS:
            assert frame_row[column] == pytest.approx(row[column], rel=1e-12)
    assert main([*argv, "--estimate", "unbiased", "--out", str(out), "--report", str(report)]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if "count_star() (estimate)" in line)
    assert header.split()[0] == "A" and "count_star() (95% high)" in header
    assert f"Result (7 rows): {ESTIMATE_SEMANTICS}" in text
    assert "estimates: Horvitz–Thompson, delivery probability P ((A): 0.76)" in text
    assert "count_star() (estimate): mean relative error" in text
    with out.open() as handle:
        assert next(csv.reader(handle)) == COLUMNS
    assert json.loads(report.read_text())["estimate"] == printed["report"]["estimate"]
    delivered = dpcomm.run_sql(
        SQL, dpcomm.datasets.diabetes(), countermeasure=chosen, num_targets=5, seed=3
    )
    assert delivered.report.result_semantics == RESULT_SEMANTICS
    assert (run.result["count_star() (estimate)"] > delivered.result["count_star()"]).all()
    with pytest.raises(dpcomm.InvalidParameterError, match="estimate"):
        dpcomm.run_sql(SQL, dpcomm.datasets.diabetes(), countermeasure=chosen, estimate="x")


def test_the_summaries_count_rows_per_grouping_set(capsys):
    import dpcomm

    run = dpcomm.run_sql(
        "SELECT A, B, COUNT(*) FROM diabetes GROUP BY GROUPING SETS ((A), (B))",
        dpcomm.datasets.diabetes(),
        countermeasure=dpcomm.NoCountermeasure(),
        seed=1,
    )
    assert "(A) 10,000, (B) 10,000 of 10,000 rows used" in repr(run)
    assert run.report.to_dict()["utility"]["tuples_used"] == {"(A)": 10_000, "(B)": 10_000}
