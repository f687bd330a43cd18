"""Privacy of clusters and of whole plans: the accountant composed by Theorem 2.

* A data-independent cluster, or one with a single potential target, is perfectly private.
* A data-dependent cluster without countermeasure reveals each sender's data: ε = ∞.
* Local sampling + flooding: the accountant's guarantee for R_σ^d (Theorem 1 or exact).
* Scramblers: each scrambler with its n sources is accounted as A_σ^{n,d}; scramblers of one
  cluster see disjoint sources, so the cluster's guarantee is the worst one (parallel
  composition). Sources are cut into balanced batches
  (`dpcomm.plan.costs.balanced_batch_sizes`); every batch size is accounted on its own.
* Plan: ``delta`` is the whole plan's δ. For each data item, the clusters on its data path
  compose sequentially, two ways, and the smaller ε is reported (both are valid):
  basic composition (Theorem 2: each of the k accounted clusters of the longest path at δ/k,
  the ε add up), and the composition of the clusters' dominating pairs as privacy loss
  distributions (`dpcomm.accounting.pld`, beyond the paper), at the whole δ. Within a
  cluster the scramblers see disjoint sources (parallel composition): the smallest batch's pair
  dominates every batch of the cluster (the pair for n + 1 sources is a post-processing of the
  pair for n). The worst item gives the plan's guarantee; a certified lower bound composes
  explicit neighbouring pairs along that path.
* A plan without data item (a table without rows: no source) is (0, 0), method ``no-data``:
  neighbouring tables differ in one row replaced and have as many rows, so the table without
  rows has no neighbour; every cluster sends nothing (``no-sender``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeGuard

from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

from dpcomm.accounting import (
    LocalRandomizer,
    PrivacyGuarantee,
    ScramblerMechanism,
    account,
    compose_parallel,
    compose_sequential,
    pld,
)
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import batch_size_counts
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.plan.mechanisms import countermeasure_mechanism
from dpcomm.plan.model import Cluster, ExecutionPlan
from dpcomm.plan.transform import resolve_countermeasures
from dpcomm.validation import check_delta

#: The method of a plan without data item: a table without rows has no neighbouring table.
NO_DATA = "no-data"
#: The method of a cluster that sends nothing (no source, or no source that reached it).
NO_SENDER = "no-sender"

STATE_CAVEAT = (
    "clusters {names}: routing also depends on state computed from other sources' data "
    "(K-means centroids); the guarantees bound what the traffic reveals given that state, "
    "which is treated as public output, as in the paper (releasing the result is out of scope)"
)


#: Every data path's accounted mechanisms with their counts (`PlanGuarantee.path_mechanisms`).
PathMechanisms = tuple[tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...] | None, ...]


@dataclass(frozen=True)
class MechanismPart:
    """One accounted mechanism inside a cluster.

    Attributes:
        mechanism: the accountant's description (None for the trivial cases).
        num_instances: how many scramblers (or sources) run it.
        guarantee: its guarantee.
        lower_bound: a certified lower bound on its ε (None if unavailable).
    """

    mechanism: LocalRandomizer | ScramblerMechanism | None
    num_instances: int
    guarantee: PrivacyGuarantee
    lower_bound: float | None


@dataclass(frozen=True)
class ClusterGuarantee:
    """The guarantee of one cluster under its countermeasure."""

    cluster: Cluster
    countermeasure: Countermeasure
    parts: tuple[MechanismPart, ...]
    guarantee: PrivacyGuarantee


@dataclass(frozen=True)
class PlanGuarantee:
    """The plan-level guarantee of Theorem 2 and the per-cluster guarantees behind it.

    Attributes:
        clusters: every cluster's guarantee (each at ``delta_per_cluster``).
        guarantee: the worst, over data items, of the composition along the item's data path:
            the smaller of ``pld_epsilon`` and ``basic_epsilon`` on that path, at the plan's δ.
        worst_path: names of the clusters on that worst path.
        delta_per_cluster: δ/k, the δ each data-dependent cluster was accounted at for basic
            composition (k: the most accounted clusters on one data path).
        caveats: conditions under which the numbers hold (empty when unconditional).
        basic_epsilon: Theorem 2 on the worst path: the sum of its clusters' ε at δ/k.
        pld_epsilon: the PLD composition on the worst path at δ (None where not available).
        lower_bound: a certified lower bound on the worst path's ε at δ (None if unavailable).
        notes: why a composition or bound is missing.
        path_mechanisms: every data path's accounted mechanisms with their counts (None for
            a path whose clusters lack one, e.g. without countermeasure), to compose further
            mechanisms with the traffic (`paths_with`).
    """

    clusters: tuple[ClusterGuarantee, ...]
    guarantee: PrivacyGuarantee
    worst_path: tuple[str, ...]
    delta_per_cluster: float
    caveats: tuple[str, ...]
    basic_epsilon: float = math.inf
    pld_epsilon: float | None = None
    lower_bound: float | None = None
    notes: tuple[str, ...] = ()
    path_mechanisms: PathMechanisms = ()

    def cluster(self, name: str) -> ClusterGuarantee:
        """The guarantee of the cluster called ``name`` (or sending flow ``name``)."""
        for item in self.clusters:
            cluster = item.cluster
            if cluster.name == name or any(m.flow.name == name for m in cluster.members):
                return item
        raise InvalidParameterError(
            "cluster", f"one of {', '.join(c.cluster.name for c in self.clusters)}", name
        )


@lru_cache(maxsize=256)
def _account_cached(
    mechanism: LocalRandomizer | ScramblerMechanism, delta: float
) -> tuple[PrivacyGuarantee, float | None]:
    report = account(mechanism, delta=delta, monte_carlo_samples=0)
    return report.guarantee, report.lower_bound


def account_cluster(
    cluster: Cluster,
    countermeasure: Countermeasure,
    *,
    delta: float,
    batch_sizes: Mapping[int, int] | None = None,
) -> ClusterGuarantee:
    """The (ε, δ) of one cluster under ``countermeasure`` at the per-cluster δ.

    ``batch_sizes`` (batch size → number of scramblers) replaces the planned cut of the
    cluster's senders into batches of n, for scramblers that actually batched fewer sources
    (a deployment where some sources missed the deadline): each size is accounted as run.
    """
    delta = check_delta("delta", delta)
    if not cluster.data_dependent:
        guarantee = PrivacyGuarantee(0.0, 0.0, "data-independent")
        return ClusterGuarantee(cluster, countermeasure, (), guarantee)
    if cluster.num_targets == 1:
        guarantee = PrivacyGuarantee(0.0, 0.0, "single-target")
        return ClusterGuarantee(cluster, countermeasure, (), guarantee)
    if not cluster.num_senders:  # a table without rows: nothing is sent
        guarantee = PrivacyGuarantee(0.0, 0.0, NO_SENDER)
        return ClusterGuarantee(cluster, countermeasure, (), guarantee)
    targets = cluster.num_targets
    if isinstance(countermeasure, NoCountermeasure):
        guarantee = PrivacyGuarantee(math.inf, delta, "none")
        return ClusterGuarantee(cluster, countermeasure, (), guarantee)
    parts: list[MechanismPart] = []
    if isinstance(countermeasure, LocalFlooding):
        if countermeasure.num_dummies > targets - 1:
            raise InvalidParameterError(
                "num_dummies",
                f"at most T − 1 = {targets - 1} flooding dummies for cluster {cluster.name}",
                countermeasure.num_dummies,
            )
        local = countermeasure_mechanism(countermeasure, targets)
        guarantee, lower = _account_cached(local, delta)
        parts.append(MechanismPart(local, cluster.num_senders, guarantee, lower))
    else:
        assert isinstance(countermeasure, Scramblers)
        if batch_sizes is None:
            # Every member flow has its own scramblers, cut into balanced batches.
            sizes: dict[int, int] = {}
            for member in cluster.members:
                for size, count in batch_size_counts(
                    member.group.count, countermeasure.batch_size
                ).items():
                    sizes[size] = sizes.get(size, 0) + count
        else:
            sizes = {size: count for size, count in batch_sizes.items() if size > 0 and count > 0}
            if not sizes:
                guarantee = PrivacyGuarantee(0.0, 0.0, NO_SENDER)
                return ClusterGuarantee(cluster, countermeasure, (), guarantee)
        for batch, count in sorted(sizes.items(), reverse=True):
            if countermeasure.capped and countermeasure.num_dummies > (targets - 1) * batch:
                raise InvalidParameterError(
                    "num_dummies",
                    f"at most (T − 1)·n = {(targets - 1) * batch} for a capped scrambler of "
                    f"n = {batch} sources in cluster {cluster.name}",
                    countermeasure.num_dummies,
                )
            mechanism = countermeasure_mechanism(countermeasure, targets, batch_size=batch)
            guarantee, lower = _account_cached(mechanism, delta)
            parts.append(MechanismPart(mechanism, count, guarantee, lower))
    combined = compose_parallel(p.guarantee for p in parts)
    return ClusterGuarantee(cluster, countermeasure, tuple(parts), combined)


def _accounted(cluster: Cluster) -> bool:
    """Whether a cluster's guarantee can be other than (0, 0)."""
    return cluster.data_dependent and cluster.num_targets > 1


