"""The planner (issue #4): exact search, costs from the one cost model, limits.

Reference values: the exhaustive searches below scan every d from 0 upward for every (σ, n)
of a small grid, accounting each mechanism independently with ``dpcomm.accounting.account``
(δ at the cluster's ε, every balanced batch size), and cost each candidate with the cost model
itself (:func:`dpcomm.plan.transform` of the plan built by :mod:`dpcomm.plan.builders`), which
``test_planner_costs_are_the_cost_model_and_the_simulator`` checks against
``dpcomm.engine.simulate``.
"""

import math
from contextlib import nullcontext
from dataclasses import replace

import numpy as np
import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account, pld, pure
from dpcomm.accounting.exact import ExactLemma2, Lemma2AtEpsilon, SizeTable
from dpcomm.data import table_from_arrays
from dpcomm.engine import simulate
from dpcomm.errors import DpcommError, DpcommWarning, InvalidParameterError
from dpcomm.experiments.headline import headline_markdown, headline_rows
from dpcomm.experiments.planner import (
    SEARCH_INTERVAL,
    Configuration,
    Feasibility,
    _minimal_true,
    describe_batches,
    nonprivate_load,
    pareto_front,
    plan_costs,
    plan_countermeasures,
    recruited_sources,
    scrambler_counts,
)
from dpcomm.plan import (
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
    account_plan,
    balanced_batch_sizes,
    batch_size_counts,
)
from dpcomm.plan.builders import aggregate_plan, kmeans_plan

# Not from dpcomm.plan: once the submodule dpcomm.plan.transform is imported, the package's
# attribute ``transform`` is that module, not the function.
from dpcomm.plan.transform import transform
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

# --- the fast evaluation is ExactLemma2 -----------------------------------------------------------


def test_fast_lemma2_equals_exact_lemma2():
    rng = np.random.default_rng(7)
    for _ in range(40):
        targets = int(rng.integers(2, 30))
        sigma = float(rng.choice([0.0, 1.0, rng.uniform(0.0, 1.0), rng.uniform(0.0, 1.0)]))
        epsilon = float(rng.uniform(0.05, 3.0))
        evaluator = Lemma2AtEpsilon(
            num_targets=targets, sampling_rate=sigma, epsilon=epsilon, sizes=SizeTable(targets)
        )
        for _ in range(3):
            n, d = int(rng.integers(1, 400)), int(rng.integers(0, 600))
            fast = evaluator.delta(batch_size=n, num_dummies=d)
            mechanism = ScramblerMechanism(
                num_targets=targets, sampling_rate=sigma, batch_size=n, num_dummies=d
            )
            exact = ExactLemma2(mechanism).delta(epsilon)
            assert fast == pytest.approx(exact, rel=1e-9, abs=1e-280)


def test_minimal_true_finds_the_threshold_from_any_guess():
    for threshold in (0, 1, 2, 7, 100, 999):
        for guess in (1, 3, 50, 5000):
            found = _minimal_true(lambda d, t=threshold: d >= t, guess=guess, maximum=1000)
            assert found == threshold
    assert _minimal_true(lambda d: d >= 2000, guess=10, maximum=1000) is None


