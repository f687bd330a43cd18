"""``python -m dpcomm`` is the ``dpcomm`` command."""

import os
import subprocess
import sys


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpcomm", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_python_m_dpcomm_runs_the_cli():
    done = run("--version")
    assert done.returncode == 0 and done.stdout.startswith("dpcomm")
    done = run("account", "local", "--targets", "4", "--sampling", "0.5", "--json")
    assert done.returncode == 0 and '"epsilon"' in done.stdout


def test_python_m_dpcomm_errors_in_one_line():
    done = run("account", "local", "--targets", "1", "--sampling", "0.5")
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
