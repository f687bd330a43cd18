"""The parser is built without the library's heavy modules; each command imports what it calls."""

import os
import subprocess
import sys

import pytest

HEAVY = {
    "numpy",
    "scipy",
    "duckdb",
    "dask",
    "distributed",
    "sqlglot",
    "pandas",
    "pyarrow",
    "opendp",
}


def _loaded(code: str, modules: set[str]) -> str:
    """The last line ``code`` prints, run in a fresh interpreter given ``modules`` as argv."""
    done = subprocess.run(
        [sys.executable, "-c", code, *sorted(modules)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_building_the_parser_imports_nothing_heavy():
    code = (
        "import sys\n"
        "import dpcomm.cli.main as m\n"
        "m.build_parser()\n"
        "print('LOADED', sorted({n.split('.')[0] for n in sys.modules} & set(sys.argv[1:])))\n"
    )
    assert _loaded(code, HEAVY | {"dp_accounting", "matplotlib", "cryptography"}) == "LOADED []"


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["-h"], ["run", "aggregate", "--help"], ["plan", "-h"]],
    ids=" ".join,
)
def test_version_and_help_import_nothing_heavy(argv):
    code = (
        "import sys\n"
        "from dpcomm.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exit_:\n"
        "    status = exit_.code\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:]))\n"
        "print('LOADED', loaded, status)\n"
    )
    assert _loaded(code, HEAVY) == "LOADED [] 0"


def test_help_after_options_is_the_commands(capsys):
    from dpcomm.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--sources", "10", "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: dpcomm plan")


@pytest.mark.parametrize(
    "argv",
    [
        ["local", "--targets", "4", "--sampling", "0.5"],
        ["scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100", "--delta", "1e-4"],
    ],
    ids=" ".join,
)
def test_account_imports_only_the_accountant(argv):
    """`dpcomm account` does not import the engines, DuckDB, the PLD library or scipy.stats
    (the accountant's binomial functions are scipy.special's), nor the plan model, its
    transform and costs (the countermeasure's codec is all it reads of the plan), nor the
    Monte Carlo estimator (only with --mc-samples)."""
    code = (
        "import sys\n"
        "from dpcomm.cli.main import main\n"
        f"status = main(['account', *{argv!r}])\n"
        "modules = set(sys.modules) | {m.split('.')[0] for m in sys.modules}\n"
        "loaded = sorted(modules & set(sys.argv[1:]))\n"
        "engines = sorted(m for m in sys.modules if m.startswith('dpcomm.engine'))\n"
        "print('LOADED', loaded, engines, status)\n"
    )
    unwanted = HEAVY - {"numpy", "scipy"} | {"dp_accounting", "matplotlib", "scipy.stats"}
    unwanted |= {f"dpcomm.plan.{name}" for name in ("model", "transform", "costs", "privacy")}
    unwanted |= {"dpcomm.accounting.montecarlo", "dpcomm.accounting.pld"}
    # (numpy's f2py and testing, which scipy.special's array-API shim would import for nothing)
    unwanted |= {"numpy.f2py", "numpy.testing"}
    assert _loaded(code, unwanted) == "LOADED [] [] 0"


def test_a_node_process_imports_no_accountant():
    """A deployment's node (`node run`, and the worker processes of `run --engine network`)
    runs role code: it imports neither the PLD library nor scipy, which cost a second of CPU
    in each of a round's many processes."""
    code = (
        "import sys\n"
        "import dpcomm.engine.network.worker\n"
        "from dpcomm.cli.deploy import command_node_run\n"
        "from dpcomm.engine.network.deploy import published_result\n"
        "from dpcomm.engine.network.launcher import run_tls_group\n"
        "modules = set(sys.modules) | {m.split('.')[0] for m in sys.modules}\n"
        "print('LOADED', sorted(modules & set(sys.argv[1:])))\n"
    )
    unwanted = {"dp_accounting", "scipy", "duckdb", "opendp", "dpcomm.plan.privacy"}
    assert _loaded(code, unwanted) == "LOADED []"
