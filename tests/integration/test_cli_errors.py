"""Every CLI error of issue 11 is one line on standard error with a non-zero exit status.

Each finding of the tracker has a test: the command as reported, its exit status, one line on
standard error naming the parameter, and no traceback. The keys findings (no overwrite without
--force, no symbolic link followed, loopback by default) are here too.
"""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import IRIS_COLUMNS, write_idx

from dpcomm.cli.main import build_parser

QUERY = "SELECT A, COUNT(*) AS n FROM t GROUP BY A"
SYNTHETIC_QUERY = "SELECT g1, COUNT(*) AS n FROM t GROUP BY g1"
PLAN = ["plan", "--sources", "100", "--targets", "5", "--grouping-sets", "1"]
PLAN += ["--epsilon", "1", "--delta", "1e-4"]


def assert_one_line_error(status, err, *names):
    assert status not in (0, None), err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "error" in err
    for name in names:
        assert name in err, err


def missing_folder(tmp_path: Path) -> Path:
    """A folder that cannot exist: its parent is a regular file (even root cannot create it)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker / "folder"


# ------------------------------------------------------------- tracebacks of the tracker


def test_rows_zero_prints_no_rows_and_negative_rows_is_refused(cli):
    status, out, err = cli("run", "aggregate", "--sql", QUERY, "--rows", "0")
    assert status == 0, err
    assert "more rows (--rows N" in out and "Traceback" not in err
    status, _, err = cli("run", "aggregate", "--sql", QUERY, "--rows", "-1")
    assert_one_line_error(status, err, "--rows", ">= 0")


def test_plan_pareto_rows_zero_and_negative(cli):
    status, out, err = cli(*PLAN, "--pareto-rows", "0")
    assert status == 0, err
    assert "Pareto front" in out
    status, _, err = cli(*PLAN, "--pareto-rows", "-1")
    assert_one_line_error(status, err, "--pareto-rows")


def test_plan_plot_to_a_bad_path_or_format_is_refused_before_planning(cli, tmp_path):
    bad = missing_folder(tmp_path) / "front.png"
    status, _, err = cli(*PLAN, "--plot", bad)
    assert_one_line_error(status, err, "--plot", "existing folder")
    status, _, err = cli(*PLAN, "--plot", tmp_path / "front.xyz")
    assert_one_line_error(status, err, "--plot", ".png")


def test_data_synthetic_to_a_missing_folder(cli, tmp_path):
    out = missing_folder(tmp_path) / "t.csv"
    status, _, err = cli("data", "synthetic", "--rows", "10", "--out", out)
    assert_one_line_error(status, err, "--out")
    status, _, err = cli("data", "synthetic", "--rows", "10", "--out", tmp_path / "t.txt")
    assert_one_line_error(status, err, "--out", ".csv")


def test_data_synthetic_with_ten_billion_rows(cli, tmp_path):
    argv = ["data", "synthetic", "--rows", str(10**10), "--out", tmp_path / "t.csv"]
    status, _, err = cli(*argv)
    assert_one_line_error(status, err, "rows", "50000000")
    assert not (tmp_path / "t.csv").exists()


def test_account_batch_of_a_billion(cli):
    status, _, err = cli(
        "account", "scrambler", "--targets", "10", "--sampling", "0.5", "--batch", "1e9",
        "--delta", "1e-4", "--mc-samples", "0",
    )  # fmt: skip
    assert_one_line_error(status, err, "--batch", "at most")


@pytest.mark.parametrize(("kind", "dummies"), [("local", "1e6"), ("scrambler", "1e12")])
def test_account_too_many_dummies(cli, kind, dummies):
    """A local source floods at most T − 1 targets; a scrambler's tables must fit in memory
    (since issue 12 the exact accountant takes a million dummies, and 10^9)."""
    argv = ["account", kind, "--targets", "10", "--sampling", "0.5", "--dummies", dummies]
    argv += ["--batch", "100", "--delta", "1e-4"] if kind == "scrambler" else []
    status, _, err = cli(*argv, "--mc-samples", "0")
    assert_one_line_error(status, err, "--dummies")
    assert ("at most" if kind == "scrambler" else "[0, 9]") in err


def test_account_enormous_targets_do_not_overflow(cli):
    argv = ["account", "scrambler", "--targets", "1e300", "--sampling", "0.5", "--batch", "10"]
    status, _, err = cli(*argv, "--mc-samples", "0")
    assert_one_line_error(status, err, "--targets", "1000000000")


@pytest.mark.parametrize("value", ["-1", "0"])
def test_headline_mc_samples(cli, value):
    status, _, err = cli("headline", "--mc-samples", value)
    assert_one_line_error(status, err, "--mc-samples")


def test_pki_days_beyond_the_year_9999(cli, tmp_path):
    status, _, err = cli("pki", "init", "--dir", tmp_path / "ca", "--days", "100000000")
    assert_one_line_error(status, err, "--days", "36500")
    assert cli("pki", "init", "--dir", tmp_path / "ca")[0] == 0
    argv = ["pki", "issue", "--dir", tmp_path / "ca", "--name", "a", "--days"]
    status, _, err = cli(*argv, "100000000")
    assert_one_line_error(status, err, "--days")
    status, _, err = cli(*argv, "1e8")
    assert_one_line_error(status, err, "--days")


def test_unwritable_out_of_figures_and_deploy_configs(cli, tmp_path):
    bad = missing_folder(tmp_path)
    status, _, err = cli("figures", "--only", "3a", "--quick", "--out", bad)
    assert_one_line_error(status, err, "--out")
    argv = ["deploy", "configs", "--sql", SYNTHETIC_QUERY, "--synthetic", "20", "--out", bad]
    status, _, err = cli(*argv)
    assert_one_line_error(status, err, "--out")


def test_unwritable_workdir_of_a_network_run(cli, tmp_path):
    argv = [
        "run",
        "aggregate",
        "--engine",
        "network",
        "--sql",
        SYNTHETIC_QUERY,
        "--synthetic",
        "20",
    ]
    status, _, err = cli(*argv, "--workdir", missing_folder(tmp_path))
    assert_one_line_error(status, err, "--workdir")


def test_node_run_output_is_checked_before_the_round(cli, tmp_path):
    # The config does not exist either: the --output check comes first, before any round.
    status, _, err = cli("node", "run", "--role", "source", "--config", tmp_path / "missing.json",
        "--ssl-certfile", "a.pem", "--ssl-keyfile", "a.key", "--ssl-ca-certfile", "ca.pem",
        "--output", missing_folder(tmp_path) / "outcome.json",
    )  # fmt: skip
    assert_one_line_error(status, err, "--output")


def test_idx_files_with_zero_images(cli, tmp_path):
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((0, 28, 28)))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(0))
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((2, 28, 28)))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(2))
    status, _, err = cli("run", "kmeans", "--dataset", tmp_path)
    assert_one_line_error(status, err, "no images")


def test_sql_with_500_nested_parentheses(cli):
    nested = "(" * 500 + "1 = 1" + ")" * 500
    sql = f"SELECT A, COUNT(*) FROM t WHERE {nested} GROUP BY A"
    status, _, err = cli("run", "aggregate", "--sql", sql)
    assert_one_line_error(status, err, "SQL syntax error", "nested")


def test_closed_pipe_exits_quietly():
    argv = ["account", "local", "--targets", ",".join(str(t) for t in range(2, 200))]
    argv += ["--sampling", "0.1,0.2,0.3,0.4,0.5", "--dummies", "0,1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "dpcomm.cli.main", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()  # `| head -1`
    process.stdout.close()
    with process.stderr:
        err = process.stderr.read().decode()
    status = process.wait(timeout=120)
    assert status in (0, 141), err
    assert err == ""


# --------------------------------------------------------- silently reinterpreted values


@pytest.mark.parametrize("engine", ["memory", "network"])
def test_synthetic_zero_rows_is_refused(cli, engine):
    argv = ["run", "aggregate", "--engine", engine, "--sql", SYNTHETIC_QUERY]
    status, _, err = cli(*argv, "--synthetic", "0")
    assert_one_line_error(status, err, "--synthetic")


def test_figures_only_empty_is_refused(cli, tmp_path):
    status, _, err = cli("figures", "--only", "", "--out", tmp_path / "figures")
    assert_one_line_error(status, err, "only")
    assert not (tmp_path / "figures").exists()


def test_account_negative_mc_samples_is_refused(cli):
    status, _, err = cli(
        "account", "scrambler", "--targets", "10", "--sampling", "0.5", "--batch", "10",
        "--delta", "1e-4", "--mc-samples", "-5",
    )  # fmt: skip
    assert_one_line_error(status, err, "--mc-samples")


def test_a_network_kmeans_run_honours_kill_scrambler(cli):
    argv = ["run", "kmeans", "--engine", "network", "--sources", "50", "--k", "2"]
    argv += ["--iterations", "1"]
    status, _, err = cli(*argv, "--seed", "1", "--kill-scrambler", "9")
    assert_one_line_error(status, err, "--kill-scrambler", "[0, 0]")
    status, out, err = cli(*argv, "--seed", "1", "--kill-scrambler", "0", "--json")
    assert "Traceback" not in err
    assert json.loads(out)["report"]["lost_scramblers"] == ["scrambler-0-0"]


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["run", "kmeans", "--data-seed", "-1"], "--data-seed"),
        (["audit", "local", "--targets", "5", "--sampling", "0.5", "--seed", "-1"], "--seed"),
        (["headline", "--seed", "-1"], "--seed"),
        (["run", "aggregate", "--sql", QUERY, "--target-epsilon", "nan"], "--target-epsilon"),
        (["plan", "--sources", "100", "--targets", str(10**20)], "--targets"),
        (["run", "kmeans", "--iterations", str(10**20)], "--iterations"),
        (["audit", "local", "--targets", "5", "--sampling", "0.5", "--runs", "1e20"], "--runs"),
        (["deploy", "configs", "--sql", QUERY, "--out", "x", "--timeout", "-1"], "--timeout"),
        (["deploy", "configs", "--sql", QUERY, "--out", "x", "--coordinator-port", "0"], "port"),
    ],
)
def test_out_of_range_options_found_by_the_fuzzer(cli, argv, name):
    status, _, err = cli(*argv)
    assert_one_line_error(status, err, name)


# ----------------------------------------------------------------------------------- keys


def test_a_network_run_refuses_a_workdir_with_keys_unless_force(cli, tmp_path):
    assert cli("pki", "init", "--dir", tmp_path / "pki")[0] == 0
    before = (tmp_path / "pki" / "ca.key").read_bytes()
    argv = ["run", "aggregate", "--engine", "network", "--sql", SYNTHETIC_QUERY]
    argv += ["--synthetic", "30", "--seed", "1"]
    argv += ["--idle-seconds", "5", "--workdir", tmp_path]
    status, _, err = cli(*argv)
    assert_one_line_error(status, err, "--workdir", "--force")
    assert (tmp_path / "pki" / "ca.key").read_bytes() == before
    status, _, err = cli(*argv, "--force")
    assert status == 0, err
    assert (tmp_path / "pki" / "ca.key").read_bytes() != before


def test_pki_never_overwrites_without_force(cli, tmp_path):
    ca = tmp_path / "ca"
    assert cli("pki", "init", "--dir", ca)[0] == 0
    status, _, err = cli("pki", "init", "--dir", ca)
    assert_one_line_error(status, err, "already exists")
    assert cli("pki", "issue", "--dir", ca, "--name", "a")[0] == 0
    key = (ca / "a.key").read_bytes()
    status, _, err = cli("pki", "issue", "--dir", ca, "--name", "b,a")
    assert_one_line_error(status, err, "a.key", "--force")
    assert (ca / "a.key").read_bytes() == key and not (ca / "b.key").exists()
    assert cli("pki", "issue", "--dir", ca, "--name", "a", "--force")[0] == 0
    assert (ca / "a.key").read_bytes() != key
    assert stat.S_IMODE((ca / "a.key").stat().st_mode) == 0o600


def test_pki_never_writes_through_a_symbolic_link(cli, tmp_path):
    ca = tmp_path / "ca"
    assert cli("pki", "init", "--dir", ca)[0] == 0
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (ca / "n.key").symlink_to(victim)
    (ca / "m.key").symlink_to(tmp_path / "dangling")
    for name in ("n", "m"):
        status, _, err = cli("pki", "issue", "--dir", ca, "--name", name)
        assert_one_line_error(status, err, f"{name}.key")
    assert not (tmp_path / "dangling").exists()
    status, _, err = cli("pki", "issue", "--dir", ca, "--name", "n", "--force")
    assert status == 0, err
    assert victim.read_text() == "precious"
    assert not (ca / "n.key").is_symlink()
    assert b"PRIVATE KEY" in (ca / "n.key").read_bytes()


def test_every_bind_default_is_loopback():
    parser = build_parser()
    args = parser.parse_args(["deploy", "configs", "--sql", QUERY, "--out", "x"])
    assert args.coordinator_host == "127.0.0.1"


@pytest.mark.parametrize(
    ("argv", "name", "words"),
    [
        (["--workdir", "w"], "--workdir", "only with --engine network"),
        (["--timeout", "5"], "--timeout", "only with --engine network"),
        (["--idle-seconds", "5"], "--idle-seconds", "only with --engine network"),
        (["--max-left-out", "0.1"], "--max-left-out", "only with --engine network"),
        (["--kill-scrambler", "0"], "--kill-scrambler", "only with --engine network"),
        (["--force"], "--force", "only with --engine network"),
        (["--workers", "2", "--engine", "network"], "--workers", "only with --engine dask"),
    ],
)
def test_a_run_refuses_another_engines_options(cli, argv, name, words):
    status, _, err = cli("run", "aggregate", "--sql", SYNTHETIC_QUERY, "--synthetic", "10", *argv)
    assert_one_line_error(status, err, f"invalid {name}", words)


def test_deploy_configs_refuses_a_bad_delta_before_writing_keys(cli, tmp_path):
    out = tmp_path / "deployment"
    argv = ["deploy", "configs", "--sql", SYNTHETIC_QUERY, "--synthetic", "50", "--out", out]
    status, _, err = cli(*argv, "--delta", "inf")
    assert_one_line_error(status, err, "delta")
    assert not (out / "pki").exists()


def test_public_bounds_are_validated(cli):
    argv = ["run", "aggregate", "--sql", QUERY]
    status, _, err = cli(*argv, "--max-text-bytes", "0")
    assert_one_line_error(status, err, "--max-text-bytes")
    status, _, err = cli(*argv, "--max-groups", "-3")
    assert_one_line_error(status, err, "--max-groups")
    argv = ["run", "aggregate", "--engine", "network", "--sql", SYNTHETIC_QUERY]
    status, _, err = cli(*argv, "--max-left-out", "2")
    assert_one_line_error(status, err, "--max-left-out")


def test_library_errors_name_the_python_parameter_and_the_cli_its_flag(cli, tmp_path):
    """One error, two spellings: Python users read the parameter, CLI users the flag."""
    import dpcomm
    from dpcomm.errors import InvalidParameterError

    path = tmp_path / "long.csv"
    path.write_text("city,n\n" + "x" * 40 + ",1\n")
    sql = "SELECT city, COUNT(*) FROM t GROUP BY city"
    chosen = dpcomm.Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=2)
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.run_sql(sql, path, countermeasure=chosen, max_text_bytes=8)
    assert "raise max_text_bytes" in str(caught.value) and "--" not in str(caught.value)
    status, _, err = cli("run", "aggregate", "--sql", sql, "--data", path, "--max-text-bytes", 8)
    assert_one_line_error(status, err, "raise --max-text-bytes")
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.run_sql(sql, path, countermeasure=chosen, num_targets=0)
    assert caught.value.name == "num_targets"
    status, _, err = cli("run", "aggregate", "--sql", sql, "--data", path, "--targets", 0)
    assert_one_line_error(status, err, "invalid --targets")


# ------------------------------------------------------------- bad input (issue 22)


def float_images(directory: Path, train: np.ndarray, test: np.ndarray) -> Path:
    """A dataset of float64 IDX images (MNIST's format allows them), labels 0 and 1."""
    for stem, images in (("train", train), ("t10k", test)):
        write_idx(directory / f"{stem}-images-idx3-ubyte", images, type_code=0x0E, dtype=">f8")
        labels = np.arange(len(images)) % 2
        write_idx(directory / f"{stem}-labels-idx1-ubyte", labels)
    return directory


def test_kmeans_on_images_with_nan_is_refused_unless_asked_to_drop_them(cli, tmp_path):
    train = np.random.default_rng(1).random((30, 2, 2))
    train[[3, 7]] = np.nan
    dataset = float_images(tmp_path, train, np.zeros((4, 2, 2)))
    argv = ["run", "kmeans", "--dataset", dataset, "--k", "2", "--iterations", "1", "--seed", "1",
            "--mechanism", "none"]  # fmt: skip
    status, _, err = cli(*argv)
    assert_one_line_error(status, err, "invalid --dataset", "2 rows with NaN or inf (of 30)",
                          "--drop-non-finite")  # fmt: skip
    status, out, err = cli(*argv, "--drop-non-finite")
    assert status == 0, err
    assert err == (
        "dpcomm: warning: dropped 2 of 30 points (2 rows with NaN or inf): K-means runs on "
        "the other 28\n"
    )
    assert "28 sources" in out
    status, _, err = cli(*argv, "--k", "29", "--drop-non-finite")
    assert_one_line_error(status, err, "invalid --k", "[1, 28]")


IRIS = ",".join(IRIS_COLUMNS)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ([], ("invalid --columns", "e.g. x,y")),
        (["--columns", "sepal_length,petals"], ("invalid --columns", "'petals'", "species")),
        (["--columns", "sepal_length,species"], ("invalid --columns", "species (VARCHAR)")),
        (["--columns", IRIS, "--label-column", "colour"], ("invalid --label-column", "colour")),
        (["--columns", IRIS, "--dataset", "mnist5k"], ("invalid --dataset", "unset with --data")),
        (["--columns", IRIS, "--init-data", "absent.csv"], ("invalid --init-data", "existing")),
        (["--columns", IRIS, "--k", "151"], ("invalid --k", "[1, 150]")),
        (["--columns", IRIS, "--sources", "151"], ("invalid --sources", "[1, 150]", "rows")),
        (["--columns", IRIS, "--init", "kmeans++"], ("--init", "k-means++")),
    ],
)
def test_kmeans_on_a_table_errors_name_the_flag(cli, iris_csv, options, words):
    status, _, err = cli("run", "kmeans", "--data", iris_csv, "--iterations", "1", *options)
    assert_one_line_error(status, err, *words)


