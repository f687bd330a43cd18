"""The explorer's page: its controls from the address, the query panel, the missing-Dash error."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from dpcomm.experiments.explore import ExplorerSettings

pytest.importorskip("dash")

from dpcomm.explorer.app import initial_settings, make_app, settings_of
from dpcomm.explorer.query import query_against_exact


def test_the_address_sets_the_controls() -> None:
    settings, problem = initial_settings({"sampling": "0.35", "dummies": "60", "targets": "10"})
    assert problem == ""
    assert settings == ExplorerSettings(sampling_rate=0.35, num_dummies=60, num_targets=10)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"dummies": "many"}, "dummies"),
        ({"colour": "red"}, "colour"),
        ({"sampling": "2"}, "sampling_rate"),
    ],
)
def test_a_wrong_address_shows_the_defaults_and_says_why(arguments: dict, named: str) -> None:
    settings, problem = initial_settings(arguments)
    assert settings == ExplorerSettings()
    assert problem.endswith("(the defaults are shown)")
    assert named in problem


def test_an_empty_control_is_named() -> None:
    values = {"workload": "aggregate", "mechanism": "scrambler", "targets": None}
    with pytest.raises(ValueError, match="targets"):
        settings_of(values)


def test_the_page_is_built() -> None:
    app = make_app()
    page = app.layout()
    assert "numbers" in str(page) and "front" in str(page)


def test_a_query_beside_its_exact_answer() -> None:
    frame = pd.DataFrame({"A": [1, 2, 2, 3] * 10, "I": [float(i) for i in range(40)]})
    settings = ExplorerSettings(
        mechanism="local", num_targets=3, sampling_rate=0.0, num_dummies=0, num_sources=40
    )
    comparison = query_against_exact(
        "SELECT A, COUNT(*), AVG(I) FROM people GROUP BY A", frame, settings
    )
    result = comparison.result
    assert list(result.columns) == [
        "A",
        "count_star()",
        "count_star() (exact)",
        "avg(I)",
        "avg(I) (exact)",
    ]
    # σ = 0: every tuple reaches its compute node, so the run's values are the exact ones.
    assert (result["count_star()"] == result["count_star() (exact)"]).all()
    assert (result["avg(I)"] == result["avg(I) (exact)"]).all()
    assert comparison.tuples_used == 40 and comparison.num_sources == 40


def test_without_dash_the_command_says_how_to_install_it(cli, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "dash" else real(name, *a)
    )
    outcome = cli("explore", "--port", "1")
    assert outcome.status == 2
    assert outcome.err.count("\n") == 1
    assert "pip install 'dpcomm[explore]'" in outcome.err


@pytest.mark.parametrize("host", ["", "0", "nan", "example host"])
def test_a_host_that_is_no_address_is_refused_in_one_line(cli, host: str) -> None:
    outcome = cli("explore", "--host", host)
    assert outcome.status == 2
    assert outcome.err.count("\n") == 1 and "--host" in outcome.err


def test_a_port_in_use_is_refused_in_one_line(cli) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        outcome = cli("explore", "--port", taken.getsockname()[1])
    assert outcome.status == 2
    assert outcome.err.count("\n") == 1 and "--port" in outcome.err, outcome.err