def test_scrambler_counts_are_every_realized_number_of_scramblers():
    for sources in (12_346, 2_000, 137, 10, 1, 2):
        counts = scrambler_counts(sources)
        realized = sorted({len(balanced_batch_sizes(sources, n)) for n in range(1, sources + 1)})
        assert counts == realized
        for count in counts:  # n = ⌈S_t/K⌉ names the batches of K scramblers
            batches = balanced_batch_sizes(sources, -(-sources // count))
            assert len(batches) == count and sum(batches) == sources
            assert max(batches) - min(batches) <= 1
    # A restriction list keeps the K of the given n only.
    assert scrambler_counts(12_346, (1000, 100, 99_999)) == [13, 124]
    assert batch_size_counts(12_346, 1000) == {950: 9, 949: 4}


def test_describe_batches():
    assert describe_batches(balanced_batch_sizes(12_346, 100)) == (
        "124 scramblers: 70 of 100 sources, 54 of 99"
    )
    assert describe_batches((100,) * 10) == "10 scramblers of 100 sources"
    assert describe_batches((7,)) == "1 scrambler of 7 sources"
    assert describe_batches(()) == "no scrambler"


# --- costs: the planner's are the cost model's, and the simulator sends them ---------------


def aggregate_program(rows, grouping_sets, compute, seed=0):
    rng = np.random.default_rng(seed)
    columns = {f"g{i}": rng.integers(0, 3 * compute, rows) for i in range(grouping_sets)}
    columns["x"] = rng.normal(size=rows)
    sets = ", ".join(f"(g{i})" for i in range(grouping_sets))
    sql = f"SELECT COUNT(*), AVG(x) FROM t GROUP BY GROUPING SETS ({sets})"
    return AggregateProgram.from_sql(sql, table_from_arrays("t", columns), num_targets=compute)


def kmeans_program(rows, centroids, iterations, seed=0):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(rows, 2)) + rng.integers(0, 4, (rows, 1)) * 3.0
    return KMeansProgram(points, centroids, iterations, seed=seed)


SIMULATED = [
    # (workload, clusters, T, S_t, countermeasure, channel bound reached)
    ("aggregate", 1, 5, 600, Scramblers(sampling_rate=0.3, batch_size=50, num_dummies=20), True),
    ("aggregate", 2, 4, 530, Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=9), True),
    ("aggregate", 3, 6, 300, Scramblers(sampling_rate=0.0, batch_size=300, num_dummies=40), True),
    ("aggregate", 1, 5, 137, Scramblers(sampling_rate=0.4, batch_size=10, num_dummies=30), True),
    ("aggregate", 2, 5, 400, LocalFlooding(sampling_rate=0.4, num_dummies=4), True),
    ("aggregate", 2, 6, 400, LocalFlooding(sampling_rate=0.4, num_dummies=1), False),
    ("kmeans", 1, 4, 500, Scramblers(sampling_rate=0.5, batch_size=60, num_dummies=10), True),
    ("kmeans", 3, 4, 450, Scramblers(sampling_rate=0.9, batch_size=100, num_dummies=3), True),
    ("kmeans", 3, 5, 300, LocalFlooding(sampling_rate=0.5, num_dummies=2), True),
    ("kmeans", 1, 5, 300, LocalFlooding(sampling_rate=0.5, num_dummies=4), True),
]  # fmt: skip


@pytest.mark.parametrize(("workload", "clusters", "targets", "sources", "countermeasure", "tight"),
                         SIMULATED)  # fmt: skip
def test_planner_costs_are_the_cost_model_and_the_simulator(
    workload, clusters, targets, sources, countermeasure, tight
):
    if workload == "aggregate":
        program = aggregate_program(sources, clusters, targets)
    else:
        program = kmeans_program(sources, targets, clusters)
    common = {
        "num_sources": sources,
        "num_targets": targets,
        "workload": workload,
        "num_clusters": clusters,
    }
    costs = plan_costs(countermeasure, **common)
    # The planner's costs are those of the cost model on the program's own plan.
    transformed = transform(program.plan, countermeasure)
    assert costs.messages == transformed.messages
    assert dict(costs.channels_by_role) == transformed.channels_by_role()
    assert costs.max_channels == transformed.max_channels()
    assert costs.num_scramblers == transformed.num_scramblers()
    batches = set(transformed.batches.values())
    if isinstance(countermeasure, Scramblers):
        assert batches == {costs.batch_sizes}
        assert costs.batch_sizes == balanced_batch_sizes(sources, countermeasure.batch_size)
    else:
        assert batches == set() and costs.batch_sizes is None
    # The simulator sends exactly the messages of every routed flow (and says when the
    # balanced batches are smaller than the n asked for).
    smaller = isinstance(countermeasure, Scramblers) and (
        max(costs.batch_sizes) < countermeasure.batch_size
    )
    with pytest.warns(DpcommWarning, match="balanced batches") if smaller else nullcontext():
        run = simulate(program, countermeasure, delta=1e-4, seed=3)
    measured = {flow.flow: flow.messages for flow in run.traffic}
    assert measured == transformed.messages_per_flow()
    assert run.efficiency.messages == transformed.messages == costs.messages
    # Channels: the bound holds for every role, and is reached when the flows are dense.
    simulated = run.efficiency.max_channels_by_role
    for role, value in simulated.items():
        assert value <= costs.channels_by_role[role], role
    assert run.efficiency.max_channels <= costs.max_channels
    if tight:
        assert simulated == dict(costs.channels_by_role)
        assert run.efficiency.max_channels == costs.max_channels
    else:
        assert simulated != dict(costs.channels_by_role)
    baseline = simulate(program, NoCountermeasure(), delta=1e-4, seed=3)
    assert baseline.efficiency.messages == nonprivate_load(**common)


