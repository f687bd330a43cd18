"""The planner is optimal: a brute force over every (σ, K, d) finds nothing better (issue #4).

The brute force tries every sampling rate of a grid, every number of batches K and the least
number of dummies d, with the planner's predicate written out without its shortcuts (floors,
caches, row PLDs), and costs each candidate with the cost model; the planner's choice must be
the least by (network load, channels, extra consents, mechanism, σ, n). About 35 s of CPU: a
reference test, beside the exhaustive searches of ``tests/reference/test_planner_exhaustive.py``.
"""

import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, pld, pure
from dpcomm.accounting.exact import Lemma2AtEpsilon, SizeTable
from dpcomm.calibration import (
    Configuration,
    Feasibility,
    plan_costs,
    plan_countermeasures,
    recruited_sources,
)
from dpcomm.calibration.feasibility import SEARCH_INTERVAL
from dpcomm.plan import LocalFlooding, Scramblers, balanced_batch_sizes

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

    def composed(make_pair):
        if clusters == 1:
            return False  # one cluster: no composition (the pair is not even built)
        pair = make_pair()
        if pair.infinity_mass >= 1.0:
            return False  # all mass at +∞: δ = 1
        one = pair.pld(interval=SEARCH_INTERVAL)
        value = pld.compose([one], counts=[clusters]).get_delta_for_epsilon(eps)
        return value <= delta

    def local(dummies):
        randomizer = LocalRandomizer(num_targets=targets, sampling_rate=sigma, num_dummies=dummies)
        if pure.local_delta(randomizer, eps_c) <= delta_c:
            return True
        return composed(lambda: pld.local_randomizer_pair(randomizer))

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
        lambda: pld.scrambler_pair(
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
            local = Configuration(countermeasure=LocalFlooding(sampling_rate=sigma, num_dummies=d))
            if brute_force_feasible(request, local):
                configurations.append(local)
                break
        for count in range(1, recruited + 1):  # every K, realized or not
            n = -(-recruited // count)
            if len(balanced_batch_sizes(recruited, n)) != count:
                continue  # K not realized: the same batches as another K
            for d in range(max_dummies + 1):
                configuration = Configuration(
                    countermeasure=Scramblers(sampling_rate=sigma, batch_size=n, num_dummies=d),
                    batch_sizes=balanced_batch_sizes(recruited, n),
                )
                if brute_force_feasible(request, configuration):
                    configurations.append(configuration)
                    break
        for configuration in configurations:
            costs = plan_costs(
                configuration.countermeasure, num_sources=recruited,
                num_targets=request.num_targets, workload=request.workload,
                num_clusters=request.num_clusters,
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
