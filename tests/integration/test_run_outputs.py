"""dpcomm run ... --out FILE.csv|.parquet and --report FILE.json."""

import json

import duckdb
import pytest

SQL = "SELECT A, B, COUNT(*), AVG(I) FROM diabetes GROUP BY GROUPING SETS ((A), (B))"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_result_and_the_report_are_written(cli, tmp_path, suffix):
    out, report = tmp_path / f"result{suffix}", tmp_path / "report.json"
    status, printed, _ = cli("run", "aggregate", "--sql", SQL, "--seed", 3, "--json")
    assert status == 0
    document = json.loads(printed)
    args = ["run", "aggregate", "--sql", SQL, "--seed", 3, "--out", out, "--report", report]
    status, _, err = cli(*args)
    assert status == 0, err
    written = duckdb.sql(f"SELECT * FROM '{out}'")
    assert written.columns == list(document["result"][0])
    rows = [dict(zip(written.columns, row, strict=True)) for row in written.fetchall()]
    assert len(rows) == len(document["result"])
    for mine, theirs in zip(rows, document["result"], strict=True):
        for column, value in theirs.items():
            assert (
                mine[column] == pytest.approx(value) if value is not None else mine[column] is None
            )
    saved = json.loads(report.read_text())
    assert saved["privacy"] == document["report"]["privacy"]
    assert saved["utility"] == document["report"]["utility"]


def test_kmeans_writes_centroids_and_assignments(cli, tmp_path):
    out = tmp_path / "centroids.csv"
    args = ["run", "kmeans", "--sources", 200, "--k", 3, "--iterations", 2, "--seed", 1]
    status, printed, _ = cli(*args, "--json")
    assert status == 0
    centroids = json.loads(printed)["result"]["centroids"]
    status, _, err = cli(*args, "--out", out)
    assert status == 0, err
    written = duckdb.sql(f"SELECT * FROM '{out}' ORDER BY centroid").fetchall()
    assert len(written) == 3
    for row, centroid in zip(written, centroids, strict=True):
        assert list(row[1:]) == pytest.approx(centroid)
    assigned = duckdb.sql(f"SELECT * FROM '{tmp_path / 'centroids-assignments.csv'}'")
    assert assigned.shape == (200, 2)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--out", "result.txt"), ("--report", "report.csv"), ("--out", "missing/result.csv")],
)
def test_bad_output_paths_are_refused_before_the_run(cli, tmp_path, option, value):
    status, out, err = cli("run", "aggregate", "--sql", SQL, option, tmp_path / value)
    assert status != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and option in err
    assert list(tmp_path.iterdir()) == []