def test_the_planned_configuration_is_costed_by_the_cost_model():
    result = plan_countermeasures(
        num_sources=1500, num_targets=8, iterations=2, epsilon=2.0, delta=1e-4,
        sampling_rates=(0.0, 0.3, 0.6), max_channels=200,
    )  # fmt: skip
    for candidate in (result, *result.pareto):
        configuration = candidate.configuration
        plan = kmeans_plan(num_sources=candidate.num_sources, num_centroids=8, num_iterations=2)
        transformed = transform(plan, configuration.countermeasure())
        assert candidate.network_load_messages == transformed.messages
        assert candidate.max_channels_per_node == transformed.max_channels()
        if configuration.mechanism == "scrambler":
            sizes = transformed.batches["iteration 1"]
            assert configuration.batch_sizes == sizes == transformed.batches["iteration 2"]
            assert configuration.num_scramblers == transformed.num_scramblers("iteration 1")
            assert max(sizes) <= configuration.batch_size
        else:
            assert configuration.batch_sizes is None and configuration.num_scramblers is None
    assert (
        dict(result.channels_by_role)
        == transform(
            kmeans_plan(num_sources=result.num_sources, num_centroids=8, num_iterations=2),
            result.configuration.countermeasure(),
        ).channels_by_role()
    )
    assert result.max_channels_per_node <= 200
    assert (
        result.nonprivate_load_messages
        == transform(
            kmeans_plan(num_sources=1500, num_centroids=8, num_iterations=2), NoCountermeasure()
        ).messages
    )


def test_recruited_sources_match_the_engine_consents():
    program = aggregate_program(1000, 1, 20)
    countermeasure = LocalFlooding(sampling_rate=0.2, num_dummies=0)
    run = simulate(program, countermeasure, delta=1e-4, seed=0)
    needed = recruited_sources(num_sources=1000, num_targets=20, sampling_rate=0.2)
    assert needed - 1000 == run.extra_consents()
    assert needed == transform(program.plan, countermeasure).sources_needed()
    assert recruited_sources(num_sources=10_000, num_targets=20, sampling_rate=0.2) == 12_346
    assert (
        recruited_sources(
            num_sources=10_000, num_targets=20, sampling_rate=0.2, max_extra_consents=100
        )
        == 10_100
    )


# --- the search against an exhaustive one ---------------------------------------------------


def reference_candidates(
    *, sources, targets, clusters, workload, epsilon, delta, rates, batches, extra=None,
    utility=1.0, max_dummies=400,
):  # fmt: skip
    """Every (mechanism, σ, n) with its least d, by scanning d upwards with ``account``."""
    eps_c, delta_c = epsilon / clusters, delta / clusters
    found = []
    for sigma in rates:
        keep = 1 - sigma + sigma / targets
        recruited = math.ceil(sources / keep - 1e-9)
        if extra is not None:
            recruited = min(recruited, sources + extra)
        if min(1.0, recruited * keep / sources) < utility - 1e-12:
            continue
        for d in range(targets):
            local = LocalRandomizer(num_targets=targets, sampling_rate=sigma, num_dummies=d)
            if account(local, epsilon=eps_c).guarantee.delta <= delta_c:
                found.append(
                    (
                        Configuration(mechanism="local", sampling_rate=sigma, num_dummies=d),
                        recruited,
                    )
                )
                break
        for n in batches:
            if n > recruited:
                continue
            sizes = batch_size_counts(recruited, n)
            for d in range(max_dummies + 1):
                ok = all(
                    account(
                        ScramblerMechanism(
                            num_targets=targets, sampling_rate=sigma, batch_size=b, num_dummies=d
                        ),
                        epsilon=eps_c,
                        monte_carlo_samples=0,
                    ).guarantee.delta
                    <= delta_c
                    for b in sizes
                )
                if ok:
                    configuration = Configuration(
                        mechanism="scrambler",
                        sampling_rate=sigma,
                        num_dummies=d,
                        batch_size=n,
                        batch_sizes=balanced_batch_sizes(recruited, n),
                    )
                    found.append((configuration, recruited))
                    break
    costs = []
    for configuration, recruited in found:
        # Costed by the cost model itself: the builders' plan of S_t sources, transformed.
        if workload == "aggregate":
            plan = aggregate_plan(
                num_sources=recruited,
                flows=[f"set {i}" for i in range(clusters)],
                compute_nodes=[targets] * clusters,
            )
        else:
            plan = kmeans_plan(
                num_sources=recruited, num_centroids=targets, num_iterations=clusters
            )
        transformed = transform(plan, configuration.countermeasure())
        costs.append(
            (
                transformed.messages,
                transformed.max_channels(),
                recruited - sources,
                configuration,
            )
        )
    return costs


