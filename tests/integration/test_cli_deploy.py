"""`dpcomm run --engine network`: the memory run's JSON shape and, with the same seed, its run."""

import json

import pytest
from tests.conftest import IRIS_COLUMNS, without_grouping_set

pytestmark = pytest.mark.slow

SQL = "SELECT g1, g2, COUNT(*), AVG(m1) FROM t GROUP BY GROUPING SETS ((g1), (g2))"


def same_document(simulated, deployed):
    assert set(simulated) == set(deployed) == {"result", "report"}
    assert deployed["result"] == simulated["result"]
    for key in ("privacy", "utility"):
        assert deployed["report"][key] == simulated["report"][key], key
    assert (
        deployed["report"]["efficiency"]["traffic"] == simulated["report"]["efficiency"]["traffic"]
    )
    assert deployed["report"]["engine"] == "network" and simulated["report"]["engine"] == "memory"
    wire = deployed["report"]["wire"]
    assert wire["frame_lengths_observed"] == [wire["frame_size"]]
    assert deployed["report"]["errors"] == {}


def test_memory_and_network_give_the_same_aggregate_run(cli):
    common = [
        "--synthetic", "120", "--sql", SQL, "--targets", "4", "--batch", "40",
        "--dummies", "4", "--sampling", "0.3", "--seed", "9", "--json",
    ]  # fmt: skip
    status, out, err = cli("run", "aggregate", *common)
    assert status == 0, err
    simulated = json.loads(out)
    status, out, err = cli(
        "run", "aggregate", *common, "--engine", "network", "--idle-seconds", "10"
    )
    assert status == 0, err
    same_document(simulated, json.loads(out))


def test_memory_and_network_give_the_same_kmeans_run(cli, iris_csv):
    """K-means on a table's columns from a k-means++ start: the same run in both engines."""
    common = [
        "--data", iris_csv, "--columns", ",".join(IRIS_COLUMNS), "--label-column", "species",
        "--sources", "60", "--k", "3", "--iterations", "2", "--init", "k-means++",
        "--mechanism", "local", "--sampling", "0.5", "--dummies", "1", "--seed", "4", "--json",
    ]  # fmt: skip
    status, out, err = cli("run", "kmeans", *common)
    assert status == 0, err
    simulated = json.loads(out)
    status, out, err = cli("run", "kmeans", *common, "--engine", "network")
    assert status == 0, err
    same_document(simulated, json.loads(out))


