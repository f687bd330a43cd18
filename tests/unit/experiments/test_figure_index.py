"""The figures' index merges across runs; every figure must read well (title, labels, legend)."""

import json
from pathlib import Path

import pytest

from dpcomm.errors import DpcommError
from dpcomm.experiments.figures import write_index
from dpcomm.experiments.figures.base import (
    FigureOutput,
    FigureSettings,
    new_axes,
    readability_problems,
    save_figure,
)


def output(folder: Path, name: str, note: str) -> FigureOutput:
    png, csv = folder / f"{name}.png", folder / f"{name}.csv"
    png.write_bytes(b"png")
    csv.write_text("curve\n")
    return FigureOutput(name, f"title {name}", f"caption {name}", png, csv, (note,))


def test_a_later_run_adds_to_the_index_and_replaces_its_own_figures(tmp_path):
    quick = FigureSettings(out_dir=tmp_path, quick=True, seed=0)
    full = FigureSettings(out_dir=tmp_path, quick=False, seed=3)
    write_index(
        [(output(tmp_path, "6b", "first"), 1.0), (output(tmp_path, "8", "eight"), 2.0)], quick
    )
    index = write_index(
        [(output(tmp_path, "3a", "three"), 0.5), (output(tmp_path, "6b", "new"), 1.5)], full
    )
    text = index.read_text()
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## Figure 3a: title 3a",
        "## Figure 6b: title 6b",
        "## Figure 8: title 8",
    ]  # paper order, each once
    assert "- new" in text and "- first" not in text and "- eight" in text
    assert "made in full mode, seed 3" in text and "made in quick mode, seed 0" in text
    assert "several runs" in text
    data = json.loads((tmp_path / "index.json").read_text())
    assert [section["name"] for section in data["figures"]] == ["3a", "6b", "8"]


def test_a_figure_whose_image_is_gone_leaves_the_index(tmp_path):
    settings = FigureSettings(out_dir=tmp_path, quick=True)
    write_index([(output(tmp_path, "4a", "a"), 1.0), (output(tmp_path, "4b", "b"), 1.0)], settings)
    (tmp_path / "4a.png").unlink()
    text = write_index([(output(tmp_path, "5", "five"), 1.0)], settings).read_text()
    assert "Figure 4a" not in text and "Figure 4b" in text and "Mode: quick; seed 0." in text


def test_an_index_without_its_data_file_is_replaced(tmp_path):
    (tmp_path / "index.md").write_text("# an old index\n## Figure 7a: gone\n")
    settings = FigureSettings(out_dir=tmp_path, quick=True)
    text = write_index([(output(tmp_path, "3b", "b"), 1.0)], settings).read_text()
    assert "Figure 7a" not in text and "Figure 3b" in text


def test_readability_is_checked():
    figure, axes = new_axes()
    axes.plot([0, 1], [0, 1], label="one")
    axes.plot([0, 1], [1, 0], label="two")
    problems = readability_problems(figure)
    assert "no figure title" in problems
    assert "axes 0: no axis label" in problems
    assert "axes 0: 2 labelled series, no legend" in problems
    axes.set_xlabel("x")
    axes.set_ylabel("y")
    axes.legend(fontsize=5)
    figure.suptitle("a title")
    assert readability_problems(figure) == ["a legend font below 7 pt"]
    axes.legend(fontsize=8)
    assert readability_problems(figure) == []


def test_an_unreadable_figure_is_not_saved(tmp_path):
    figure, axes = new_axes()
    axes.plot([0, 1], [0, 1], label="one")
    axes.plot([0, 1], [1, 0], label="two")
    settings = FigureSettings(out_dir=tmp_path, quick=True)
    with pytest.raises(DpcommError, match="figure 9 is hard to read: axes 0: no axis label"):
        save_figure(settings, "9", figure, [{"curve": "x"}], title="a title")
    assert not (tmp_path / "9.png").exists()