def _path_mechanisms(
    path: tuple[Cluster, ...], results: Mapping[str, ClusterGuarantee]
) -> list[LocalRandomizer | ScramblerMechanism] | None:
    """The mechanism whose pair dominates each accounted cluster of ``path``.

    None when a cluster has ε = ∞ without a mechanism (no countermeasure). For scramblers the
    smallest batch (its pair dominates the larger batches'); clusters without senders skipped.
    """
    mechanisms: list[LocalRandomizer | ScramblerMechanism] = []
    for cluster in path:
        result = results[cluster.name]
        if not _accounted(cluster) or result.guarantee.method == NO_SENDER:
            continue
        parts = [p.mechanism for p in result.parts if p.mechanism is not None]
        if not parts:
            return None
        if isinstance(parts[0], ScramblerMechanism):
            mechanisms.append(min(parts, key=lambda m: getattr(m, "batch_size", 0)))
        else:
            mechanisms.append(parts[0])
    return mechanisms


def _counted(
    mechanisms: list[LocalRandomizer | ScramblerMechanism],
) -> tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...]:
    counts: dict[LocalRandomizer | ScramblerMechanism, int] = {}
    for mechanism in mechanisms:
        counts[mechanism] = counts.get(mechanism, 0) + 1
    return tuple(sorted(counts.items(), key=repr))