def test_kmeans_table_flags_need_a_table(cli, tmp_path):
    status, _, err = cli("run", "kmeans", "--columns", "x", "--k", "2")
    assert_one_line_error(status, err, "invalid --columns", "only with --data")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 but not really")
    status, _, err = cli("run", "kmeans", "--data", broken, "--columns", "x")
    assert_one_line_error(status, err, "cannot read", "broken.parquet")
    status, _, err = cli("run", "aggregate", "--engine", "network", "--synthetic", "10",
                         "--sql", SYNTHETIC_QUERY, "--columns", "g1")  # fmt: skip
    assert_one_line_error(status, err, "unrecognized arguments: --columns g1")


def test_out_is_never_the_input(cli, tmp_path, csv_rows):
    """--out equal to --data (by another spelling, a symbolic link or a hard link) is refused,
    and so is a file inside a --data folder of Parquet files: the input is left as it was."""
    data = tmp_path / "people.csv"
    status, _, err = cli("data", "synthetic", "--rows", "50", "--out", data)
    assert status == 0, err
    before = data.read_bytes()
    (tmp_path / "alias.csv").symlink_to(data)
    os.link(data, tmp_path / "hard.csv")
    run = ["run", "aggregate", "--sql", SYNTHETIC_QUERY, "--data", data, "--seed", "1"]
    for out in (data, tmp_path / "." / "people.csv", tmp_path / "alias.csv", tmp_path / "hard.csv"):
        status, _, err = cli(*run, "--out", out)
        assert_one_line_error(status, err, "--out", "other than the input --data")
    assert data.read_bytes() == before
    folder = tmp_path / "parts"
    folder.mkdir()
    status, _, err = cli("data", "synthetic", "--rows", "50", "--out", folder / "a.parquet")
    run = ["run", "aggregate", "--sql", SYNTHETIC_QUERY, "--data", folder, "--seed", "1"]
    status, _, err = cli(*run, "--out", folder / "result.parquet")
    assert_one_line_error(status, err, "--out", "other than the input --data")
    assert sorted(p.name for p in folder.iterdir()) == ["a.parquet"]
    status, _, err = cli(*run, "--out", tmp_path / "result.csv")
    assert status == 0, err
    rows = csv_rows(tmp_path / "result.csv")
    assert rows and list(rows[0]) == ["g1", "n"]


