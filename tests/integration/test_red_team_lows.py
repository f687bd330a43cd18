"""Low findings of an adversarial pass, each a one-line error or fixed: private node configs,
fractions and δ that are numbers, mixed object columns, release values refused before the run."""

import stat

import numpy as np
import pandas as pd
import pytest

import dpcomm
from dpcomm.errors import InvalidParameterError

SQL = "SELECT g1, COUNT(*) FROM t GROUP BY g1"


def test_deploy_configs_writes_each_config_for_its_owner_only(cli, tmp_path):
    out = tmp_path / "d"
    status, _, err = cli(
        "deploy", "configs", "--sql", SQL, "--synthetic", "6", "--targets", "2",
        "--mechanism", "local", "--out", str(out),
    )  # fmt: skip
    assert status == 0, err
    configs = sorted((out / "configs").glob("*.json"))
    assert any(path.name.startswith("source") for path in configs)
    for path in configs:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


@pytest.mark.parametrize("value", ["nan", "1e400", "-0.5", "1.5", "inf"])
def test_max_left_out_is_a_fraction(cli, tmp_path, value):
    status, _, err = cli(
        "deploy", "configs", "--sql", SQL, "--synthetic", "6", "--targets", "2",
        "--max-left-out", value, "--out", str(tmp_path / "d"),
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1 and "--max-left-out" in err, err
    assert not (tmp_path / "d").exists()


def test_an_empty_delta_is_refused(cli):
    status, _, err = cli(
        "account", "local", "--targets", "5", "--sampling", "0.5", "--dummies", "1",
        "--delta", "",
    )  # fmt: skip
    assert status != 0 and err.count("\n") == 1 and "delta" in err, err


def test_a_mixed_object_column_is_one_line():
    frame = pd.DataFrame({"g": [1, "a", b"x", 2] * 5, "v": np.arange(20.0)})
    with pytest.raises(InvalidParameterError, match="one type") as raised:
        dpcomm.run_sql(
            "SELECT g, COUNT(*) FROM t GROUP BY g", frame, countermeasure=dpcomm.NoCountermeasure()
        )
    assert "\n" not in str(raised.value)


def test_a_tiny_release_epsilon_is_refused_before_the_run(cli):
    status, out, err = cli(
        "run", "aggregate", "--synthetic", "30", "--sql", SQL, "--targets", "2",
        "--mechanism", "local", "--release", "laplace", "--release-epsilon", "1e-320",
        "--keys", "g1=0,1,2,3",
    )  # fmt: skip
    assert status != 0 and err.count("\n") == 1 and "release" in err, err
    assert "Traceback" not in err and out == ""
