"""The attacker of issue #6 on simulated Aggregate and K-means runs, and the DP bound."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from dpcomm.data import load_mnist5k, synthetic_table
from dpcomm.engine import simulate
from dpcomm.experiments.attacker import attack_run, dp_accuracy_bound
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.plan.countermeasures import LocalFlooding
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram


@pytest.fixture(scope="module")
def aggregate():
    rows = synthetic_table(num_rows=3000, distribution="uniform", seed=0, name="t")
    return AggregateProgram.from_sql(
        "SELECT g1, COUNT(*) AS n FROM t GROUP BY g1", rows, num_targets=20
    )


def test_bound_closed_form_for_a_uniform_prior():
    for epsilon, delta in [(0.0, 0.0), (1.0, 0.0), (1.0, 1e-4), (3.0, 1e-3)]:
        expected = (math.exp(epsilon) + 19 * delta) / (math.exp(epsilon) + 19)
        assert dp_accuracy_bound(np.ones(20), epsilon=epsilon, delta=delta) == pytest.approx(
            expected
        )


def test_bound_for_a_skewed_prior():
    prior = np.array([0.5, 0.3, 0.2])
    assert dp_accuracy_bound(prior, epsilon=0.0, delta=0.0) == pytest.approx(0.5, abs=1e-9)
    value = dp_accuracy_bound(prior, epsilon=1.0, delta=1e-4)
    assert 0.5 < value <= min(1.0, math.e * 0.5 + 1e-4)
    assert dp_accuracy_bound(prior, epsilon=math.inf, delta=0.0) == 1.0


def test_no_countermeasure_reveals_everything(aggregate):
    run = simulate(aggregate, NoCountermeasure(), delta=1e-4, seed=0)
    result = attack_run(run)
    assert result.accuracy == 1.0
    assert math.isinf(result.epsilon)


@pytest.mark.parametrize(
    "countermeasure",
    [
        LocalFlooding(sampling_rate=0.5, num_dummies=3),
        Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50),
        Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=0),
    ],
)
def test_attacker_beats_the_prior_but_not_the_dp_bound(aggregate, countermeasure):
    run = simulate(aggregate, countermeasure, delta=1e-4, seed=0)
    result = attack_run(run)
    assert result.accuracy > result.baseline
    # 3000 guesses: allow a binomial standard error's worth of slack (3 sigma).
    slack = 3 * math.sqrt(result.bound * (1 - result.bound) / 3000)
    assert result.accuracy <= result.bound + slack


def test_scramblers_without_sampling_nor_dummies_reveal_everything(aggregate):
    run = simulate(
        aggregate, Scramblers(sampling_rate=0.0, batch_size=100, num_dummies=0), delta=1e-4, seed=0
    )
    assert attack_run(run).accuracy == 1.0


def test_kmeans_true_targets_replay_the_run_without_countermeasure():
    # Without countermeasure the observer reads every target: the attacker is right on every
    # iteration only if its replay of the state (from the run's delivered tuples) is the run's.
    dataset = load_mnist5k()
    program = KMeansProgram(dataset.train_images[:1500], 10, 3, seed=0)
    run = simulate(program, NoCountermeasure(), delta=1e-4, seed=0)
    result = attack_run(run)
    assert len(result.flows) == 3
    assert [flow.accuracy for flow in result.flows] == [1.0, 1.0, 1.0]


def test_kmeans_attack_on_every_iteration():
    dataset = load_mnist5k()
    program = KMeansProgram(dataset.train_images, 10, 2, seed=0)
    run = simulate(program, LocalFlooding(sampling_rate=0.5, num_dummies=1), delta=1e-4, seed=0)
    result = attack_run(run)
    assert len(result.flows) == 2
    assert result.baseline < result.accuracy <= result.bound + 0.03
    # The plan composes the two iterations (PLD at the whole δ, or the sum at δ/2 each).
    assert result.plan_epsilon == run.privacy.guarantee.epsilon
    assert result.plan_epsilon <= 2 * result.epsilon * (1 + 1e-9)


@pytest.mark.slow
def test_attack_figure_quick(tmp_path):
    from dpcomm.experiments.figures.attack import figure_attack
    from dpcomm.experiments.figures.base import FigureSettings

    output = figure_attack(FigureSettings(out_dir=tmp_path, quick=True))
    assert output.png.exists() and output.csv.exists()
    with output.csv.open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["query"] for row in rows} == {"Aggregate", "K-means"}
    for row in rows:
        if row["cluster_epsilon"] == "inf":
            assert float(row["accuracy"]) == 1.0
        else:
            assert float(row["accuracy"]) <= float(row["dp_bound"]) + 0.03