def plan_for(*, sources, targets, clusters, workload):
    if workload == "aggregate":
        program = aggregate_program(sources, clusters, targets)
    else:
        program = kmeans_program(sources, targets, clusters)
    return program.plan


CASES = [
    # sources, T, clusters, workload, ε, δ, σ grid, n grid, max channels, max consents, utility
    (200, 5, 1, "aggregate", 2.0, 1e-3, (0.0, 0.4, 0.7), (20, 50, 90), None, None, 1.0),
    (600, 8, 2, "aggregate", 3.0, 1e-3, (0.3, 0.6), (40, 150), 100, None, 1.0),
    (1000, 10, 3, "aggregate", 3.0, 1e-3, (0.5, 0.8), (100, 300), None, 900, 1.0),
    (500, 6, 2, "kmeans", 3.0, 1e-3, (0.6, 0.9), (50, 200), 60, None, 1.0),
    (2000, 20, 1, "aggregate", 3.0, 1e-4, (0.1, 0.2, 0.5), (250, 1000), None, 300, 0.85),
]


@pytest.mark.parametrize("case", CASES)
def test_planner_matches_an_exhaustive_search(case):
    sources, targets, clusters, workload, eps, delta, rates, batches, channels, extra, util = case
    kind = {"grouping_sets": clusters} if workload == "aggregate" else {"iterations": clusters}
    result = plan_countermeasures(
        num_sources=sources,
        num_targets=targets,
        epsilon=eps,
        delta=delta,
        max_channels=channels,
        max_extra_consents=extra,
        min_utility=util,
        sampling_rates=rates,
        batch_sizes=batches,
        **kind,
    )
    reference = reference_candidates(
        sources=sources, targets=targets, clusters=clusters, workload=workload, epsilon=eps,
        delta=delta, rates=rates, batches=batches, extra=extra, utility=util,
    )  # fmt: skip
    allowed = [c for c in reference if channels is None or c[1] <= channels]
    best = min(allowed, key=lambda c: c[:3])
    if clusters == 1:
        # One cluster: the same predicate (no composition); K from the restriction list.
        assert result.network_load_messages == best[0]
        assert (result.max_channels_per_node, result.extra_consents) == best[1:3]
    else:
        # G > 1: basic composition (the reference) or PLD composition, never worse.
        assert (result.network_load_messages, result.max_channels_per_node) <= best[:2]
    # The Pareto front: mutually non-dominated, within the limits, the chosen first.
    front = result.pareto
    assert front[0].costs == (
        result.network_load_messages, result.max_channels_per_node, result.extra_consents
    )  # fmt: skip
    for one in front:
        assert channels is None or one.max_channels_per_node <= channels
        assert extra is None or one.extra_consents <= extra
        for other in front:
            if one is not other:
                assert not all(a <= b for a, b in zip(other.costs, one.costs, strict=True))
    if clusters == 1:
        # The reference's members of least load are in the front (pruned ones cost more).
        reference_costs = {c[:3] for c in allowed if c[0] == best[0]}
        assert reference_costs & {c.costs for c in front}
    # The chosen configuration meets (ε, δ) by the plan's accountant on the real plan (for
    # G > 1 too: account_plan composes at the whole δ, by PLD or by Theorem 2's sum).
    plan = plan_for(sources=result.num_sources, targets=targets, clusters=clusters,
                    workload=workload)  # fmt: skip
    guarantee = account_plan(plan, result.configuration.countermeasure(), delta=delta).guarantee
    assert guarantee.epsilon <= eps + 1e-6
    assert guarantee.delta == pytest.approx(delta)
    # The planned ε is the accountant's on the program's own plan of S_t sources.
    assert result.epsilon == guarantee.epsilon
    assert result.delta == guarantee.delta


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
            fewer = replace(configuration, num_dummies=configuration.num_dummies - 1)
            assert not check.configuration_ok(fewer)