def _row_cached(mechanism: LocalRandomizer | ScramblerMechanism) -> TypeGuard[ScramblerMechanism]:
    """Whether the mechanism's PLD is built from cached rows (`pld.scrambler_pld`)."""
    return isinstance(mechanism, ScramblerMechanism) and not mechanism.capped


def _mechanism_pld(mechanism: LocalRandomizer | ScramblerMechanism) -> PrivacyLossDistribution:
    """The pessimistic PLD of the mechanism's dominating pair (row-cached for scramblers)."""
    if _row_cached(mechanism):
        return pld.scrambler_pld(mechanism)
    return pld.dominating_pair(mechanism).pld()


@lru_cache(maxsize=256)
def _pld_epsilon(
    counted: tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...], delta: float
) -> float:
    """ε at δ of the composition of the mechanisms' dominating pairs (PairUnavailableError).

    A scrambler's output is also a post-processing of its sources' R_σ, whose pair (three
    atoms) is composed too; the smaller ε of the two valid compositions is returned (they
    differ only where Lemma 2's pair gains nothing over R_σ, by its rounding allowances).
    """
    counts = [c for _, c in counted]
    if any(_row_cached(m) for m, _ in counted):
        composed = pld.compose([_mechanism_pld(m) for m, _ in counted], counts=counts)
    else:  # explicit pairs (R_σ's three atoms): sparse where that is cheaper
        composed = pld.compose_pairs([pld.dominating_pair(m) for m, _ in counted], counts=counts)
    best = pld.epsilon_for_delta(composed, delta)
    if any(isinstance(m, ScramblerMechanism) for m, _ in counted):
        local = [
            pld.dominating_pair(m.local_randomizer if isinstance(m, ScramblerMechanism) else m)
            for m, _ in counted
        ]
        best = min(best, pld.epsilon_for_delta(pld.compose_pairs(local, counts=counts), delta))
    return best


