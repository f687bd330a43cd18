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
