"""Without the optional extra ``figures`` (matplotlib, mlxtend), in a fresh interpreter: every
dpcomm module imports and ``dpcomm account`` answers (the in-process checks are in
tests/unit/test_figures_extra.py; this one imports every module anew, ~4 s of CPU).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from dpcomm.errors import EXTRA_PACKAGES


def test_dpcomm_and_its_other_commands_work_without_it():
    # A fresh interpreter: every dpcomm module imports, and `dpcomm account` answers.
    script = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        for name in {EXTRA_PACKAGES["figures"]!r}:
            sys.modules[name] = None
        import dpcomm
        for module in pkgutil.walk_packages(dpcomm.__path__, "dpcomm."):
            if not module.name.startswith("dpcomm.explorer"):  # the explore extra's
                importlib.import_module(module.name)
        from dpcomm.cli.main import main
        sys.exit(main(["account", "scrambler", "--targets", "20", "--sampling", "0.5",
                       "--dummies", "50", "--batch", "100", "--delta", "1e-4"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "ε" in done.stdout or "epsilon" in done.stdout.lower(), done.stdout
