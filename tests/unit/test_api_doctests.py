"""The front door's docstring examples run (doctest), and ``import dpcomm`` stays light."""

import doctest
import os
import subprocess
import sys

import pytest

import dpcomm
import dpcomm.api
import dpcomm.datasets


@pytest.mark.parametrize("module", [dpcomm, dpcomm.api, dpcomm.datasets], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


def test_import_dpcomm_is_light():
    heavy = "{'numpy', 'duckdb', 'pandas', 'scipy', 'dask'}"
    code = f"import sys, dpcomm; print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy}))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout.strip() == "[]", done.stderr