@lru_cache(maxsize=256)
def _lower_epsilon(
    counted: tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...], delta: float
) -> float | None:
    """A certified lower bound: explicit neighbouring pairs composed along the path.

    Each cluster's data can be chosen on its own (the differing source's target in every
    cluster, the others' targets per cluster), so any choice of one explicit pair per cluster
    is a pair of neighbouring inputs of the whole plan; clusters without an explicit pair are
    left out (dropping their traffic is a post-processing). Pair families are tried in turn.
    """
    families = [(m, c, pld.lower_bound_pairs(m)) for m, c in counted]
    families = [(m, c, pairs) for m, c, pairs in families if pairs]
    if not families:
        return None
    best: float | None = None
    for index in range(max(len(pairs) for _, _, pairs in families)):
        chosen = [pairs[min(index, len(pairs) - 1)] for _, _, pairs in families]
        composed = pld.compose_pairs(chosen, counts=[c for _, c, _ in families], pessimistic=False)
        value = pld.lower_epsilon_for_delta(composed, delta)
        best = value if best is None else max(best, value)
    return best


def _actual_batches(
    cluster: Cluster, batch_sizes: Mapping[str, Mapping[int, int]] | None
) -> Mapping[int, int] | None:
    """The batch sizes ``cluster``'s scramblers had: by its name, else by a member flow's."""
    if batch_sizes is None:
        return None
    actual = batch_sizes.get(cluster.name)
    if actual is None:
        actual = next(
            (batch_sizes[m.flow.name] for m in cluster.members if m.flow.name in batch_sizes),
            None,
        )
    return actual


@dataclass(frozen=True)
class _WorstPath:
    """The data path of the largest (ε, δ), and what the composition learnt on the way.

    Attributes:
        names: its clusters' names (empty for a plan without data path).
        basic: Theorem 2 on it (each cluster at δ/k).
        pld_epsilon: the PLD composition on it at δ (None where not available).
        counted: its accounted mechanisms with their counts (None without countermeasure).
        notes: why the PLD composition was not used on a path.
        every_path: every path's accounted mechanisms with their counts.
    """

    names: tuple[str, ...]
    basic: PrivacyGuarantee
    pld_epsilon: float | None
    counted: tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...] | None
    notes: tuple[str, ...]
    every_path: PathMechanisms


def _worst_path(
    paths: Mapping[tuple[str, ...], tuple[Cluster, ...]],
    results: Mapping[str, ClusterGuarantee],
    *,
    delta: float,
    compose_pld: bool,
) -> _WorstPath:
    """Each data path composed both ways (basic, and PLD when asked); the worst path."""
    notes: list[str] = []
    worst: tuple[float, float] | None = None
    worst_path: tuple[str, ...] = ()
    worst_basic = PrivacyGuarantee(0.0, 0.0, NO_DATA)
    worst_pld: float | None = None
    worst_counted: tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...] | None = None
    every_path: list[tuple[tuple[LocalRandomizer | ScramblerMechanism, int], ...] | None] = []
    for names, path in paths.items():
        basic = compose_sequential(results[c.name].guarantee for c in path)
        composed: float | None = None
        mechanisms = _path_mechanisms(path, results)
        counted = None if mechanisms is None else _counted(mechanisms)
        every_path.append(counted)
        if compose_pld and delta > 0.0 and counted and len(mechanisms or ()) > 1:
            try:
                composed = _pld_epsilon(counted, delta)
            except pld.PairUnavailableError as error:
                notes.append(f"PLD composition not used on path {', '.join(names)}: {error}")
        epsilon = basic.epsilon if composed is None else min(basic.epsilon, composed)
        key = (epsilon, basic.delta)
        if worst is None or key > worst:
            worst, worst_path, worst_basic, worst_pld = key, names, basic, composed
            worst_counted = counted
    return _WorstPath(
        worst_path, worst_basic, worst_pld, worst_counted, tuple(notes), tuple(every_path)
    )