def test_outputs_that_cannot_be_written_are_refused_before_the_run(cli, tmp_path):
    """A symbolic link to nowhere, a K-means assignments file that is a folder, a file in a
    folder where nothing can be created (/proc, even as root)."""
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "nowhere" / "x.csv")
    status, _, err = cli("run", "aggregate", "--sql", QUERY, "--out", dangling)
    assert_one_line_error(status, err, "--out", "symbolic link to nowhere")
    status, _, err = cli("run", "aggregate", "--sql", QUERY, "--report", tmp_path / "r.json",
                         "--out", tmp_path / "r.json")  # fmt: skip
    assert_one_line_error(status, err, "--out", ".csv or .parquet")
    (tmp_path / "k-assignments.csv").mkdir()
    kmeans = ["run", "kmeans", "--sources", "50", "--k", "2", "--iterations", "1", "--seed", "1"]
    status, _, err = cli(*kmeans, "--out", tmp_path / "k.csv")
    assert_one_line_error(status, err, "--out", "k-assignments.csv", "not a folder")
    assert not (tmp_path / "k.csv").exists()
    if Path("/proc/self").is_dir():
        status, _, err = cli("data", "synthetic", "--rows", "10", "--out", "/proc/s.csv")
        assert_one_line_error(status, err, "--out", "can be written")


