"""The worked examples in examples/ run to completion (each checks its own claims)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "script",
    [
        "account_and_plan.py",
        "custom_plan.py",
        pytest.param("deployment.py", marks=pytest.mark.slow),
    ],
)
def test_example_runs(script):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()