def test_deploy_configs_refuses_a_seed(cli, tmp_path):
    status, _, err = cli("deploy", "configs", "--sql", SQL, "--synthetic", "20", "--seed", "1",
        "--out", str(tmp_path / "d"),
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1 and "--seed" in err


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_network_run_takes_what_a_memory_run_takes(cli, tmp_path, suffix):
    import duckdb

    from dpcomm.queries.groupby import compare_results

    path = tmp_path / f"visits.{suffix}"
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE v AS SELECT * FROM (VALUES "
        "('Zoë Ä', DATE '2024-01-02', 3.5, 1), ('Zoë Ä', DATE '2024-01-02', NULL, 2), "
        "('b c', NULL, 1.25, NULL), (NULL, DATE '2023-12-31', -2.0, 4), "
        "('b c', DATE '2024-01-02', 7.0, 5), ('🙂', DATE '2023-12-31', 0.5, 6)"
        ') AS t("ville d\'origine", "jour", "montant €", n)'
    )
    options = "(FORMAT CSV, HEADER)" if suffix == "csv" else "(FORMAT PARQUET)"
    connection.execute(f"COPY v TO '{path}' {options}")
    sql = (
        'SELECT "ville d\'origine", jour, COUNT(*), SUM("montant €"), MAX(n) FROM visits '
        'GROUP BY GROUPING SETS (("ville d\'origine"), (jour))'
    )
    common = ["--data", str(path), "--sql", sql, "--targets", "3", "--sampling", "0",
              "--batch", "3", "--dummies", "2", "--seed", "1", "--json"]  # fmt: skip
    status, out, err = cli("run", "aggregate", *common)
    assert status == 0, err
    simulated = json.loads(out)
    status, out, err = cli(
        "run", "aggregate", *common, "--engine", "network", "--idle-seconds", "10"
    )
    assert status == 0, err
    deployed = json.loads(out)
    same_document(simulated, deployed)
    # σ = 0: every tuple is counted, so the result is DuckDB's on the whole table.
    relation = connection.sql(sql.replace("FROM visits", f"FROM '{path}'"))
    expected = [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
    key = lambda row: [(v is None, str(v)) for v in row.values()]  # noqa: E731
    rows = sorted(without_grouping_set(deployed["result"]), key=key)
    assert len(rows) == len(expected)

    # JSON writes dates and DECIMAL values (the Parquet file's "montant €") as exact text:
    # compare through DuckDB's values as text.
    def as_text(row):
        return {k: v if v is None or isinstance(v, int | float) else str(v) for k, v in row.items()}

    expected = sorted([as_text(r) for r in expected], key=key)
    assert compare_results([as_text(r) for r in rows], expected) == []


def test_memory_and_network_share_their_defaults_on_a_real_table(cli, tmp_path, package_file):
    """The same flags and seed, nothing else: the same result and traffic per flow.

    matplotlib's Stocks.csv (real prices, with NULLs) and the month of each row as text; no
    countermeasure or size option is given, so both commands run their shared defaults.
    """
    import duckdb

    stocks = package_file("matplotlib", "mpl-data", "sample_data", "Stocks.csv")
    path = tmp_path / "cours.csv"
    duckdb.connect().execute(
        f"COPY (SELECT strftime(\"Date\", '%B') AS \"mois été\", * FROM read_csv('{stocks}') "
        'WHERE year("Date") % 6 = 0) '  # a sixth of the years: 89 rows, every month, NULLs
        f"TO '{path}' (FORMAT CSV, HEADER)"
    )
    sql = (
        'SELECT "mois été", "AMZN", COUNT(*), AVG("IBM"), MAX("GOOGL") FROM cours '
        'GROUP BY GROUPING SETS (("mois été"), ("AMZN"))'
    )
    common = ["--data", path, "--sql", sql, "--seed", "5", "--json"]
    status, out, err = cli("run", "aggregate", *common)
    assert status == 0, err
    simulated = json.loads(out)
    status, out, err = cli("run", "aggregate", *common, "--engine", "network")
    assert status == 0, err
    deployed = json.loads(out)
    same_document(simulated, deployed)
    rows = deployed["result"]
    assert any(row["mois été"] == "janvier" or row["mois été"] == "January" for row in rows)
    assert any(row["AMZN"] is None and row["mois été"] is None for row in rows)  # a NULL key
    assert any(row["max(GOOGL)"] is None for row in rows)  # groups of NULLs only
    # The shared defaults: T = 20 targets, scramblers of n = 100 with d = 50 dummies, σ = 0.2.
    clusters = deployed["report"]["privacy"]["clusters"]
    assert {c["num_targets"] for c in clusters if c["data_dependent"]} == {20}
    assert (
        deployed["report"]["countermeasure"]
        == "scramblers n=100, d=50 dummies each, sampling σ=0.2"
    )


def test_a_network_run_releases_and_is_charged_before_its_round(cli, tmp_path):
    """A release deployed is `run`'s up to its noise; the ledger is charged before the round
    (scramblers at any batch the round could run, so at least what it reports), and a round
    beyond the budget is refused before it starts, the ledger byte for byte as it was."""
    common = [
        "--synthetic", "40", "--sql", "SELECT g1, COUNT(*), AVG(m1) FROM t GROUP BY g1",
        "--targets", "3", "--batch", "20", "--dummies", "5", "--sampling", "0.2", "--seed", "3",
        "--release", "laplace", "--bounds", "m1=0:200", "--json",
        "--keys", "g1=" + ",".join(map(str, range(20))),
    ]  # fmt: skip
    status, out, err = cli("run", "aggregate", *common)
    assert status == 0, err
    simulated = json.loads(out)
    ledger = tmp_path / "population.json"
    # The charge, 3.41, fits once in ε = 5.
    budget = ["--ledger", ledger, "--budget-epsilon", "5", "--budget-delta", "1e-3"]
    status, out, err = cli(
        "run", "aggregate", *common, "--engine", "network", "--idle-seconds", "10", *budget
    )
    assert status == 0, err
    deployed = json.loads(out)
    for key in ("privacy", "release"):
        assert deployed["report"][key] == simulated["report"][key], key
    traffic = [r["report"]["efficiency"]["traffic"] for r in (deployed, simulated)]
    assert traffic[0] == traffic[1]
    assert [r["g1"] for r in deployed["result"]] == [r["g1"] for r in simulated["result"]]
    [charge] = json.loads(ledger.read_text())["charges"]
    release = deployed["report"]["release"]
    assert charge["epsilon"] > release["epsilon_total"] and charge["delta"] == 1e-4
    assert "every batch size a deployment can run" in charge["method"] and "charged ε" in err
    before = ledger.read_bytes()
    status, _, err = cli(  # another seed: a ledger refuses a seed it already charged
        "run", "aggregate", *common, "--seed", "4", "--engine", "network", "--ledger", ledger
    )
    assert status != 0 and "refused by the budget" in err and err.count("\n") == 1
    assert ledger.read_bytes() == before


def test_a_network_run_prints_the_deployments_report(cli):
    """The text report: the run's sections as the memory engine prints them, the deployment
    named in the data line, and what was measured on the wire."""
    common = [
        "--synthetic", "60", "--sql", SQL, "--targets", "3", "--batch", "20",
        "--dummies", "2", "--sampling", "0.3", "--seed", "2",
    ]  # fmt: skip
    status, memory, err = cli("run", "aggregate", *common)
    assert status == 0, err
    status, network, err = cli("run", "aggregate", *common, "--engine", "network")
    assert status == 0, err
    first = network.splitlines()[0]
    assert first.endswith("; deployed on this machine (loopback, mutual TLS 1.3); engine: network")
    assert (
        first.replace("; deployed on this machine (loopback, mutual TLS 1.3)", "").replace(
            "engine: network", "engine: memory"
        )
        == memory.splitlines()[0]
    )

    def section(text, title):
        return next(part for part in text.split("\n\n") if part.startswith(title))

    assert network.split("\n\n")[0].splitlines()[1:] == memory.split("\n\n")[0].splitlines()[1:]
    for title in ("Result (", "Privacy (", "Utility:"):
        assert section(network, title) == section(memory, title), title
    wire = section(network, "Measured on the wire")
    for line in (
        "  frames: ",
        "  messages of the plan's flows: ",
        "  lost scramblers: none",
        "  sources left out (absent, late or unreachable): none",
        "  timings: ",
    ):
        assert line in wire, line  # fmt: skip
    assert "network engine: " in section(network, "Efficiency")


def test_a_table_without_rows_over_tls_is_the_memory_run(cli, tmp_path):
    # No source: no scrambler either; the compute nodes are told at once that no batch comes
    # and the empty grouping set's node sends DuckDB's row over no rows (a round that waited
    # for sources would end at --timeout with an incomplete result).
    import duckdb

    path = tmp_path / "empty.parquet"
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t(g VARCHAR, m DOUBLE)")
    connection.execute("COPY t TO ? (FORMAT parquet)", [str(path)])
    common = [
        "--data", path, "--sql", "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY ROLLUP (g)",
        "--targets", "3", "--batch", "5", "--dummies", "2", "--sampling", "0.3", "--seed", "2",
        "--json",
    ]  # fmt: skip
    status, out, err = cli("run", "aggregate", *common)
    assert status == 0, err
    simulated = json.loads(out)
    status, out, err = cli("run", "aggregate", *common, "--engine", "network", "--timeout", "60")
    assert status == 0, err
    deployed = json.loads(out)
    same_document(simulated, deployed)
    row = {"g": None, "count_star()": 0, "sum(m)": None, "grouping_set": "()"}
    assert deployed["result"] == [row]
    assert deployed["report"]["failures"] == [] and deployed["report"]["privacy"]["epsilon"] == 0
    assert deployed["report"]["wire"]["data_frames"] == 0
