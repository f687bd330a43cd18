"""The planner's search (issue #4): exact, against exhaustive and brute-force enumerations.

Reference values: the exhaustive searches below scan every d from 0 upward for every (σ, n)
of a small grid, accounting each mechanism independently with ``dpcomm.accounting.account``
(δ at the cluster's ε, every balanced batch size), and cost each candidate with the cost model
itself (:func:`dpcomm.plan.transform` of the plan built by :mod:`dpcomm.plan.builders`), which
``tests/unit/calibration/test_costs.py`` checks against ``dpcomm.engine.simulate``. The brute
force, which tries every (σ, K, d) with the planner's predicate written out without its
shortcuts, is in ``tests/reference/test_planner_brute_force.py``. These searches are reference
tests too (about 8 s of CPU, moved out of tests/unit for ``make check``).
"""

import math

import numpy as np
import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account
from dpcomm.accounting.exact import ExactLemma2, Lemma2AtEpsilon, SizeTable
from dpcomm.calibration import (
    Configuration,
    least_satisfying,
    plan_countermeasures,
)
from dpcomm.plan import (
    LocalFlooding,
    Scramblers,
    account_plan,
    balanced_batch_sizes,
    batch_size_counts,
)
from dpcomm.plan.builders import aggregate_plan, kmeans_plan

# Not from dpcomm.plan: once the submodule dpcomm.plan.transform is imported, the package's
# attribute ``transform`` is that module, not the function.
from dpcomm.plan.transform import transform

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


def test_least_satisfying_finds_the_threshold_from_any_guess():
    for threshold in (0, 1, 2, 7, 100, 999):
        for guess in (1, 3, 50, 5000):
            found = least_satisfying(lambda d, t=threshold: d >= t, low=0, high=1000, guess=guess)
            assert found == threshold
    assert least_satisfying(lambda d: d >= 2000, low=0, high=1000, guess=10) is None


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
                flooding = LocalFlooding(sampling_rate=sigma, num_dummies=d)
                found.append((Configuration(countermeasure=flooding), recruited))
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
                        countermeasure=Scramblers(sampling_rate=sigma, batch_size=n, num_dummies=d),
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
                num_targets=[targets] * clusters,
            )
        else:
            plan = kmeans_plan(
                num_sources=recruited, num_centroids=targets, num_iterations=clusters
            )
        transformed = transform(plan, configuration.countermeasure)
        costs.append(
            (
                transformed.messages,
                transformed.max_channels(),
                recruited - sources,
                configuration,
            )
        )
    return costs


CASES = [
    # sources, T, clusters, workload, ε, δ, σ grid, n grid, max channels, max consents, utility
    (200, 5, 1, "aggregate", 2.0, 1e-3, (0.0, 0.4, 0.7), (20, 50, 90), None, None, 1.0),
    (600, 8, 2, "aggregate", 3.0, 1e-3, (0.3, 0.6), (40, 150), 100, None, 1.0),
    (1000, 10, 3, "aggregate", 3.0, 1e-3, (0.5, 0.8), (100, 300), None, 900, 1.0),
    (500, 6, 2, "kmeans", 3.0, 1e-3, (0.6, 0.9), (50, 200), 60, None, 1.0),
    (2000, 20, 1, "aggregate", 3.0, 1e-4, (0.1, 0.2, 0.5), (250, 1000), None, 300, 0.85),
]


@pytest.mark.parametrize("case", CASES)
def test_planner_matches_an_exhaustive_search(case, plan_for):
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
    guarantee = account_plan(plan, result.configuration.countermeasure, delta=delta).guarantee
    assert guarantee.epsilon <= eps + 1e-6
    assert guarantee.delta == pytest.approx(delta)
    # The planned ε is the accountant's on the program's own plan of S_t sources.
    assert result.epsilon == guarantee.epsilon
    assert result.delta == guarantee.delta
