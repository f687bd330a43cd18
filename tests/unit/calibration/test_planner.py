"""The planner's answer (issue #4): the Pareto front, the reported ε, limits and errors."""

import pytest

from dpcomm.calibration import Feasibility, pareto_front, plan_countermeasures
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan import account_plan, batch_size_counts


def test_pareto_members_are_mutually_non_dominated_and_verified():
    result = plan_countermeasures(
        num_sources=3000, num_targets=10, grouping_sets=2, epsilon=2.0, delta=1e-4
    )
    front = result.pareto
    assert len(front) >= 1
    for one in front:
        for other in front:
            if one is not other:
                assert not all(a <= b for a, b in zip(other.costs, one.costs, strict=True))
    assert pareto_front(front) == front
    assert [c.network_load_messages for c in front] == sorted(
        c.network_load_messages for c in front
    )
    chosen = (result.network_load_messages, result.max_channels_per_node, result.extra_consents)
    assert chosen == min(c.costs for c in front) == front[0].costs
    assert front[0].epsilon == result.epsilon
    # Spot-check members with the planner's predicate from scratch: d passes, d − 1 does not.
    check = Feasibility(result.request)
    for member in front[:: max(1, len(front) // 4)]:
        configuration = member.configuration
        if configuration.mechanism == "scrambler":
            sizes = batch_size_counts(member.num_sources, configuration.batch_size)
            assert set(configuration.batch_sizes) == set(sizes)
        assert check.configuration_ok(configuration)
        if configuration.num_dummies > 0:
            fewer = configuration.with_dummies(configuration.num_dummies - 1)
            assert not check.configuration_ok(fewer)


def test_paper_scenario_meets_the_target_by_account_plan(plan_for):
    result = plan_countermeasures(
        num_sources=10_000, num_targets=20, grouping_sets=1, epsilon=1.0, delta=1e-4
    )
    assert result.epsilon <= 1.0
    plan = plan_for(sources=result.num_sources, targets=20, clusters=1, workload="aggregate")
    guarantee = account_plan(plan, result.configuration.countermeasure, delta=1e-4).guarantee
    assert guarantee.epsilon <= 1.0
    assert result.utility >= 1.0 - 1e-12


# --- limits and errors ----------------------------------------------------------------------------


def test_a_channel_limit_that_cannot_be_met_names_the_limit_and_the_amount():
    # 200 sources (needing 21 channels) take the same path as 2,000 (needing 51): the search
    # within the limit finds nothing, the one by channels finds the fewest; 2,000 cost 4 s.
    with pytest.raises(DpcommError) as caught:
        plan_countermeasures(
            num_sources=200, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
            max_channels=10,
        )  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message
    assert "relax max_channels by" in message
    needed = int(message.split("needs ")[1].split(":")[0].replace(",", ""))
    relaxed = plan_countermeasures(
        num_sources=200, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
        max_channels=needed,
    )  # fmt: skip
    assert relaxed.max_channels_per_node <= needed
    assert f"by {needed - 10:,}" in message


def test_a_consent_limit_that_cannot_be_met_names_the_limit():
    with pytest.raises(DpcommError) as caught:
        plan_countermeasures(
            num_sources=1000, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
            max_extra_consents=0, mechanisms=("scrambler",), max_dummies=5,
        )  # fmt: skip
    message = str(caught.value)
    assert "relax max_extra_consents by" in message and "\n" not in message
    needed = int(message.split("are ")[1].split(":")[0].replace(",", ""))
    relaxed = plan_countermeasures(
        num_sources=1000, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
        max_extra_consents=needed, mechanisms=("scrambler",), max_dummies=5,
    )  # fmt: skip
    assert relaxed.extra_consents <= needed


def test_an_unreachable_target_says_to_relax_the_privacy_target():
    with pytest.raises(DpcommError, match=r"relax epsilon or delta"):
        plan_countermeasures(
            num_sources=100, num_targets=5, grouping_sets=1, epsilon=0.5, delta=1e-6,
            mechanisms=("scrambler",), sampling_rates=(0.0,), max_dummies=3,
        )  # fmt: skip


def test_utility_below_one_allows_fewer_consents():
    result = plan_countermeasures(
        num_sources=1000, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
        max_extra_consents=100, min_utility=0.5,
    )  # fmt: skip
    assert result.extra_consents <= 100
    assert result.utility >= 0.5


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": -1e-4}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"num_sources": 0}, "num_sources"),
        ({"num_targets": 1}, "num_targets"),
        ({"grouping_sets": 2, "iterations": 2}, "grouping_sets/iterations"),
        ({"grouping_sets": None}, "grouping_sets/iterations"),
        ({"grouping_sets": 0}, "grouping_sets"),
        ({"max_channels": 0}, "max_channels"),
        ({"max_extra_consents": -1}, "max_extra_consents"),
        ({"min_utility": 0.0}, "min_utility"),
        ({"min_utility": 1.5}, "min_utility"),
        ({"sampling_rates": (1.0,)}, "sampling_rates"),
    ],
)
def test_invalid_parameters_are_named(options, name):
    arguments = {
        "num_sources": 100,
        "num_targets": 5,
        "epsilon": 1.0,
        "delta": 1e-4,
        "grouping_sets": 1,
    }
    arguments.update(options)
    with pytest.raises(InvalidParameterError) as caught:
        plan_countermeasures(**arguments)
    assert caught.value.name.startswith(name)