def test_a_file_duckdb_cannot_write_is_one_line(tmp_path):
    """What the up-front check cannot foresee (the folder gone meanwhile) is one line too."""
    from dpcomm.data import synthetic_table, write_table
    from dpcomm.errors import DpcommError

    with pytest.raises(DpcommError, match=r"^cannot write .*gone.*: IO Error") as caught:
        write_table(synthetic_table(num_rows=3, seed=1), tmp_path / "gone" / "t.csv")
    assert "\n" not in str(caught.value)


def test_a_decimal_sum_beyond_38_digits_is_one_line(cli, tmp_path):
    """DuckDB refuses the query (Overflow in HUGEINT addition); so does dpcomm, on one line."""
    import duckdb

    data = tmp_path / "big.parquet"
    nines = "9" * 37
    duckdb.sql(f"COPY (SELECT (i % 2) AS g, CAST('{nines}' AS DECIMAL(38,0)) AS v "
               f"FROM range(40) t(i)) TO '{data}'")  # fmt: skip
    status, _, err = cli("run", "aggregate", "--sql", "SELECT g, SUM(v) FROM t GROUP BY g",
                         "--data", data, "--out", tmp_path / "r.csv")  # fmt: skip
    assert_one_line_error(status, err, "invalid --sql", "DECIMAL(38,0)", "as DOUBLE")
    assert not (tmp_path / "r.csv").exists()