def _worst_lower_bound(
    worst: _WorstPath,
    results: Mapping[str, ClusterGuarantee],
    *,
    delta: float,
    compose_pld: bool,
) -> float | None:
    """A certified lower bound on the worst path's ε at δ (None if unavailable)."""
    if math.isinf(worst.basic.epsilon) and worst.counted is None:
        return math.inf  # a data-dependent cluster without countermeasure reveals the data
    if not (compose_pld and worst.counted):
        return None
    if delta == 0.0:
        parts = [
            p.lower_bound
            for name in worst.names
            for p in results[name].parts[-1:]  # the smallest batch
        ]
        return math.fsum(p for p in parts if p is not None) if parts else None
    return _lower_epsilon(worst.counted, delta)


def account_plan(
    plan: ExecutionPlan,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float,
    batch_sizes: Mapping[str, Mapping[int, int]] | None = None,
    compose_pld: bool = True,
) -> PlanGuarantee:
    """The plan's guarantee at the whole plan's δ (module doc: basic and PLD composition).

    Args:
        plan: the execution plan.
        countermeasures: one countermeasure for every data-dependent cluster, or a mapping
            from cluster (or flow) name to countermeasure; clusters not named get none.
        delta: the whole plan's δ (0 asks for pure ε, which adds up exactly).
        batch_sizes: per cluster (or flow) name, the batch sizes the scramblers actually had
            (see `account_cluster`); clusters not named use the planned batches.
        compose_pld: also compose the dominating pairs' PLDs and certify a lower bound (False:
            basic composition only, for callers that only compare clusters).
    """
    delta = check_delta("delta", delta)
    requested = resolve_countermeasures(plan, countermeasures)
    paths = {tuple(c.name for c in path): path for path in plan.data_paths().values()}
    longest = max((sum(1 for c in p if _accounted(c)) for p in paths.values()), default=0)
    delta_per_cluster = delta / max(longest, 1)
    results: dict[str, ClusterGuarantee] = {}
    for cluster in plan.clusters:
        results[cluster.name] = account_cluster(
            cluster,
            requested[cluster.name],
            delta=delta_per_cluster,
            batch_sizes=_actual_batches(cluster, batch_sizes),
        )
    worst = _worst_path(paths, results, delta=delta, compose_pld=compose_pld)
    worst_basic, worst_pld = worst.basic, worst.pld_epsilon
    epsilon = worst_basic.epsilon if worst_pld is None else min(worst_basic.epsilon, worst_pld)
    lower = _worst_lower_bound(worst, results, delta=delta, compose_pld=compose_pld)
    stateful = [
        c.name
        for c in plan.clusters
        if c.data_dependent and c.depends_on_state and c.name in worst.names
    ]
    caveats = (STATE_CAVEAT.format(names=", ".join(stateful)),) if stateful else ()
    methods = ",".join(sorted({results[name].guarantee.method for name in worst.names}))
    if not worst.names:  # no data item (a table without rows): no neighbouring table
        plan_guarantee = worst_basic
    elif worst_pld is not None and worst_pld < worst_basic.epsilon:
        plan_guarantee = PrivacyGuarantee(epsilon, delta, f"pld({methods})")
    else:
        plan_guarantee = PrivacyGuarantee(
            worst_basic.epsilon, worst_basic.delta, "theorem-2(" + methods + ")"
        )
    return PlanGuarantee(
        tuple(results.values()),
        plan_guarantee,
        worst.names,
        delta_per_cluster,
        caveats,
        basic_epsilon=worst_basic.epsilon,
        pld_epsilon=worst_pld,
        lower_bound=lower,
        notes=worst.notes,
        path_mechanisms=worst.every_path,
    )


def paths_with(
    path_mechanisms: PathMechanisms, extra: PrivacyLossDistribution, delta: float
) -> float | None:
    """ε at ``delta`` of the traffic of ``path_mechanisms`` composed with the PLD ``extra``.

    The worst over data paths of the path's dominating pairs composed with ``extra`` (every
    source's data is read by both: the release reads every row); None when a path has no
    pair to compose (no countermeasure) or a pair is unavailable.
    """
    if not path_mechanisms:
        return None
    worst = 0.0
    for counted in path_mechanisms:
        if counted is None:
            return None
        try:
            plds = [_mechanism_pld(m) for m, _ in counted]
        except pld.PairUnavailableError:
            return None
        counts = [c for _, c in counted]
        composed = pld.compose([*plds, extra], counts=[*counts, 1])
        worst = max(worst, pld.epsilon_for_delta(composed, delta))
    return worst
