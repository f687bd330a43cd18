"""`dpcomm figures` end to end: PNGs, CSVs and the index page."""

import csv

import pytest

from dpcomm.cli.main import main
from dpcomm.experiments.figures import figure_names, select_figures

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_every_figure_of_the_issue_is_registered():
    expected = {"3a", "3b", "4a", "4b", "4c", "5", "6a", "6b", "6c", "7a", "7b", "7c", "7d"}
    expected |= {"7e", "7f", "8", "attack", "rounds"}
    assert set(figure_names()) == expected


def test_selection_by_name_and_number():
    assert select_figures(["6"]) == ("6a", "6b", "6c")
    assert select_figures(["3a", "8"]) == ("3a", "8")


def test_figures_command_writes_pngs_csvs_and_index(tmp_path, capsys):
    status = main(["figures", "--quick", "--quiet", "--only", "3,4a", "--out", str(tmp_path)])
    assert status == 0
    out = capsys.readouterr().out
    index = (tmp_path / "index.md").read_text()
    for name in ("3a", "3b", "4a"):
        png, table = tmp_path / f"{name}.png", tmp_path / f"{name}.csv"
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        with table.open() as handle:
            rows = list(csv.DictReader(handle))
        assert rows and "curve" in rows[0]
        assert f"## Figure {name}:" in index and f"]({name}.png)" in index
        assert f"Figure {name}" in out


def test_unknown_figure_is_a_one_line_error(tmp_path, capsys):
    status = main(["figures", "--only", "9z", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "only" in err


@pytest.mark.parametrize("name", ["3a", "6b"])
def test_index_has_the_papers_caption(tmp_path, name):
    main(["figures", "--quick", "--quiet", "--only", name, "--out", str(tmp_path)])
    index = (tmp_path / "index.md").read_text()
    assert "*" in index and "Data: [" in index


def test_only_adds_to_an_existing_index(tmp_path, capsys):
    assert main(["figures", "--quick", "--quiet", "--only", "3a", "--out", str(tmp_path)]) == 0
    assert main(["figures", "--quiet", "--only", "3b", "--seed", "1", "--out", str(tmp_path)]) == 0
    index = (tmp_path / "index.md").read_text()
    assert "## Figure 3a:" in index and "## Figure 3b:" in index
    assert "made in quick mode, seed 0" in index and "made in full mode, seed 1" in index