def test_paper_scenario_meets_the_target_by_account_plan():
    result = plan_countermeasures(
        num_sources=10_000, num_targets=20, grouping_sets=1, epsilon=1.0, delta=1e-4
    )
    assert result.epsilon <= 1.0
    plan = plan_for(sources=result.num_sources, targets=20, clusters=1, workload="aggregate")
    guarantee = account_plan(plan, result.configuration.countermeasure(), delta=1e-4).guarantee
    assert guarantee.epsilon <= 1.0
    assert result.utility >= 1.0 - 1e-12


# --- limits and errors ----------------------------------------------------------------------------


def test_a_channel_limit_that_cannot_be_met_names_the_limit_and_the_amount():
    with pytest.raises(DpcommError) as caught:
        plan_countermeasures(
            num_sources=2000, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
            max_channels=15,
        )  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message
    assert "relax max_channels by" in message
    needed = int(message.split("needs ")[1].split(":")[0].replace(",", ""))
    relaxed = plan_countermeasures(
        num_sources=2000, num_targets=10, grouping_sets=1, epsilon=1.0, delta=1e-4,
        max_channels=needed,
    )  # fmt: skip
    assert relaxed.max_channels_per_node <= needed
    assert f"by {needed - 15:,}" in message


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
        ({"delta": 0.0}, "delta"),
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


# --- the headline table -----------------------------------------------------------------------


def test_headline_known_values():
    rows = {row.method: row for row in headline_rows(monte_carlo_samples=1000)}
    assert rows["exact"].num_dummies == 275
    assert rows["bennett"].num_dummies == 546
    assert rows["hoeffding"].num_dummies == 4334
    assert rows["post-processing"].num_dummies is None
    assert rows["monte-carlo"].status == "estimate"
    exact = rows["exact"]
    assert exact.num_scramblers == 124
    assert exact.num_sources == 12_346
    assert batch_size_counts(12_346, 100) == {100: 70, 99: 54}
    assert exact.batch_sizes == balanced_batch_sizes(12_346, 100)
    # Sources → scramblers (S_t), scramblers → compute nodes (S_t + SC·d), compute → result (C).
    assert exact.messages == 2 * 12_346 + 124 * 275 + 20
    assert exact.nonprivate_messages == 10_020
    # d = 275 is the least that reaches δ at ε = 1 for every batch size (100 and 99).
    for batch in (100, 99):
        for dummies, reached in ((275, True), (274, False)):
            mechanism = ScramblerMechanism(
                num_targets=20, sampling_rate=0.2, batch_size=batch, num_dummies=dummies
            )
            assert (ExactLemma2(mechanism).delta(1.0) <= 1e-4) == reached
    table = headline_markdown(tuple(rows.values()))
    assert table.count("\n|") == 7  # header, separator and 5 rows
    assert "estimate" in table and "unreachable" in table


# --- brute force: every (σ, K, d) with the same predicate and the cost model ---------------------


def brute_force_feasible(request, configuration):
    """The planner's predicate, written out without its shortcuts (floors, caches, row PLDs).

    Basic composition: every cluster at (ε/G, δ/G) by Lemma 2 evaluated exactly (every batch
    size) or R_σ^d's exact δ; PLD composition (G > 1): G copies of the smallest batch's
    Lemma 2 pair (or R_σ^d's pair), discretized on the search grid.
    """
    clusters, targets = request.num_clusters, request.num_targets
    check = Feasibility(request)
    eps, eps_c = check.epsilon_check, check.cluster_epsilon_check
    delta, delta_c = request.delta, request.delta / clusters
    sigma, d = configuration.sampling_rate, configuration.num_dummies

    def composed(pair):
        if clusters == 1 or pair.infinity_mass >= 1.0:
            return False  # one cluster: no composition; all mass at +∞: δ = 1
        one = pair.pld(interval=SEARCH_INTERVAL)
        value = pld.compose([one], counts=[clusters]).get_delta_for_epsilon(eps)
        return value <= delta

    def local(dummies):
        randomizer = LocalRandomizer(num_targets=targets, sampling_rate=sigma, num_dummies=dummies)
        if pure.local_delta(randomizer, eps_c) <= delta_c:
            return True
        return composed(pld.local_randomizer_pair(randomizer))

    if configuration.mechanism == "local":
        return local(d)
    if local(0):
        return True
    sizes = sorted(set(configuration.batch_sizes))
    evaluator = Lemma2AtEpsilon(
        num_targets=targets, sampling_rate=sigma, epsilon=eps_c, sizes=SizeTable(targets)
    )
    if all(evaluator.delta(batch_size=b, num_dummies=d) <= delta_c for b in sizes):
        return True
    return composed(
        pld.scrambler_pair(
            ScramblerMechanism(
                num_targets=targets, sampling_rate=sigma, batch_size=sizes[0], num_dummies=d
            )
        )
    )


