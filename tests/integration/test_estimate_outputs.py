"""Estimates that say what they are, in every output: DataFrame, CLI table, --out, JSON."""

import csv
import json

import pytest

from dpcomm.cli.main import main
from dpcomm.pipeline.estimate import ESTIMATE_SEMANTICS
from dpcomm.pipeline.report import RESULT_SEMANTICS

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


def test_a_withheld_avg_interval_says_why_in_every_output(capsys, tmp_path):
    """Under a release an AVG's interval is given or withheld with its reason: in the
    DataFrame, the JSON and the CLI table alike. 36 keys of the domain have no row: each
    one's noisy count is ≤ 0 about half the time (OpenDP's noise is not seeded), so some
    interval is withheld but with chance 2⁻³⁶."""
    import dpcomm
    from dpcomm.pipeline.estimate import AVG_COUNT_TOO_SMALL, AVG_REASONS

    path = tmp_path / "people.csv"
    path.write_text("city,age\n" + "".join(f"c{i % 4},{20 + i % 50}\n" for i in range(400)))
    cities = [f"c{i}" for i in range(40)]
    sql = "SELECT city, COUNT(*), AVG(age) FROM people GROUP BY city"
    options = ["--mechanism", "scrambler", "--batch", "50", "--dummies", "5", "--sampling", "0.2"]
    chosen = dpcomm.Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=5)
    run = dpcomm.run_sql(
        sql, path, countermeasure=chosen, seed=1, estimate="unbiased",
        release=dpcomm.Laplace(1.0), bounds={"age": (0, 100)}, keys={"city": cities},
    )  # fmt: skip
    columns = [f"avg(age) ({what})" for what in ("estimate", "se", "95% low", "95% high")]
    assert list(run.result.columns)[-5:] == [*columns, "avg(age) (no interval)"]
    frame = run.result.set_index("city")
    withheld = frame["avg(age) (no interval)"].notna()
    assert withheld.any() and not withheld["c0"]  # c0: 100 rows, its count far above 0
    assert frame.loc[withheld, "avg(age) (95% low)"].isna().all()
    assert frame.loc[~withheld, "avg(age) (95% low)"].notna().all()
    assert set(frame.loc[withheld, "avg(age) (no interval)"]) <= set(AVG_REASONS)
    assert "avg(age) (estimate): no interval (withheld in" in run.report.estimate.describe()
    argv = [
        "run", "aggregate", "--data", path, "--sql", sql, *options, "--release", "laplace",
        "--release-epsilon", "1", "--bounds", "age=0:100", "--keys", "city=" + ",".join(cities),
        "--estimate", "unbiased", "--seed", "1",
    ]  # fmt: skip
    assert main([str(a) for a in [*argv, "--json"]]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["result"]
    assert all(
        (row["avg(age) (95% low)"] is None) == (row["avg(age) (no interval)"] in AVG_REASONS)
        for row in rows
    )
    assert any(row["avg(age) (no interval)"] == AVG_COUNT_TOO_SMALL for row in rows)
    assert "no interval" in document["report"]["estimate"]["no_interval"]["avg(age) (estimate)"]
    assert main([str(a) for a in [*argv, "--rows", "40"]]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith("  city "))
    assert header.rstrip().endswith("avg(age) (no interval)") and "(95% high)" in header
    assert AVG_COUNT_TOO_SMALL in text
