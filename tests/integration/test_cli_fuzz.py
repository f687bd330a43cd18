"""Every subcommand, driven with bad values: a success, or one line on stderr and a non-zero exit.

The subcommands are enumerated from the argument parser, so a new one is fuzzed too (with no
baseline in :func:`baseline` its required options are missing, and argparse's one-line error
is what is checked; add one to reach its handler). Each example replaces one option of a
command's cheap baseline by a bad value: negative, zero, huge, NaN, infinite, empty, or a path
that cannot exist. Never a traceback.
"""

import argparse
import atexit
import contextlib
import io
import itertools
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from dpcomm.cli.main import build_parser, main
from dpcomm.engine.network.pki import CertificateAuthority

WORKDIR = Path(tempfile.mkdtemp(prefix="dpcomm-fuzz-"))
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
BLOCKER = WORKDIR / "a-file"
BLOCKER.write_text("")
#: A path no one can create (its parent is a regular file), whatever the user's rights.
IMPOSSIBLE = str(BLOCKER / "x" / "y")
CA = WORKDIR / "ca"
CertificateAuthority.create(CA)
_fresh = itertools.count()

BAD_VALUES = ["-1", "-0.5", "0", "nan", "-inf", "inf", "99999999999999999999", "", IMPOSSIBLE]

QUERY = "SELECT A, COUNT(*) AS n FROM t GROUP BY A"
SYNTHETIC_QUERY = "SELECT g1, COUNT(*) AS n FROM t GROUP BY g1"


def fresh() -> str:
    """A new path in the work folder (nothing there yet)."""
    return str(WORKDIR / f"f{next(_fresh)}")


def baseline(path: tuple[str, ...]) -> list[str]:
    """Arguments of a quick valid run of the command (seconds at most)."""
    baselines = {
        ("account",): [
            "account", "scrambler", "--targets", "20", "--sampling", "0.5", "--batch", "10",
            "--dummies", "5", "--delta", "1e-4", "--mc-samples", "0",
        ],
        ("run", "aggregate"): ["run", "aggregate", "--sql", QUERY, "--seed", "1"],
        ("run", "kmeans"): [
            "run", "kmeans", "--sources", "50", "--k", "2", "--iterations", "1", "--seed", "1",
        ],
        ("data", "synthetic"): ["data", "synthetic", "--rows", "10", "--out", fresh() + ".csv"],
        ("figures",): ["figures", "--only", "3a", "--quick", "--quiet", "--out", fresh()],
        ("audit", "local"): [
            "audit", "local", "--targets", "5", "--sampling", "0.5", "--runs", "1000", "--quiet",
        ],
        ("audit", "scrambler"): [
            "audit", "scrambler", "--targets", "5", "--sampling", "0.5", "--batch", "10",
            "--runs", "1000", "--quiet",
        ],
        ("audit", "release"): ["audit", "release", "--batch", "10", "--runs", "200", "--quiet"],
        ("audit", "kmeans-release"): [
            "audit", "kmeans-release", "--batch", "5", "--runs", "200",
        ],
        ("deploy", "kmeans-configs"): [
            "deploy", "kmeans-configs", "--sources", "20", "--k", "2", "--iterations", "1",
            "--out", fresh(),
        ],
        ("plan",): [
            "plan", "--sources", "100", "--targets", "5", "--grouping-sets", "1",
            "--epsilon", "1", "--delta", "1e-4",
        ],
        ("headline",): ["headline", "--mc-samples", "10"],
        ("pki", "init"): ["pki", "init", "--dir", fresh()],
        ("pki", "issue"): ["pki", "issue", "--dir", str(CA), "--name", "n1", "--out", fresh()],
        ("deploy", "configs"): [
            "deploy", "configs", "--sql", SYNTHETIC_QUERY, "--synthetic", "20", "--out", fresh(),
        ],
        ("budget",): [
            "budget", "--ledger", fresh() + ".json", "--budget-epsilon", "1",
            "--budget-delta", "1e-5",
        ],
        ("node", "run"): [
            "node", "run", "--role", "source", "--config", fresh(), "--ssl-certfile", "a.pem",
            "--ssl-keyfile", "a.key", "--ssl-ca-certfile", "ca.pem",
        ],
    }  # fmt: skip
    return list(baselines.get(path, list(path)))


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every leaf subcommand of ``parser`` with its parser."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return [(path, parser)]
    return [
        leaf
        for group in groups
        for name, child in group.choices.items()
        for leaf in commands(child, (*path, name))
    ]


def fuzzable_options() -> list[tuple[tuple[str, ...], str]]:
    """(command, option) for every option taking a free value (no choices, not a flag)."""
    options = []
    for path, parser in commands(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.nargs != 0 and action.choices is None:
                options.append((path, action.option_strings[-1]))
    return options


OPTIONS = fuzzable_options()


def test_every_command_is_fuzzed():
    fuzzed = {path for path, _ in OPTIONS}
    assert fuzzed == {path for path, _ in commands(build_parser())}
    assert ("run", "aggregate") in fuzzed and ("pki", "issue") in fuzzed


def run(argv: list[str]) -> tuple[object, str]:
    """Exit status and standard error of ``dpcomm argv`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    # In the work folder: a relative value ("0", "nan", ...) of a path option is created there.
    with (
        contextlib.chdir(WORKDIR),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            status: object = main(argv)
        except SystemExit as exit_:
            status = exit_.code
    return status, err.getvalue()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(option=st.sampled_from(OPTIONS), value=st.sampled_from(BAD_VALUES))
def test_bad_values_give_one_line_or_success(option, value):
    path, name = option
    argv = baseline(path)
    if name in argv:
        index = argv.index(name)
        del argv[index : index + 2]
    argv.append(f"{name}={value}")
    status, err = run(argv)
    assert "Traceback" not in err, (argv, err)
    if status != 0:
        assert status is not None, argv
        assert err.count("\n") == 1 and err.endswith("\n"), (argv, err)
        assert "error" in err, (argv, err)
