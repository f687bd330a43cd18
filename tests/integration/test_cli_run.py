"""`dpcomm run aggregate|kmeans` and `dpcomm data synthetic` end to end, through main()."""

import json

import duckdb
import pytest

RUNNING_EXAMPLE = "SELECT A, B, AVG(I) FROM diabetes GROUP BY GROUPING SETS ((A), (B))"


def test_running_example_prints_result_privacy_utility_efficiency(cli):
    status, out, err = cli("run", "aggregate", "--sql", RUNNING_EXAMPLE)
    assert status == 0, err
    for heading in ("Result (", "Privacy", "Utility", "Efficiency", "cluster (A)", "avg(I)"):
        assert heading in out


def test_aggregate_json_has_duckdb_names_and_nulls(cli):
    status, out, err = cli(
        "run", "aggregate", "--sql", RUNNING_EXAMPLE, "--mechanism", "none", "--json"
    )
    assert status == 0, err
    document = json.loads(out)
    rows = document["result"]
    assert set(rows[0]) == {"A", "B", "avg(I)", "grouping_set"}
    assert {row["grouping_set"] for row in rows} == {"(A)", "(B)"}
    assert all((row["A"] is None) != (row["B"] is None) for row in rows)
    report = document["report"]
    assert report["privacy"]["epsilon"] == "inf"
    assert report["utility"]["tuples_used"] == {"(A)": 10_000, "(B)": 10_000}
    assert report["utility"]["sources"] == 10_000
    assert report["efficiency"]["message_overhead"] == 1.0


