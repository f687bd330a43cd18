"""The explorer's release and ledger numbers: the library's, and bad controls refused."""

from __future__ import annotations

import pytest

import dpcomm
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.explore import ExplorerSettings, explore
from dpcomm.experiments.explore_release import (
    ReleaseSettings,
    ledger_numbers,
    release_numbers,
    release_sql,
)

SMALL = ExplorerSettings(num_targets=10, num_sources=200, batch_size=50, num_dummies=20)


def test_the_release_is_composed_with_the_traffic_as_a_run_reports_it():
    numbers = release_numbers(SMALL, ReleaseSettings(epsilon=0.7))
    report = numbers.report
    assert numbers.traffic_epsilon == explore(SMALL).composed.epsilon
    assert report.epsilon == pytest.approx(0.7, rel=1e-12)
    assert report.epsilon_total <= report.summed_epsilon
    # ε1 + ε2, each share charged its allowances (`charged_shares`): never less, 1e-9 more.
    assert report.summed_epsilon >= numbers.traffic_epsilon + 0.7
    assert report.summed_epsilon == pytest.approx(numbers.traffic_epsilon + 0.7, rel=1e-8)
    # Replace-one: a COUNT's sensitivity is at least 2 (OpenDP's add/remove default gives 1).
    assert min(a.sensitivity_l1 for a in report.aggregates if "COUNT" in a.aggregate) >= 2
    assert 0 < numbers.expected_relative_error < 10


def test_a_smaller_epsilon2_is_noisier():
    loud = release_numbers(SMALL, ReleaseSettings(epsilon=2.0))
    quiet = release_numbers(SMALL, ReleaseSettings(epsilon=0.5))
    assert quiet.expected_relative_error > loud.expected_relative_error
    assert quiet.report.epsilon_total < loud.report.epsilon_total


def test_the_released_query_adds_the_average():
    assert release_sql(1) == (
        "SELECT g1, COUNT(*) AS n_rows, AVG(m1) AS mean_m1 FROM t GROUP BY g1"
    )
    assert release_sql(16) is None


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"mechanism": "exponential"}, "release mechanism"),
        ({"epsilon": 0.0}, "ε2"),
        ({"epsilon": float("nan")}, "ε2"),
        ({"mechanism": "gaussian", "delta": 0.0}, "δ2"),
        ({"low": 5.0, "high": 1.0}, "bounds"),
    ],
)
def test_bad_release_controls_are_refused_naming_them(fields, name):
    with pytest.raises(InvalidParameterError, match=name):
        ReleaseSettings(**fields)


def test_no_release_for_kmeans_or_none():
    with pytest.raises(InvalidParameterError, match="workload"):
        release_numbers(ExplorerSettings(workload="kmeans"), ReleaseSettings())
    with pytest.raises(InvalidParameterError, match="release mechanism"):
        release_numbers(SMALL, ReleaseSettings(mechanism="none"))


def test_the_ledger_is_read_and_never_written(tmp_path):
    budget = dpcomm.Budget(epsilon=3.0, delta=1e-3, ledger=tmp_path / "l.json")
    budget.charge(epsilon=1.25, delta=1e-5, kind="aggregate", query="q", method="exact")
    before = budget.ledger.read_bytes()
    shown = ledger_numbers(str(budget.ledger), (1.75, 1e-5))
    assert shown.spent == budget.spent() and shown.remaining == budget.remaining()
    assert shown.budget == (3.0, 1e-3) and shown.admits is True
    assert ledger_numbers(str(budget.ledger), (1.76, 1e-5)).admits is False
    assert ledger_numbers(str(budget.ledger)).admits is None
    assert budget.ledger.read_bytes() == before
    with pytest.raises(dpcomm.DpcommError, match="no such file"):
        ledger_numbers(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("settings", "release"),
    [
        (SMALL, ReleaseSettings()),  # scramblers with sampling: the one-other view
        (
            ExplorerSettings(num_targets=10, num_sources=300, sampling_rate=0.0, num_clusters=2),
            ReleaseSettings(mechanism="gaussian", epsilon=0.4, low=-10.0, high=90.0),
        ),
        (
            ExplorerSettings(mechanism="local", num_targets=5, num_dummies=2, num_sources=100),
            ReleaseSettings(epsilon=3.0),
        ),
    ],
)
def test_the_release_is_bound_as_run_sql_binds_it(settings, release):
    from dpcomm.data.synthetic import SyntheticRows
    from dpcomm.plan.privacy import account_plan
    from dpcomm.release.mechanisms import Gaussian, Laplace
    from dpcomm.release.noise import noisy_program
    from dpcomm.release.report import release_report

    numbers = release_numbers(settings, release)
    mechanism = (
        Laplace(release.epsilon)
        if release.mechanism == "laplace"
        else Gaussian(release.epsilon, release.delta)
    )
    program = noisy_program(
        numbers.sql,
        SyntheticRows(settings.num_sources, seed=0, name="t"),
        release=mechanism,
        bounds={"m1": (release.low, release.high)},
        keys={c: list(range(20)) for c in ("g1", "g2") if c in numbers.sql},
        countermeasure=settings.countermeasure,
        num_targets=settings.num_targets,
    )
    privacy = account_plan(program.plan, settings.countermeasure, delta=settings.delta)
    assert numbers.report == release_report(program, privacy)
