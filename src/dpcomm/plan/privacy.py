"""Privacy of clusters and of whole plans: the accountant composed by Theorem 2.

* A data-independent cluster, or one with a single potential target, is perfectly private.
* A data-dependent cluster without countermeasure reveals each sender's data: ε = ∞.
* Local sampling + flooding: the accountant's guarantee for R_σ^d (Theorem 1 or exact).
* Scramblers: each scrambler with its n sources is accounted as A_σ^{n,d}; scramblers of one
  cluster see disjoint sources, so the cluster's guarantee is the worst one (parallel
  composition). Sources are cut into balanced batches
  (:func:`dpcomm.plan.costs.balanced_batch_sizes`); every batch size is accounted on its own.
* Plan: for each data item, the sum over the clusters on its data path; the worst item
  (Theorem 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from dpcomm.accounting import (
    LocalRandomizer,
    PrivacyGuarantee,
    ScramblerMechanism,
    account,
    compose_parallel,
    compose_sequential,
)
from dpcomm.accounting._validation import check_delta
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import batch_size_counts
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.plan.model import Cluster, ExecutionPlan
from dpcomm.plan.transform import resolve_countermeasures

STATE_CAVEAT = (
    "clusters {names}: routing also depends on state computed from other sources' data "
    "(K-means centroids); the guarantees bound what the traffic reveals given that state, "
    "which is treated as public output, as in the paper (releasing the result is out of scope)"
)


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
        clusters: every cluster's guarantee.
        guarantee: the worst, over data items, of the sum along the item's data path.
        worst_path: names of the clusters on that worst path.
        delta_per_cluster: the δ each data-dependent cluster was accounted at.
        caveats: conditions under which the numbers hold (empty when unconditional).
    """

    clusters: tuple[ClusterGuarantee, ...]
    guarantee: PrivacyGuarantee
    worst_path: tuple[str, ...]
    delta_per_cluster: float
    caveats: tuple[str, ...]

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
        local = LocalRandomizer(
            num_targets=targets,
            sampling_rate=countermeasure.sampling_rate,
            num_dummies=countermeasure.num_dummies,
        )
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
                guarantee = PrivacyGuarantee(0.0, 0.0, "no-sender")
                return ClusterGuarantee(cluster, countermeasure, (), guarantee)
        for batch, count in sorted(sizes.items(), reverse=True):
            if countermeasure.capped and countermeasure.num_dummies > (targets - 1) * batch:
                raise InvalidParameterError(
                    "num_dummies",
                    f"at most (T − 1)·n = {(targets - 1) * batch} for a capped scrambler of "
                    f"n = {batch} sources in cluster {cluster.name}",
                    countermeasure.num_dummies,
                )
            mechanism = ScramblerMechanism(
                num_targets=targets,
                sampling_rate=countermeasure.sampling_rate,
                batch_size=batch,
                num_dummies=countermeasure.num_dummies,
                capped=countermeasure.capped,
            )
            guarantee, lower = _account_cached(mechanism, delta)
            parts.append(MechanismPart(mechanism, count, guarantee, lower))
    combined = compose_parallel(p.guarantee for p in parts)
    return ClusterGuarantee(cluster, countermeasure, tuple(parts), combined)


def account_plan(
    plan: ExecutionPlan,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float,
    batch_sizes: Mapping[str, Mapping[int, int]] | None = None,
) -> PlanGuarantee:
    """The plan's guarantee (Theorem 2) with every data-dependent cluster at δ = ``delta``.

    Args:
        plan: the execution plan.
        countermeasures: one countermeasure for every data-dependent cluster, or a mapping
            from cluster (or flow) name to countermeasure; clusters not named get none.
        delta: δ of each data-dependent cluster (0 asks for pure ε); the plan's δ is the sum
            along the worst data path.
        batch_sizes: per cluster (or flow) name, the batch sizes the scramblers actually had
            (see :func:`account_cluster`); clusters not named use the planned batches.
    """
    delta = check_delta("delta", delta)
    requested = resolve_countermeasures(plan, countermeasures)
    results: dict[str, ClusterGuarantee] = {}
    for cluster in plan.clusters:
        chosen = requested[cluster.name]
        actual = None
        if batch_sizes is not None:
            actual = batch_sizes.get(cluster.name)
            if actual is None:
                actual = next(
                    (
                        batch_sizes[m.flow.name]
                        for m in cluster.members
                        if m.flow.name in batch_sizes
                    ),
                    None,
                )
        results[cluster.name] = account_cluster(cluster, chosen, delta=delta, batch_sizes=actual)
    worst: PrivacyGuarantee | None = None
    worst_path: tuple[str, ...] = ()
    for path in plan.data_paths().values():
        total = compose_sequential(results[c.name].guarantee for c in path)
        if worst is None or (total.epsilon, total.delta) > (worst.epsilon, worst.delta):
            worst = total
            worst_path = tuple(c.name for c in path)
    if worst is None:
        worst = PrivacyGuarantee(0.0, 0.0, "no data")
    stateful = [
        c.name
        for c in plan.clusters
        if c.data_dependent and c.depends_on_state and c.name in worst_path
    ]
    caveats = (STATE_CAVEAT.format(names=", ".join(stateful)),) if stateful else ()
    methods = sorted({results[name].guarantee.method for name in worst_path})
    plan_guarantee = PrivacyGuarantee(
        worst.epsilon, worst.delta, "theorem-2(" + ",".join(methods) + ")"
    )
    return PlanGuarantee(tuple(results.values()), plan_guarantee, worst_path, delta, caveats)
