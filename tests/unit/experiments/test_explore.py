"""The explorer's numbers (dpcomm.experiments.explore) are the library's, on small instances."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

import dpcomm
from dpcomm.calibration import plan_costs, request_plan
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.attacker import dp_accuracy_bound
from dpcomm.experiments.explore import (
    ExplorerSettings,
    account_arguments,
    attack,
    explore,
    python_snippet,
    run_arguments,
    tradeoff_front,
)
from dpcomm.plan.privacy import account_plan

SMALL = ExplorerSettings(
    num_targets=5, sampling_rate=0.3, batch_size=10, num_dummies=5, num_sources=40
)


def test_one_round_and_composed_are_the_accountants() -> None:
    settings = ExplorerSettings(
        num_targets=5,
        sampling_rate=0.3,
        batch_size=10,
        num_dummies=5,
        num_sources=40,
        num_clusters=3,
    )
    numbers = explore(settings)
    mechanism = dpcomm.ScramblerMechanism(
        num_targets=5, sampling_rate=0.3, batch_size=10, num_dummies=5
    )
    one = dpcomm.account(mechanism, delta=settings.delta)
    assert numbers.one_round.epsilon == one.guarantee.epsilon
    assert numbers.one_round.lower_bound == one.lower_bound
    composed = dpcomm.account(mechanism, delta=settings.delta, rounds=3)
    assert numbers.composed.epsilon == pytest.approx(composed.guarantee.epsilon, rel=1e-6)
    assert numbers.composed.lower_bound <= numbers.composed.epsilon
    plan = request_plan(workload="aggregate", num_sources=40, num_targets=5, num_clusters=3)
    planned = account_plan(plan, settings.countermeasure, delta=settings.delta)
    assert numbers.composed.epsilon == planned.guarantee.epsilon  # what a run reports
    costs = plan_costs(
        settings.countermeasure,
        num_sources=40,
        num_targets=5,
        workload="aggregate",
        num_clusters=3,
    )
    assert numbers.network_load_messages == costs.messages
    assert numbers.max_channels_per_node == costs.max_channels
    assert numbers.tuples_used_fraction == pytest.approx(1 - 0.3 + 0.3 / 5)
    assert numbers.batches == "4 scramblers of 10 sources"


def test_unequal_batches_are_accounted_at_the_smallest() -> None:
    settings = ExplorerSettings(
        num_targets=5, sampling_rate=0.3, batch_size=10, num_dummies=5, num_sources=45
    )
    assert settings.batch_sizes == (9, 9, 9, 9, 9)
    assert settings.mechanism_of_one_round.batch_size == 9
    numbers = explore(settings)
    plan = request_plan(workload="aggregate", num_sources=45, num_targets=5, num_clusters=1)
    planned = account_plan(plan, settings.countermeasure, delta=settings.delta)
    assert numbers.composed.epsilon == planned.guarantee.epsilon


def test_local_flooding_is_accounted_as_r_sigma_d() -> None:
    settings = ExplorerSettings(
        mechanism="local", num_targets=6, sampling_rate=0.4, num_dummies=2, num_sources=30
    )
    numbers = explore(settings)
    local = dpcomm.LocalRandomizer(num_targets=6, sampling_rate=0.4, num_dummies=2)
    assert numbers.one_round.epsilon == dpcomm.account(local, delta=1e-4).guarantee.epsilon
    assert numbers.batches is None and numbers.num_scramblers == 0


@pytest.mark.parametrize(
    ("change", "parameter"),
    [
        ({"mechanism": "local", "num_dummies": 5}, "num_dummies"),  # d <= T - 1 = 4
        ({"delta": 0.0}, "delta"),
        ({"num_targets": 1}, "num_targets"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"workload": "join"}, "workload"),
    ],
)
def test_settings_name_the_parameter_out_of_range(change: dict, parameter: str) -> None:
    fields = {
        "num_targets": 5,
        "sampling_rate": 0.3,
        "batch_size": 10,
        "num_dummies": 5,
        "num_sources": 40,
    }
    with pytest.raises(InvalidParameterError) as raised:
        ExplorerSettings(**{**fields, **change})
    assert raised.value.name == parameter


def test_each_point_of_the_front_sets_a_configuration_of_its_epsilon_and_load() -> None:
    settings = ExplorerSettings(num_targets=4, num_sources=30)
    front = tradeoff_front(settings, min_utility=0.8, epsilons=(0.5, 1.0, 4.0))
    assert front
    epsilons = [p.epsilon for p in front]
    loads = [p.network_load_messages for p in front]
    assert epsilons == sorted(epsilons) and loads == sorted(loads, reverse=True)
    for point in front:
        assert point.epsilon <= point.target_epsilon and point.utility >= 0.8
        chosen = replace(
            settings,
            mechanism=point.mechanism,
            sampling_rate=point.sampling_rate,
            batch_size=settings.batch_size if point.batch_size is None else point.batch_size,
            num_dummies=point.num_dummies,
        )
        numbers = explore(chosen)
        assert numbers.composed.epsilon == pytest.approx(point.epsilon, rel=1e-9)
        assert numbers.network_load_messages == point.network_load_messages


def test_the_attacker_is_measured_beside_the_bound_of_one_round() -> None:
    estimate = attack(SMALL, rounds=2)
    numbers = explore(SMALL)
    assert estimate.epsilon == numbers.one_round.epsilon
    assert estimate.rounds == 2 and estimate.sources == 40
    assert 0.0 <= estimate.accuracy <= 1.0
    assert estimate.baseline <= estimate.bound <= 1.0
    # The bound is dp_accuracy_bound's for some prior over T values: at least the uniform one's.
    uniform = dp_accuracy_bound([1.0] * 5, epsilon=estimate.epsilon, delta=1e-4)
    assert estimate.bound >= uniform - 1e-12
    assert not math.isnan(estimate.standard_error)


def test_the_commands_run_and_report_the_explorers_numbers(cli) -> None:
    settings = ExplorerSettings(
        num_targets=5,
        sampling_rate=0.3,
        batch_size=10,
        num_dummies=5,
        num_sources=40,
        num_clusters=2,
    )
    numbers = explore(settings)
    arguments = run_arguments(settings)
    assert arguments is not None and arguments[:3] == ["dpcomm", "run", "aggregate"]
    outcome = cli(*arguments[1:], "--json", "--quiet")
    assert outcome.status == 0, outcome.err
    privacy = json.loads(outcome.out)["report"]["privacy"]
    assert privacy["epsilon"] == pytest.approx(numbers.composed.epsilon, rel=1e-9)
    outcome = cli(*account_arguments(settings)[1:], "--json", "--mc-samples", "0")
    assert outcome.status == 0, outcome.err
    accounted = json.loads(outcome.out)[0]
    assert accounted["epsilon"] == pytest.approx(numbers.composed.epsilon, rel=1e-6)


def test_no_command_runs_what_no_embedded_data_fits() -> None:
    assert run_arguments(ExplorerSettings(num_clusters=16)) is None  # 15 synthetic sets
    assert run_arguments(ExplorerSettings(workload="kmeans", num_sources=4001)) is None
    kmeans = run_arguments(ExplorerSettings(workload="kmeans", num_sources=300, num_clusters=2))
    assert kmeans is not None and kmeans[:3] == ["dpcomm", "run", "kmeans"]


def test_the_python_snippet_runs_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(python_snippet(SMALL), "<snippet>", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    accounted = explore(SMALL).one_round
    assert printed[0] == f"{accounted.epsilon} {accounted.lower_bound}"
    assert float(printed[1].split()[0]) == pytest.approx(explore(SMALL).composed.epsilon)
