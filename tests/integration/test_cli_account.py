import json
import math
import subprocess
import sys

import pytest


def test_json_schema_one_row_per_combination(cli):
    code, out, _ = cli("account", "scrambler", "--targets", "20", "--sampling", "0.2,0.5",
        "--dummies", "50", "--batch", "100", "--delta", "1e-4", "--json", "--mc-samples", "200",
    )  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 2
    for row in rows:
        for key in ("num_targets", "sampling_rate", "num_dummies", "batch_size", "capped"):
            assert key in row
        assert row["delta"] == 1e-4
        assert row["method"] == "exact"
        assert row["lower_bound"] <= row["epsilon"]
        assert row["methods"]["exact"] == row["epsilon"]
        assert row["methods"]["theorem-1"] is None
        assert row["methods"]["hoeffding"] is not None


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (
            ["scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100", "--dummies",
             "50", "--delta", "1e-4", "--mc-samples", "100", "--seed", "3"],
            lambda dpcomm: dpcomm.account(
                dpcomm.ScramblerMechanism(
                    num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
                ),
                delta=1e-4, monte_carlo_samples=100, seed=3,
            ),
        ),
        (
            ["local", "--targets", "20", "--sampling", "0", "--delta", "1e-4"],
            lambda dpcomm: dpcomm.account(
                dpcomm.LocalRandomizer(num_targets=20, sampling_rate=0.0), delta=1e-4
            ),
        ),
    ],
)  # fmt: skip
def test_json_is_the_libraries_to_dict(cli, argv, call):
    """`dpcomm account --json` prints `dpcomm.account(...).to_dict()`, one per combination."""
    import dpcomm

    code, out, err = cli("account", *argv, "--json")
    assert code == 0, err
    assert json.loads(out) == [call(dpcomm).to_dict()]
    assert json.loads(json.dumps(call(dpcomm).to_dict())) == call(dpcomm).to_dict()


def test_epsilon_query_reports_delta(cli):
    code, out, _ = cli(
        "account", "scrambler", "--targets", "20", "--sampling", "0.2", "--dummies", "275",
        "--batch", "100", "--epsilon", "1", "--json", "--mc-samples", "0",
    )  # fmt: skip
    row = json.loads(out)[0]
    assert code == 0 and row["epsilon"] == 1.0
    assert row["lower_bound"] <= row["delta"] <= 1e-4


def test_pure_epsilon_by_default_and_local(cli):
    code, out, _ = cli(
        "account", "local", "--targets", "20", "--sampling", "0.5", "--dummies", "0,19",
        "--json",
    )  # fmt: skip
    rows = json.loads(out)
    assert code == 0
    assert rows[0]["epsilon"] == pytest.approx(math.log(21.0), abs=1e-9)  # Theorem 1
    assert rows[1]["epsilon"] == 0.0
    assert rows[0]["batch_size"] is None


def test_method_option_and_capped(cli):
    code, out, _ = cli("account", "scrambler", "--capped", "--targets", "20", "--sampling", "0.5",
        "--dummies", "99", "--batch", "100", "--method", "theorem-exact", "--json",
    )  # fmt: skip
    row = json.loads(out)[0]
    assert code == 0 and row["method"] == "theorem-exact"
    assert row["method_status"]["theorem-exact"] == "printed"
    # the printed value is below the certified lower bound: refuted
    assert row["epsilon"] < row["lower_bound"]


def test_readable_table_for_many_rows(cli):
    code, out, _ = cli("account", "scrambler", "--targets", "20", "--sampling", "0.2",
        "--dummies", "0,50", "--batch", "100", "--delta", "1e-4", "--mc-samples", "0",
    )  # fmt: skip
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["T", "sigma", "n", "d"]
    assert len(lines) == 3


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["--sampling", "1.5"], "--sampling"),
        (["--sampling", "nan"], "--sampling"),
        (["--targets", "1"], "--targets"),
        (["--dummies", "-1"], "--dummies"),
        (["--batch", "0"], "--batch"),
        (["--delta", "1"], "delta"),
        (["--epsilon", "-1"], "epsilon"),
        (["--sampling", "abc"], "sampling"),
        (["--method", "magic"], "method"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(cli, args, name):
    base = {"--targets": "20", "--sampling": "0.2", "--dummies": "5", "--batch": "10"}
    for key, value in zip(args[::2], args[1::2], strict=True):
        base[key] = value
    argv = ["account", "scrambler", "--mc-samples", "0"]
    for key, value in base.items():
        argv += [key, value]
    argv += args if args[0] in ("--delta", "--epsilon", "--method") else []
    code, _, err = cli(*argv)
    assert code != 0
    assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_console_script_runs_as_a_process():
    result = subprocess.run(
        [sys.executable, "-m", "dpcomm.cli.main", "account", "local", "--targets", "20",
         "--sampling", "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("dpcomm: error: invalid --sampling")


PAPER = ["account", "scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100",
         "--dummies", "50", "--delta", "1e-4"]  # fmt: skip


def test_default_prints_the_best_bound_and_the_lower_bound_only(cli):
    code, out, err = cli(*PAPER)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[1] == "ε at δ = 0.0001: 2.3268   (method: exact)"
    assert lines[2] == "certified lower bound on ε: 2.3064"
    assert len(lines) == 3  # no method table, no Monte Carlo estimate


def test_all_methods_prints_every_method_but_no_monte_carlo(cli):
    code, out, _ = cli(*PAPER, "--all-methods")
    assert code == 0
    names = {line.split()[0] for line in out.splitlines()[5:] if line.strip()}
    assert {"exact", "post-processing", "hoeffding", "bennett", "bennett-printed"} <= names
    assert "monte-carlo" not in names
    assert "printed = formula as printed in the paper" in out


def test_mc_samples_adds_the_estimate_only(cli):
    code, out, _ = cli(*PAPER, "--mc-samples", "50")
    assert code == 0
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split()[0] == "method"
    assert [line.split()[0] for line in table[1:]] == ["monte-carlo", "monte-carlo-upper"]
    assert "(method: exact)" in out  # an estimate is never the answer
    code, out, _ = cli(*PAPER, "--mc-samples", "50", "--dummies", "50,60")
    assert out.splitlines()[0].split()[-2:] == ["monte-carlo", "monte-carlo-upper"]


def test_method_monte_carlo_runs_the_estimate_without_mc_samples(cli):
    code, out, _ = cli(*PAPER, "--method", "monte-carlo", "--json")
    row = json.loads(out)[0]
    assert code == 0 and row["method"] == "monte-carlo" and not row["method_is_valid_bound"]


def test_a_million_sources_by_default(cli):
    """n = 10^6 works with the defaults (the Monte Carlo estimate, limited there, is not run)."""
    code, out, err = cli("account", "scrambler", "--targets", "1000", "--sampling", "0.2",
        "--batch", "1000000", "--dummies", "50", "--delta", "1e-4", "--json")  # fmt: skip
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["method"] == "exact" and row["methods"]["monte-carlo"] is None
    assert row["lower_bound"] <= row["epsilon"] <= row["lower_bound"] + 1e-3