def test_pki_issue_refuses_an_empty_name(cli, tmp_path):
    ca = tmp_path / "ca"
    assert cli("pki", "init", "--dir", ca).status == 0
    for names in ([""], ["a,,b"], ["a", " "]):
        argv = [arg for name in names for arg in ("--name", name)]
        status, _, err = cli("pki", "issue", "--dir", ca, *argv, "--out", tmp_path / "out")
        assert_one_line_error(status, err, "--name", "none empty")
    assert not (tmp_path / "out").exists()


def test_deploy_configs_bounds_its_deadlines_to_a_day(cli, tmp_path):
    argv = ["deploy", "configs", "--sql", SYNTHETIC_QUERY, "--synthetic", "20"]
    for option in ("--timeout", "--idle-seconds"):
        status, _, err = cli(*argv, "--out", tmp_path / "d", option, "1e23")
        assert_one_line_error(status, err, option, "(0, 86,400]")
    assert not (tmp_path / "d").exists()


def test_node_run_warns_when_its_config_holds_a_seed(cli, tmp_path):
    """A seed in a node's config (a test round's) makes its draws predictable: said up front."""
    argv = ["deploy", "configs", "--sql", SYNTHETIC_QUERY, "--synthetic", "4", "--out",
            tmp_path / "d", "--timeout", "3", "--idle-seconds", "1",
            "--coordinator-port", "1"]  # fmt: skip
    status, _, err = cli(*argv)
    assert status == 0, err
    config = json.loads((tmp_path / "d" / "configs" / "source-0.json").read_text())
    assert config["round"]["seed"] is None  # deploy configs writes none
    config["round"]["seed"] = 7
    seeded = tmp_path / "seeded.json"
    seeded.write_text(json.dumps(config))
    pki = tmp_path / "d" / "pki"
    status, _, err = cli("node", "run", "--role", "source", "--config", seeded,
                         "--ssl-certfile", pki / "source-0.pem", "--ssl-keyfile",
                         pki / "source-0.key", "--ssl-ca-certfile", pki / "ca.pem")  # fmt: skip
    assert status == 1  # no coordinator: the round fails at its deadline
    first = err.splitlines()[0]
    assert first.startswith(f"dpcomm: warning: config {seeded} holds a seed: "), err
    assert "predict this node's draws" in first and "Traceback" not in err