def test_results_are_immutable():
    result = plan_countermeasures(
        num_sources=300, num_targets=5, grouping_sets=1, epsilon=2.0, delta=1e-3,
        sampling_rates=(0.5,), batch_sizes=(100,),
    )  # fmt: skip
    with pytest.raises(AttributeError):
        result.epsilon = 0.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        result.configuration.num_dummies = 0  # type: ignore[misc]


def test_a_load_limit_keeps_the_choice_and_the_front_within_it_or_says_the_least_load():
    common = {"num_sources": 400, "num_targets": 5, "grouping_sets": 1, "delta": 1e-4}
    free = plan_countermeasures(**common, epsilon=1.0)
    limit = free.pareto[-1].network_load_messages  # the front's dearest member is cut off
    limited = plan_countermeasures(**common, epsilon=1.0, max_messages=limit - 1)
    assert limited.network_load_messages == free.network_load_messages
    assert all(c.network_load_messages < limit for c in limited.pareto)
    assert len(limited.pareto) == len(free.pareto) - 1
    least = free.network_load_messages
    with pytest.raises(DpcommError, match=rf"max_messages = {least - 1:,}.*{least:,} messages"):
        plan_countermeasures(**common, epsilon=1.0, max_messages=least - 1)
    with pytest.raises(InvalidParameterError, match="max_messages"):
        plan_countermeasures(**common, epsilon=1.0, max_messages=0)


def test_delta_zero_plans_a_pure_plan():
    """δ = 0: every candidate is pure ε-DP (local flooding by Theorem 1, scramblers without
    dummies as a post-processing of R_σ), and the chosen plan's ε at δ = 0 meets the target."""
    from dpcomm.accounting import LocalRandomizer, pure
    from dpcomm.plan.countermeasures import LocalFlooding, Scramblers

    result = plan_countermeasures(
        num_sources=1000, num_targets=10, grouping_sets=2, epsilon=2.0, delta=0.0,
        max_extra_consents=0,
    )  # fmt: skip
    assert result.delta == 0.0 and result.epsilon <= 2.0
    assert result.privacy is not None and result.privacy.guarantee.delta == 0.0
    for candidate in result.pareto:
        countermeasure = candidate.configuration.countermeasure
        assert isinstance(countermeasure, LocalFlooding | Scramblers)
        if isinstance(countermeasure, Scramblers):
            assert countermeasure.num_dummies == 0  # dummies need δ > 0 (Lemma 2)
        local = LocalRandomizer(
            num_targets=10,
            sampling_rate=countermeasure.sampling_rate,
            num_dummies=getattr(countermeasure, "num_dummies", 0)
            if isinstance(countermeasure, LocalFlooding)
            else 0,
        )
        assert 2 * pure.local_pure_epsilon(local) <= 2.0


def test_scramblers_needing_delta_are_infeasible_at_delta_zero():
    from dpcomm.calibration.feasibility import Feasibility
    from dpcomm.calibration.request import PlanRequest

    def request(delta):
        return PlanRequest(
            num_sources=1000, num_targets=10, workload="aggregate", num_clusters=1,
            epsilon=1.0, delta=delta,
        )  # fmt: skip

    pure_check, approximate = Feasibility(request(0.0)), Feasibility(request(1e-4))
    # σ = 0.5: R_σ alone is not 1-DP, but enough dummies make the scrambler (1, 1e-4)-DP.
    assert not approximate.post_processing_ok(0.5)
    assert approximate.scrambler_ok(0.5, [1000], 2000)
    assert not pure_check.scrambler_ok(0.5, [1000], 2000)
    assert not pure_check.scrambler_one_cluster(0.5, 1000, 2000)
    assert pure_check.local_ok(0.0, 9)  # flooding every target: ε = 0