def brute_force_best(request, rates, max_dummies):
    """The least (load, channels, consents, mechanism, σ, n) over every σ, K and least d."""
    best = None
    for sigma in rates:
        recruited = recruited_sources(
            num_sources=request.num_sources, num_targets=request.num_targets,
            sampling_rate=sigma, max_extra_consents=request.max_extra_consents,
        )  # fmt: skip
        keep = 1 - sigma + sigma / request.num_targets
        if min(1.0, recruited * keep / request.num_sources) < request.min_utility - 1e-12:
            continue
        configurations = []
        for d in range(request.num_targets):
            local = Configuration(mechanism="local", sampling_rate=sigma, num_dummies=d)
            if brute_force_feasible(request, local):
                configurations.append(local)
                break
        for count in range(1, recruited + 1):  # every K, realized or not
            n = -(-recruited // count)
            if len(balanced_batch_sizes(recruited, n)) != count:
                continue  # K not realized: the same batches as another K
            for d in range(max_dummies + 1):
                configuration = Configuration(
                    mechanism="scrambler", sampling_rate=sigma, num_dummies=d, batch_size=n,
                    batch_sizes=balanced_batch_sizes(recruited, n),
                )  # fmt: skip
                if brute_force_feasible(request, configuration):
                    configurations.append(configuration)
                    break
        for configuration in configurations:
            costs = plan_costs(
                configuration, num_sources=recruited, num_targets=request.num_targets,
                workload=request.workload, num_clusters=request.num_clusters,
            )  # fmt: skip
            if request.max_channels is not None and costs.max_channels > request.max_channels:
                continue
            key = (
                costs.messages, costs.max_channels, recruited - request.num_sources,
                0 if configuration.mechanism == "scrambler" else 1, sigma,
                configuration.batch_size or 0,
            )  # fmt: skip
            if best is None or key < best[0]:
                best = (key, configuration)
    return best


BRUTE = [
    # S, T, G, workload, ε, δ, max channels, max extra consents
    (40, 4, 1, "aggregate", 1.5, 1e-3, None, None),
    (36, 5, 1, "aggregate", 1.0, 1e-3, 20, None),
    (30, 3, 2, "aggregate", 2.0, 1e-3, None, None),
    (50, 4, 2, "kmeans", 2.5, 1e-3, None, 20),
    (45, 5, 2, "aggregate", 2.0, 1e-2, 25, None),
]
BRUTE_RATES = (0.0, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9)


@pytest.mark.slow
@pytest.mark.parametrize("case", BRUTE, ids=str)
def test_planner_is_optimal_against_brute_force(case):
    sources, targets, clusters, workload, eps, delta, channels, extra = case
    kind = {"grouping_sets": clusters} if workload == "aggregate" else {"iterations": clusters}
    max_dummies = 40
    result = plan_countermeasures(
        num_sources=sources, num_targets=targets, epsilon=eps, delta=delta,
        max_channels=channels, max_extra_consents=extra, sampling_rates=BRUTE_RATES,
        max_dummies=max_dummies, **kind,
    )  # fmt: skip
    request = result.request
    best = brute_force_best(request, BRUTE_RATES, max_dummies)
    assert best is not None
    key, configuration = best
    chosen = result.configuration
    assert (
        result.network_load_messages,
        result.max_channels_per_node,
        result.extra_consents,
    ) == key[:3]
    assert (chosen.mechanism, chosen.sampling_rate, chosen.batch_size) == (
        configuration.mechanism, configuration.sampling_rate, configuration.batch_size,
    )  # fmt: skip
    assert chosen.num_dummies == configuration.num_dummies
    assert brute_force_feasible(request, chosen)
    if clusters == 1:  # the reported ε: account_plan at the plan's δ (one cluster: no composition)
        assert result.epsilon <= eps + 1e-6
