"""`dpcomm --version` and `dpcomm --help` answer without importing the library's heavy parts."""

import os
import subprocess
import sys

import pytest

from dpcomm.cli.help_texts import HELP
from dpcomm.cli.main import build_parser, help_texts

HEAVY = {"numpy", "scipy", "duckdb", "dask", "distributed", "sqlglot", "pandas", "pyarrow"}


def test_the_fast_help_texts_are_the_parsers(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    expected = help_texts(build_parser())
    assert set(expected) == set(HELP), "src/dpcomm/cli/help_texts.py is stale: make help-texts"
    for path, text in expected.items():
        assert HELP[path] == text, (
            f"the help of `dpcomm {' '.join(path)}` changed: run make help-texts"
        )
    assert ("run", "aggregate") in HELP and ("deploy", "local") in HELP


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["-h"], ["run", "aggregate", "--help"], ["plan", "-h"]],
    ids=" ".join,
)
def test_version_and_help_import_nothing_heavy(argv):
    code = (
        "import sys\n"
        "from dpcomm.cli.entry import main\n"
        f"status = main({argv!r})\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:]))\n"
        "print('LOADED', loaded, status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *sorted(HEAVY)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED [] 0"
    assert done.stdout.startswith("dpcomm 0." if argv == ["--version"] else "usage: dpcomm")


def test_help_after_options_goes_to_the_parser(capsys):
    from dpcomm.cli.entry import main

    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--sources", "10", "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: dpcomm plan")


def test_everything_else_goes_to_the_full_cli(capsys):
    from dpcomm.cli.entry import main

    assert main(["account", "local", "--targets", "4", "--sampling", "0.5"]) == 0
    assert "Privacy of the local randomizer" in capsys.readouterr().out


def test_account_imports_only_the_accountant():
    """`dpcomm account` does not import the engines, DuckDB or the PLD library."""
    code = (
        "import sys\n"
        "from dpcomm.cli.entry import main\n"
        "status = main(['account', 'local', '--targets', '4', '--sampling', '0.5'])\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:]))\n"
        "engines = sorted(m for m in sys.modules if m.startswith('dpcomm.engine'))\n"
        "print('LOADED', loaded, engines, status)\n"
    )
    unwanted = sorted(HEAVY - {"numpy", "scipy"} | {"dp_accounting", "matplotlib"})
    done = subprocess.run(
        [sys.executable, "-c", code, *unwanted],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED [] [] 0"
