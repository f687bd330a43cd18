"""What a configuration costs: sources recruited, utility, network load and channels.

* Utility (Section 2.5): a real tuple is used when its message reaches its true target, with
  probability p = 1 − σ + σ/T, so S_t = ⌈S/p⌉ sources are recruited (extra consents S_t − S;
  the paper writes S/(1 − σ), which ignores the redrawn targets that are the true one). With
  ``max_extra_consents`` c, S_t = min(⌈S/p⌉, S + c) and the expected utility
  min(1, S_t·p/S) must be at least ``min_utility`` u (default 1).
* Costs come from the one cost model (`dpcomm.plan.costs`): the plan of the request is
  built by `dpcomm.plan.builders` for S_t sources and transformed with the candidate
  countermeasure (`dpcomm.plan.transform`); the network load is every message of the
  transformed plan (dummies included, exactly what the engines send), the max channels per node
  the largest of its per-role bounds on distinct peers (reached when every scrambler sends to
  every target); see `plan_costs`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from dpcomm.calibration.request import PlanRequest, Workload
from dpcomm.plan.builders import aggregate_plan, kmeans_flow, kmeans_plan
from dpcomm.plan.costs import delivery_probability, num_scramblers, sources_needed
from dpcomm.plan.countermeasures import Countermeasure, NoCountermeasure
from dpcomm.plan.model import ExecutionPlan
from dpcomm.plan.transform import transform


def recruited_sources(
    *,
    num_sources: int,
    num_targets: int,
    sampling_rate: float,
    max_extra_consents: int | None = None,
) -> int:
    """S_t = ⌈S/p⌉ sources keep the utility in expectation (Sections 3.3, 4.4), at most S + c.

    `dpcomm.plan.costs.sources_needed` (what
    `dpcomm.plan.TransformedPlan.sources_needed` and the engines' extra consents report):
    the paper writes S/(1 − σ); a redrawn target that is the true one also delivers the tuple,
    so ⌈S/(1 − σ + σ/T)⌉ suffices.
    """
    needed = sources_needed(
        tuples=num_sources, sampling_rate=sampling_rate, num_targets=num_targets
    )
    if max_extra_consents is not None:
        needed = min(needed, num_sources + max_extra_consents)
    return needed


def expected_utility(
    *, num_sources: int, num_targets: int, sampling_rate: float, recruited: int
) -> float:
    """Expected tuples used / S: min(1, S_t (1 − σ + σ/T) / S) (Section 2.5)."""
    keep = delivery_probability(sampling_rate=sampling_rate, num_targets=num_targets)
    return min(1.0, recruited * keep / num_sources)


def recruited_for(request: PlanRequest, sampling_rate: float) -> int:
    """S_t for the request at σ, within its consent limit (`recruited_sources`)."""
    return recruited_sources(
        num_sources=request.num_sources,
        num_targets=request.num_targets,
        sampling_rate=sampling_rate,
        max_extra_consents=request.max_extra_consents,
    )


def utility_for(request: PlanRequest, sampling_rate: float, recruited: int) -> float:
    """The request's expected utility at σ with S_t = ``recruited`` (`expected_utility`)."""
    return expected_utility(
        num_sources=request.num_sources,
        num_targets=request.num_targets,
        sampling_rate=sampling_rate,
        recruited=recruited,
    )


def request_plan(
    *,
    workload: Workload,
    num_sources: int,
    num_targets: int,
    num_clusters: int,
    free_clusters: int = 0,
) -> ExecutionPlan:
    """The plan the planner costs, by `dpcomm.plan.builders` (what the queries run).

    Aggregate: G grouping sets of C = T compute nodes each, then ``free_clusters`` grouping
    sets of one compute node (the empty grouping set: data-independent traffic); K-means: I
    iterations with K = T centroids. ``num_sources`` is the number of source nodes (S_t once
    recruited).
    """
    if workload == "aggregate":
        flows = [f"grouping set {index + 1}" for index in range(num_clusters)]
        flows += [f"free grouping set {index + 1}" for index in range(free_clusters)]
        return aggregate_plan(
            num_sources=num_sources,
            flows=flows,
            num_targets=(num_targets,) * num_clusters + (1,) * free_clusters,
        )
    return kmeans_plan(
        num_sources=num_sources, num_centroids=num_targets, num_iterations=num_clusters
    )


def requested_plan(request: PlanRequest, num_sources: int) -> ExecutionPlan:
    """`request_plan` of the request's workload, T, G or I and free grouping sets, on S_t sources.

    ``num_sources``: S_t, the sources a candidate recruits (the request's S or more).
    """
    return request_plan(
        workload=request.workload,
        num_sources=num_sources,
        num_targets=request.num_targets,
        num_clusters=request.num_clusters,
        free_clusters=request.free_clusters,
    )


def _first_flow(workload: Workload) -> str:
    """The data-dependent flow of the first cluster of `request_plan`."""
    return "grouping set 1" if workload == "aggregate" else kmeans_flow(1)


@dataclass(frozen=True)
class PlanCosts:
    """What a configuration costs, read from the transformed plan of the request.

    Attributes:
        messages: every message of the plan, dummies included
            (`dpcomm.plan.TransformedPlan.messages`).
        channels_by_role: upper bound on the secure channels of one node, per role
            (`dpcomm.plan.TransformedPlan.channels_by_role`).
        batch_sizes: the balanced batch sizes of the scramblers of one cluster, largest first
            (None without scramblers).
        num_scramblers: scramblers of the whole plan (every cluster).
    """

    messages: int
    channels_by_role: Mapping[str, int]
    batch_sizes: tuple[int, ...] | None
    num_scramblers: int

    @property
    def max_channels(self) -> int:
        """The largest of `channels_by_role`."""
        return max(self.channels_by_role.values(), default=0)


@lru_cache(maxsize=4096)
def _costs(
    workload: Workload,
    num_clusters: int,
    num_targets: int,
    num_sources: int,
    countermeasure: Countermeasure,
    free_clusters: int = 0,
) -> PlanCosts:
    plan = request_plan(
        workload=workload,
        num_sources=num_sources,
        num_targets=num_targets,
        num_clusters=num_clusters,
        free_clusters=free_clusters,
    )
    transformed = transform(plan, countermeasure)
    return PlanCosts(
        messages=transformed.messages,
        channels_by_role=MappingProxyType(transformed.channels_by_role()),
        batch_sizes=transformed.batches.get(_first_flow(workload)),
        num_scramblers=transformed.num_scramblers(),
    )


def plan_costs(
    countermeasure: Countermeasure,
    *,
    num_sources: int,
    num_targets: int,
    workload: Workload,
    num_clusters: int,
    free_clusters: int = 0,
) -> PlanCosts:
    """The costs of ``countermeasure`` on the plan of the request, from the cost model.

    The plan ([`request_plan`][], ``num_sources`` = S_t) is transformed with the
    countermeasure (`dpcomm.plan.transform`): the messages per routed flow are exact
    (Sections 3.3, 4.4 and 5.1: S_t (d + 1) per local cluster, 2 S_t + K·d through K balanced
    scramblers, the centroids of K-means broadcast back through the scramblers), the channels
    an upper bound derived from the routed flows. ``free_clusters`` grouping sets of one
    compute node are added ([`request_plan`][]). Cached: the search costs many candidates.
    """
    return _costs(workload, num_clusters, num_targets, num_sources, countermeasure, free_clusters)


def costs_for(request: PlanRequest, countermeasure: Countermeasure, num_sources: int) -> PlanCosts:
    """`plan_costs` of ``countermeasure`` on the request's plan of ``num_sources``."""
    return plan_costs(
        countermeasure,
        num_sources=num_sources,
        num_targets=request.num_targets,
        workload=request.workload,
        num_clusters=request.num_clusters,
        free_clusters=request.free_clusters,
    )


def nonprivate_load(
    *,
    num_sources: int,
    num_targets: int,
    workload: Workload,
    num_clusters: int,
    free_clusters: int = 0,
) -> int:
    """Messages of the plan of S sources without countermeasures ([`plan_costs`][])."""
    return plan_costs(
        NoCountermeasure(),
        num_sources=num_sources,
        num_targets=num_targets,
        workload=workload,
        num_clusters=num_clusters,
        free_clusters=free_clusters,
    ).messages


def scrambler_counts(num_sources: int, batch_sizes: Sequence[int] | None = None) -> list[int]:
    """Every number K of scramblers that balanced batches of S_t sources realize, ascending.

    K is realized when K = ⌈S_t/n⌉ for some n (then n = ⌈S_t/K⌉ names the same batches): all
    K ≤ √S_t and the ⌈S_t/n⌉ of n ≤ √S_t, about 2√S_t values. With ``batch_sizes`` (a
    restriction list) only the K of those n ≤ S_t.
    """
    if batch_sizes is not None:
        return sorted({num_scramblers(num_sources, n) for n in batch_sizes if n <= num_sources})
    root = math.isqrt(num_sources) + 1
    counts = {-(-num_sources // n) for n in range(1, root + 1)}
    counts.update(
        k
        for k in range(1, min(root, num_sources) + 1)
        if num_scramblers(num_sources, -(-num_sources // k)) == k
    )
    return sorted(counts)