def test_aggregate_on_a_csv_file_matches_duckdb(cli, tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("city,age,score\nParis,30,1.5\nLyon,40,\nParis,,2.5\n,25,4.0\n")
    sql = "SELECT city, COUNT(*) AS n, SUM(score) AS total FROM people GROUP BY city"
    status, out, err = cli(
        "run",
        "aggregate",
        "--sql",
        sql,
        "--data",
        str(path),
        "--mechanism",
        "none",
        "--json",
    )
    assert status == 0, err
    rows = json.loads(out)["result"]
    connection = duckdb.connect()
    expected = connection.sql(sql.replace("people", f"read_csv('{path}')")).fetchall()
    assert sorted(map(str, ((r["city"], r["n"], r["total"]) for r in rows))) == sorted(
        map(str, expected)
    )


def test_synthetic_data_command_and_run(cli, tmp_path):
    out_file = tmp_path / "synthetic.parquet"
    status, _, err = cli(
        "data",
        "synthetic",
        "--rows",
        "5000",
        "--out",
        str(out_file),
        "--distribution",
        "zipf",
        "--seed",
        "3",
    )
    assert status == 0, err
    assert duckdb.connect().execute(f"SELECT COUNT(*) FROM '{out_file}'").fetchone() == (5000,)
    status, out, err = cli(
        "run",
        "aggregate",
        "--data",
        str(out_file),
        "--sql",
        "SELECT g1, g2, AVG(m1) FROM s GROUP BY CUBE (g1, g2)",
        "--batch",
        "50",
        "--json",
    )
    assert status == 0, err
    report = json.loads(out)["report"]
    # DuckDB's expansion order of CUBE (g1, g2).
    assert [s["grouping_set"] for s in report["utility"]["grouping_sets"]] == [
        "()",
        "(g1)",
        "(g1, g2)",
        "(g2)",
    ]


def test_kmeans_json(cli):
    status, out, err = cli(
        "run", "kmeans", "--dataset", "mnist5k", "--k", "4", "--iterations", "2", "--json"
    )
    assert status == 0, err
    document = json.loads(out)
    utility = document["report"]["utility"]
    assert 0.0 <= utility["rand_index"] <= 1.0
    assert 0.0 <= utility["rand_index_nonprivate"] <= 1.0
    assert document["report"]["efficiency"]["num_scramblers"] == 2 * 40
    centroids = document["result"]["centroids"]
    assert len(centroids) == 4 and all(len(c) == 784 for c in centroids)
    assert document["report"]["seed"] is None  # fresh entropy unless a seed is given


def test_same_seed_same_run_and_json_shape(cli):
    argv = ["run", "aggregate", "--sql", RUNNING_EXAMPLE, "--json", "--seed", "5"]
    first = json.loads(cli(*argv)[1])
    second = json.loads(cli(*argv)[1])
    assert set(first) == {"result", "report"}
    assert first["result"] == second["result"]
    traffic = first["report"]["efficiency"]["traffic"]
    assert traffic == second["report"]["efficiency"]["traffic"]
    assert {t["flow"] for t in traffic} >= {"(A) (to scramblers)", "(A) (scrambled)"}
    assert "seed" in first["report"]["randomness"]


def test_run_refuses_a_table_that_breaks_the_asked_guarantee(cli):
    status, out, err = cli(
        "run",
        "aggregate",
        "--sql",
        RUNNING_EXAMPLE,
        "--batch",
        "156",
        "--target-epsilon",
        "1",
        "--json",
    )
    # 10,000 sources in 65 balanced batches of 153 or 154 (not 156), and ε above 1: refused
    # before running, in one line naming the flag.
    assert status == 2 and out == "" and err.count("\n") == 1
    error = err.splitlines()[-1]
    assert error.startswith("dpcomm: error: invalid --target-epsilon") and "nothing ran" in error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--data", "/nonexistent.csv"], "invalid --data"),
        (["--sql", "SELECT A, AVG(Z) FROM d GROUP BY A"], "column"),
        (["--sql", "SELECT A, AVG(I) FROM d JOIN e ON d.A = e.A GROUP BY A"], "join"),
        (["--sql", "SELECT A, MEDIAN(I) FROM d GROUP BY A"], "MEDIAN"),
        (["--sql", "SELECT A, AVG(I) FROM"], "syntax"),
        (["--sampling", "1.5"], "--sampling"),
        (["--batch", "0"], "--batch"),
        (["--mechanism", "none", "--sampling", "0.3"], "mechanism"),
        (["--mechanism", "local", "--dummies", "25"], "--dummies"),
        (["--targets", "0"], "--targets"),
        (["--delta", "2"], "delta"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, argv, message):
    args = ["run", "aggregate"]
    if "--sql" not in argv:
        args += ["--sql", RUNNING_EXAMPLE]
    status, _, err = cli(*args, *argv)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("dpcomm: error:")
    assert message.lower() in err.lower()


def test_non_numeric_aggregate_and_empty_table(cli, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("k,name\n1,a\n2,b\n")
    status, _, err = cli(
        "run",
        "aggregate",
        "--data",
        str(path),
        "--sql",
        "SELECT k, AVG(name) FROM t GROUP BY k",
    )
    assert status == 2 and "numeric" in err
    # A file without rows is a table without rows (DuckDB reads a header alone as VARCHAR):
    # DuckDB's answer, one row of the empty grouping set and none of a grouping set with keys.
    empty = tmp_path / "empty.csv"
    empty.write_text("k,v\n")
    sql = "SELECT k, COUNT(*), COUNT(v) FROM t GROUP BY ROLLUP (k)"
    status, out, err = cli("run", "aggregate", "--data", str(empty), "--sql", sql, "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["result"] == [
        {"k": None, "count_star()": 0, "count(v)": 0, "grouping_set": "()"}
    ]
    assert document["report"]["privacy"]["method"] == "no-data"


def test_warnings_are_printed_not_raised(cli):
    status, _, err = cli("run", "aggregate", "--sql", RUNNING_EXAMPLE, "--sampling", "1", "--json")
    assert status == 0
    assert "dpcomm: warning: sampling_rate σ = 1" in err


def test_kmeans_bad_input(cli):
    status, _, err = cli("run", "kmeans", "--dataset", "nope")
    assert status == 2 and "dataset" in err
    status, _, err = cli("run", "kmeans", "--k", "100000")
    assert status == 2 and "invalid --k" in err
    # More sources than the dataset has is refused, not silently cut to the dataset's size.
    status, _, err = cli("run", "kmeans", "--dataset", "mnist5k", "--sources", "9999")
    assert status == 2 and "--sources" in err and "[1, " in err and "9999" in err


@pytest.mark.slow
def test_kmeans_on_fashion_mnist(cli):
    from pathlib import Path

    from dpcomm.data.images import FASHION_MNIST_DIRECTORY

    if not Path(FASHION_MNIST_DIRECTORY).is_dir():
        pytest.skip("dataset-fashion-mnist not installed (make data)")
    status, out, err = cli(
        "run", "kmeans", "--dataset", "fashion-mnist", "--iterations", "3", "--json"
    )
    assert status == 0, err
    document = json.loads(out)
    assert document["report"]["utility"]["sources"] == 60_000
    assert document["report"]["utility"]["test_points"] == 10_000
    assert document["report"]["utility"]["rand_index_nonprivate"] > 0.8


def test_integer_keys_print_as_duckdb_prints_them(cli, tmp_path, package_file):
    # mlxtend's Auto MPG: the model year as a four-digit year (70 -> 1970), a BIGINT key.
    source = package_file("mlxtend", "data", "data", "autompg.csv.gz")
    path = tmp_path / "cars.csv"
    duckdb.sql(
        f"COPY (SELECT 1900 + column5 AS year, column3 AS weight FROM read_csv('{source}', "
        f"header = false)) TO '{path}' (HEADER)"
    )
    sql = "SELECT year, COUNT(*) AS n, SUM(weight) AS weight FROM cars GROUP BY year"
    status, out, err = cli(
        "run", "aggregate", "--data", path, "--sql", sql, "--mechanism", "none", "--seed", "1"
    )
    assert status == 0, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == ["year", "n", "weight"])
    printed = [line.split() for line in lines[header + 1 : header + 14]]
    # With no countermeasure every tuple is used: DuckDB's own result, keys as DuckDB prints them.
    expected = duckdb.sql(sql.replace("cars", f"'{path}'") + " ORDER BY year").fetchall()
    shown = str(duckdb.sql(sql.replace("cars", f"'{path}'") + " ORDER BY year")).splitlines()
    assert [row[0] for row in sorted(printed)] == [line.split()[1] for line in shown[4:17]]
    assert [row[0] for row in sorted(printed)] == [str(year) for year, _, _ in expected]
    assert "1970" in out and "1,970" not in out


def test_a_real_table_gets_one_note_about_its_batches(cli, tmp_path, package_file):
    # Auto MPG: 392 cars (rows without horsepower dropped), two grouping sets; n = 100 cuts
    # each set's 392 senders into 4 batches of 98.
    source = package_file("mlxtend", "data", "data", "autompg.csv.gz")
    path = tmp_path / "cars.csv"
    duckdb.sql(
        f"COPY (SELECT 1900 + column5 AS year, column6 AS origin, column8 AS mpg "
        f"FROM read_csv('{source}', header = false)) TO '{path}' (HEADER)"
    )
    sql = "SELECT year, origin, AVG(mpg) FROM cars GROUP BY GROUPING SETS ((year), (origin))"
    argv = ["run", "aggregate", "--data", path, "--sql", sql, "--batch", "100", "--seed", "1"]
    status, out, err = cli(*argv)
    assert status == 0, err
    assert "Privacy" in out and "1970" in out and "1,970" not in out
    assert err.splitlines() == [err.strip()]  # one line, and no Python warning lines
    assert err.startswith("dpcomm: note: the plan's ε = ")
    assert (
        "(clusters (year), (origin): n = 100, 392 senders: 4 balanced batches of 98 sources)" in err
    )
    assert "Warning" not in err and "warn(" not in err
    # A size that n divides: nothing to say.
    status, _, err = cli(*argv[:-4], "--batch", "98", "--seed", "1")
    assert status == 0 and err == ""
