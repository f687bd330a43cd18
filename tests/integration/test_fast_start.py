"""`dpcomm --version` and `dpcomm --help` answer without importing the library's heavy parts."""

import os
import subprocess
import sys

import pytest

from dpcomm.cli.entry import TOP_LEVEL_HELP
from dpcomm.cli.main import build_parser

HEAVY = {"numpy", "scipy", "duckdb", "dask", "distributed", "sqlglot", "pandas", "pyarrow"}


def test_the_fast_help_is_the_parsers(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    expected = build_parser().format_help()
    assert expected == TOP_LEVEL_HELP, (
        "src/dpcomm/cli/entry.py's TOP_LEVEL_HELP is stale: set it to "
        "build_parser().format_help() at COLUMNS=80"
    )


@pytest.mark.parametrize("option", ["--version", "--help", "-h"])
def test_version_and_help_import_nothing_heavy(option):
    code = (
        "import sys\n"
        "from dpcomm.cli.entry import main\n"
        f"status = main([{option!r}])\n"
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


def test_everything_else_goes_to_the_full_cli(capsys):
    from dpcomm.cli.entry import main

    assert main(["account", "local", "--targets", "4", "--sampling", "0.5"]) == 0
    assert "Privacy of the local randomizer" in capsys.readouterr().out
