"""Nothing silently exact or silently void (issue 30, item 7): a release option without
``--release`` is refused by every command that takes it, in one line naming the flag; so are
keys of another type than their column and bounds of a column no SUM or AVG reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dpcomm

pytestmark = pytest.mark.filterwarnings("ignore::dpcomm.errors.DpcommWarning")

SQL = "SELECT species, COUNT(*) AS n, AVG(body_mass_g) AS mass FROM penguins GROUP BY species"
KEYS = {"species": ["Adelie", "Chinstrap", "Gentoo"]}
BOUNDS = {"body_mass_g": (2500.0, 6500.0)}

#: Each release option, with a valid value.
OPTIONS = {
    "--release-epsilon": "1",
    "--release-delta": "1e-5",
    "--bounds": "body_mass_g=2500:6500",
    "--keys": "species=Adelie,Gentoo",
    "--key-selection-delta": "1e-6",
}


@pytest.fixture(scope="module")
def penguins(openml_table: Callable[[str], Any]) -> Any:
    return openml_table("id_42585").to_pandas()


@pytest.fixture(scope="module")
def penguins_csv(penguins: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("penguins") / "penguins.csv"
    penguins.to_csv(path, index=False)
    return path


def _refused(outcome: Any, flag: str) -> None:
    assert outcome.status == 2, outcome.out[-300:]
    assert outcome.err.count("\n") == 1 and flag in outcome.err, outcome.err
    assert "only with --release" in outcome.err


@pytest.mark.parametrize("flag", list(OPTIONS))
def test_run_refuses_a_release_option_without_release(
    cli: Callable[..., Any], penguins_csv: Path, flag: str
) -> None:
    outcome = cli("run", "aggregate", "--data", penguins_csv, "--sql", SQL, flag, OPTIONS[flag])
    _refused(outcome, flag)
    assert outcome.out == ""  # nothing exact printed


@pytest.mark.parametrize("flag", list(OPTIONS))
def test_deploy_refuses_a_release_option_without_release(
    cli: Callable[..., Any], penguins_csv: Path, flag: str, tmp_path: Path
) -> None:
    common = ("--data", penguins_csv, "--sql", SQL, flag, OPTIONS[flag])
    _refused(cli("deploy", "configs", *common, "--out", tmp_path / "configs"), flag)
    assert not (tmp_path / "configs").exists()
    network = ("--engine", "network", "--workdir", tmp_path / "local")
    _refused(cli("run", "aggregate", *common, *network), flag)


@pytest.mark.parametrize("flag", ["--bounds", "--keys", "--key-selection-delta"])
def test_plan_refuses_a_release_option_without_release(
    cli: Callable[..., Any], penguins_csv: Path, flag: str
) -> None:
    outcome = cli(
        "plan", "--sql", SQL, "--data", penguins_csv, "--epsilon", "1", "--delta", "1e-4",
        flag, OPTIONS[flag],
    )  # fmt: skip
    _refused(outcome, flag)


def test_a_laplace_release_refuses_a_delta(cli: Callable[..., Any], penguins_csv: Path) -> None:
    outcome = cli(
        "run", "aggregate", "--data", penguins_csv, "--sql", SQL, "--release", "laplace",
        "--bounds", OPTIONS["--bounds"], "--keys", OPTIONS["--keys"], "--release-delta", "1e-5",
    )  # fmt: skip
    assert outcome.status == 2 and outcome.err.count("\n") == 1
    assert "--release-delta" in outcome.err and "gaussian" in outcome.err


@pytest.mark.parametrize(
    ("keys", "got"),
    [
        ({"species": [1, 2, 3]}, "got 1"),
        ({"species": ["Adelie", 2.5]}, "got 2.5"),
        ({"species": ["Adelie", True]}, "got True"),
    ],
)
def test_keys_of_another_type_than_the_column_are_refused(
    penguins: Any, keys: dict[str, list[Any]], got: str
) -> None:
    with pytest.raises(dpcomm.InvalidParameterError) as raised:
        dpcomm.run_sql(
            SQL, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=1,
            release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=keys,
        )  # fmt: skip
    error = raised.value
    assert error.name == "keys['species']" and "\n" not in str(error)
    assert "text (the column's type is VARCHAR)" in str(error) and got in str(error)


def test_numeric_keys_of_a_numeric_column_are_read(penguins: Any) -> None:
    """Integers, integer text (the CLI's) and floats of a DOUBLE column are its values."""
    sql = "SELECT flipper_length_mm, COUNT(*) AS n FROM penguins GROUP BY flipper_length_mm"
    run = dpcomm.run_sql(
        sql, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=1,
        release=dpcomm.Laplace(1e9), keys={"flipper_length_mm": [181, "190", 195.0]},
    )  # fmt: skip
    assert [float(r["flipper_length_mm"]) for r in run.rows] == [181.0, 190.0, 195.0]
    assert all(r["n"] > 0 for r in run.rows)  # real keys: their rows are counted
    with pytest.raises(dpcomm.InvalidParameterError, match=r"keys\['flipper_length_mm'\]"):
        dpcomm.run_sql(
            sql, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=1,
            release=dpcomm.Laplace(1.0), keys={"flipper_length_mm": ["Adelie"]},
        )  # fmt: skip


@pytest.mark.parametrize("column", ["bill_depth_mm", "species", "no_such_column"])
def test_bounds_of_a_column_no_sum_reads_are_refused(penguins: Any, column: str) -> None:
    with pytest.raises(dpcomm.InvalidParameterError) as raised:
        dpcomm.run_sql(
            SQL, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=1,
            release=dpcomm.Laplace(1.0), bounds={**BOUNDS, column: (0.0, 1.0)}, keys=KEYS,
        )  # fmt: skip
    assert raised.value.name == "bounds" and "\n" not in str(raised.value)
    assert "body_mass_g" in str(raised.value) and repr(column) in str(raised.value)


def test_cli_bounds_of_a_column_no_sum_reads(cli: Callable[..., Any], penguins_csv: Path) -> None:
    outcome = cli(
        "run", "aggregate", "--data", penguins_csv, "--sql", SQL, "--release", "laplace",
        "--bounds", OPTIONS["--bounds"], "--bounds", "bill_depth_mm=0:30",
        "--keys", OPTIONS["--keys"],
    )  # fmt: skip
    assert outcome.status == 2 and outcome.err.count("\n") == 1 and "--bounds" in outcome.err


def test_max_groups_error_under_a_release_states_no_count(
    cli: Callable[..., Any], penguins_csv: Path
) -> None:
    """The number of keys a compute node held is what key selection hides: under a release
    the error says the bound only (without a release it says the count, as before)."""
    common = ("run", "aggregate", "--data", penguins_csv, "--sql", SQL, "--targets", "1",
              "--max-groups", "2", "--mechanism", "none")  # fmt: skip
    released = cli(*common, "--release", "laplace", "--bounds", OPTIONS["--bounds"],
                   "--key-selection-delta", "1e-6")  # fmt: skip
    assert released.status == 2 and released.err.count("\n") == 1, released.err
    assert "more groups than the public bound of 2" in released.err
    assert "3" not in released.err
    exact = cli(*common)
    assert exact.status == 2 and "had 3 groups" in exact.err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--release", "laplace", "--release-epsilon", "-1"), "--release-epsilon"),
        (("--release", "gaussian", "--release-delta", "2"), "--release-delta"),
    ],
)
def test_the_release_budget_errors_name_their_own_flags(cli, flags, named):
    outcome = cli(
        "run", "aggregate", "--sql", "SELECT A, COUNT(*) FROM diabetes GROUP BY A", *flags,
        "--keys", "A=1,2",
    )  # fmt: skip
    assert outcome.status not in (0, None)
    (line,) = outcome.err.strip().splitlines()
    assert f"invalid {named}:" in line
