"""The planner: the cheapest countermeasure that meets a privacy target under limits (issue #4).

Semantics (paper, Sections 2.5, 3.3, 4.4 and 5):

* ``num_sources`` S is the number of real tuples the computation must use (the paper's
  "fixing the number of tuples effectively used to 10k", Section 5.2).
* The plan has G grouping sets (Aggregate) or I iterations (K-means): G (or I) identical
  data-dependent clusters, each with T targets (the C = T compute nodes of a grouping set, or
  the K = T centroids of an iteration).
* A configuration is local sampling + flooding (σ, d ≤ T − 1, Section 3) or uncapped
  scramblers (σ, n, d, Section 4): ⌈S_t/n⌉ scramblers with balanced batches, whose sizes
  differ by at most one and are at most n (:func:`dpcomm.plan.costs.balanced_batch_sizes`).
* Utility (Section 2.5): a real tuple is used when its message reaches its true target, with
  probability p = 1 − σ + σ/T, so S_t = ⌈S/p⌉ sources are recruited (extra consents S_t − S;
  the paper writes S/(1 − σ), which ignores the redrawn targets that are the true one). With
  ``max_extra_consents`` c, S_t = min(⌈S/p⌉, S + c) and the expected utility
  min(1, S_t·p/S) must be at least ``min_utility`` u (default 1).
* Privacy (Theorem 2): along a data path the G clusters compose, ε = G·ε_c and δ = G·δ_c, so
  every cluster must reach ε_c = ε/G at δ_c = δ/G. Clusters are checked with the exact valid
  accounting the accountant reports: Lemma 2 evaluated exactly (``ExactLemma2``) or
  post-processing of R_σ for scramblers, every balanced batch size (as
  :func:`dpcomm.plan.account_plan` does); the exact δ(ε) of R_σ^d (``pure.local_delta``) for
  the local randomizer. The check is made at ε_c − 10⁻⁶ so that the accountant's bisection
  (tolerance 10⁻⁶) reports at most ε_c. The reported ε of the chosen configuration is
  :func:`dpcomm.plan.account_plan`'s on the plan of S_t sources: what ``dpcomm run`` reports
  for that configuration on a table of S_t rows.
* Costs come from the one cost model (:mod:`dpcomm.plan.costs`): the plan of the request is
  built by :mod:`dpcomm.plan.builders` for S_t sources and transformed with the candidate
  countermeasure (:func:`dpcomm.plan.transform`); the network load is every message of the
  transformed plan (dummies included, exactly what the engines send), the max channels per node
  the largest of its per-role bounds on distinct peers (reached when every scrambler sends to
  every target); see :func:`plan_costs`.

Search: for each mechanism, σ on a grid and, for scramblers, n on a grid, the minimal d that
reaches the cluster target (δ is non-increasing in d: g(N) = E[Σ_{i≤N} L_i]_+/N is
non-increasing, App. E; the search brackets by galloping and bisects, so d passes and d − 1
fails; the chosen configuration is checked again with ``ExactLemma2`` itself). A candidate is
feasible when it meets the privacy target and the limits. The answer is the feasible candidate
of minimal network load (ties: fewer channels, then fewer consents); the Pareto front over
(network load, max channels, extra consents) of every feasible candidate is returned with it.
This goes beyond the paper, which explores the trade-offs by plotting them (Section 5.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import numpy as np

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, pure
from dpcomm.accounting._validation import check_int
from dpcomm.accounting.exact import ExactLemma2, Lemma2AtEpsilon, SizeTable
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.experiments._common import with_progress
from dpcomm.plan.builders import aggregate_plan, kmeans_flow, kmeans_plan
from dpcomm.plan.costs import (
    balanced_batch_sizes,
    batch_size_counts,
    delivery_probability,
    sources_needed,
)
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.plan.model import ExecutionPlan
from dpcomm.plan.privacy import account_plan
from dpcomm.plan.transform import transform

Mechanism = Literal["scrambler", "local"]
Workload = Literal["aggregate", "kmeans"]

#: σ grid of the search (the paper's Table 1 lets σ range over [0, 1]; σ = 1 uses 1/T).
DEFAULT_SAMPLING_RATES: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(20))
#: Batch sizes n tried: log-spaced from 10 to 1000 (Table 1: n in 10-600), see
#: :func:`default_batch_sizes`.
DEFAULT_BATCH_RANGE = (10, 1000)
DEFAULT_BATCH_STEPS = 16
#: Largest d tried per scrambler (Table 1 goes to 1000).
DEFAULT_MAX_DUMMIES = 20_000
#: The accountant inverts δ(ε) by bisection to this tolerance; the planner checks ε_c minus it.
EPSILON_MARGIN = 1e-6
_UTILITY_TOLERANCE = 1e-12


@dataclass(frozen=True, kw_only=True)
class Configuration:
    """A countermeasure for every data-dependent cluster of the plan.

    Attributes:
        mechanism: ``"scrambler"`` (uncapped scramblers, Section 4) or ``"local"`` (sampling +
            flooding, Section 3).
        sampling_rate: σ.
        num_dummies: d, per scrambler or per source (local).
        batch_size: n, the most sources per scrambler (None for local).
        batch_sizes: the balanced batch sizes of the scramblers of one cluster, largest first
            (:func:`dpcomm.plan.costs.balanced_batch_sizes` of S_t and n; None for local).
    """

    mechanism: Mechanism
    sampling_rate: float
    num_dummies: int
    batch_size: int | None = None
    batch_sizes: tuple[int, ...] | None = None

    @property
    def num_scramblers(self) -> int | None:
        """⌈S_t/n⌉ scramblers per cluster (None for local)."""
        return None if self.batch_sizes is None else len(self.batch_sizes)

    def countermeasure(self) -> Countermeasure:
        """The :mod:`dpcomm.plan` countermeasure of this configuration."""
        if self.mechanism == "local":
            return LocalFlooding(sampling_rate=self.sampling_rate, num_dummies=self.num_dummies)
        if self.batch_size is None:
            raise InvalidParameterError("batch_size", "a batch size n >= 1 for scramblers", None)
        return Scramblers(
            sampling_rate=self.sampling_rate,
            batch_size=self.batch_size,
            num_dummies=self.num_dummies,
        )

    def describe(self) -> str:
        """One line for reports."""
        if self.mechanism == "local":
            return f"local sampling σ={self.sampling_rate:g}, flooding d={self.num_dummies}"
        return (
            f"{self.num_scramblers} scramblers of n={self.batch_size}, d={self.num_dummies} "
            f"dummies each, sampling σ={self.sampling_rate:g}"
        )


def describe_batches(batch_sizes: Sequence[int]) -> str:
    """``"124 scramblers: 70 of 100 sources, 54 of 99"`` (``"10 scramblers of 100 sources"``)."""
    counts: dict[int, int] = {}
    for size in batch_sizes:
        counts[size] = counts.get(size, 0) + 1
    total = len(batch_sizes)
    noun = "scrambler" if total == 1 else "scramblers"
    if not counts:
        return "no scrambler"
    if len(counts) == 1:
        return f"{total:,} {noun} of {batch_sizes[0]:,} sources"
    parts = [
        f"{count:,} of {size:,}" + (" sources" if index == 0 else "")
        for index, (size, count) in enumerate(sorted(counts.items(), reverse=True))
    ]
    return f"{total:,} {noun}: " + ", ".join(parts)


@dataclass(frozen=True, kw_only=True)
class PlanCandidate:
    """One feasible configuration with its guarantee and costs.

    Attributes:
        configuration: the countermeasure.
        num_sources: S_t, sources recruited.
        epsilon: the plan's ε (Theorem 2: G × the cluster's ε at δ_c): the accountant's value
            for the chosen configuration, the target ε it was checked against otherwise.
        delta: the plan's δ (G × δ_c).
        network_load_messages: every message of the transformed plan (:func:`plan_costs`).
        max_channels_per_node: the largest number of secure channels of a node (upper bound).
        extra_consents: S_t − S.
        utility: expected tuples used / S, min(1, S_t (1 − σ + σ/T) / S).
    """

    configuration: Configuration
    num_sources: int
    epsilon: float
    delta: float
    network_load_messages: int
    max_channels_per_node: int
    extra_consents: int
    utility: float

    @property
    def costs(self) -> tuple[int, int, int]:
        """(network load, max channels, extra consents): the objectives of the Pareto front."""
        return (self.network_load_messages, self.max_channels_per_node, self.extra_consents)


@dataclass(frozen=True, kw_only=True)
class PlannerResult:
    """The planner's answer: the cheapest feasible configuration and the Pareto front.

    Attributes:
        configuration: the chosen countermeasure (its balanced batch sizes included).
        epsilon: the plan's ε (Theorem 2), as :func:`dpcomm.plan.account_plan` reports it for
            the plan of S_t sources.
        delta: the plan's δ.
        network_load_messages: messages of the plan.
        max_channels_per_node: largest number of channels of a node.
        extra_consents: S_t − S.
        utility: expected tuples used / S.
        pareto: non-dominated feasible candidates over (load, channels, consents), by load;
            the chosen configuration is the first.
        num_sources: S_t, sources recruited.
        nonprivate_load_messages: messages of the plan without countermeasures (S sources).
        num_candidates: candidates meeting the privacy target (before the channel limit).
        channels_by_role: the bound on the channels of one node, per role, of the chosen
            configuration (:meth:`dpcomm.plan.TransformedPlan.channels_by_role`).
        request: what was asked for.
    """

    configuration: Configuration
    epsilon: float
    delta: float
    network_load_messages: int
    max_channels_per_node: int
    extra_consents: int
    utility: float
    pareto: tuple[PlanCandidate, ...]
    num_sources: int = 0
    nonprivate_load_messages: int = 0
    num_candidates: int = 0
    channels_by_role: Mapping[str, int] = field(default_factory=dict)
    request: PlanRequest | None = None


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """What the plan must achieve (validated).

    Attributes:
        num_sources: S, real tuples the computation must use (>= 1).
        num_targets: T, targets per cluster (>= 2).
        workload: ``"aggregate"`` (G grouping sets) or ``"kmeans"`` (I iterations).
        num_clusters: G or I (>= 1).
        epsilon: the plan's ε (> 0).
        delta: the plan's δ in (0, 1).
        max_channels: limit on channels per node (None: no limit).
        max_extra_consents: limit c on S_t − S (None: no limit).
        min_utility: u in (0, 1], the least expected tuples used / S.
    """

    num_sources: int
    num_targets: int
    workload: Workload
    num_clusters: int
    epsilon: float
    delta: float
    max_channels: int | None = None
    max_extra_consents: int | None = None
    min_utility: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "num_sources", check_int("num_sources S", self.num_sources, minimum=1)
        )
        object.__setattr__(
            self, "num_targets", check_int("num_targets T", self.num_targets, minimum=2)
        )
        if self.workload not in ("aggregate", "kmeans"):
            raise InvalidParameterError("workload", "'aggregate' or 'kmeans'", self.workload)
        name = "grouping_sets G" if self.workload == "aggregate" else "iterations I"
        object.__setattr__(self, "num_clusters", check_int(name, self.num_clusters, minimum=1))
        object.__setattr__(self, "epsilon", _positive("epsilon", self.epsilon))
        delta = _real("delta", self.delta, "a number in (0, 1)")
        if not 0.0 < delta < 1.0:
            raise InvalidParameterError("delta", "a number in (0, 1)", self.delta)
        object.__setattr__(self, "delta", delta)
        if self.max_channels is not None:
            object.__setattr__(
                self, "max_channels", check_int("max_channels", self.max_channels, minimum=1)
            )
        if self.max_extra_consents is not None:
            object.__setattr__(
                self,
                "max_extra_consents",
                check_int("max_extra_consents", self.max_extra_consents, minimum=0),
            )
        utility = _real("min_utility", self.min_utility, "a number in (0, 1]")
        if not 0.0 < utility <= 1.0:
            raise InvalidParameterError("min_utility", "a number in (0, 1]", self.min_utility)
        object.__setattr__(self, "min_utility", utility)

    @property
    def cluster_epsilon(self) -> float:
        """ε_c = ε/G (Theorem 2)."""
        return self.epsilon / self.num_clusters

    @property
    def cluster_delta(self) -> float:
        """δ_c = δ/G (Theorem 2)."""
        return self.delta / self.num_clusters


def _real(name: str, value: object, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(name, allowed, value)
    as_float = float(value)
    if not math.isfinite(as_float):
        raise InvalidParameterError(name, allowed, value)
    return as_float


def _positive(name: str, value: object) -> float:
    as_float = _real(name, value, "a finite number > 0")
    if as_float <= 0.0:
        raise InvalidParameterError(name, "a finite number > 0", value)
    return as_float


# --- Utility and costs, from the one cost model (dpcomm.plan.costs, dpcomm.plan.transform) ------


def recruited_sources(
    *,
    num_sources: int,
    num_targets: int,
    sampling_rate: float,
    max_extra_consents: int | None = None,
) -> int:
    """S_t = ⌈S/p⌉ sources keep the utility in expectation (Sections 3.3, 4.4), at most S + c.

    :func:`dpcomm.plan.costs.sources_needed` (what
    :meth:`dpcomm.plan.TransformedPlan.sources_needed` and the engines' extra consents report):
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


def _recruited(request: PlanRequest, sampling_rate: float) -> int:
    """S_t for the request at σ, within its consent limit (:func:`recruited_sources`)."""
    return recruited_sources(
        num_sources=request.num_sources,
        num_targets=request.num_targets,
        sampling_rate=sampling_rate,
        max_extra_consents=request.max_extra_consents,
    )


def _utility(request: PlanRequest, sampling_rate: float, recruited: int) -> float:
    """The request's expected utility at σ with S_t = ``recruited`` (:func:`expected_utility`)."""
    return expected_utility(
        num_sources=request.num_sources,
        num_targets=request.num_targets,
        sampling_rate=sampling_rate,
        recruited=recruited,
    )


def request_plan(
    *, workload: Workload, num_sources: int, num_targets: int, num_clusters: int
) -> ExecutionPlan:
    """The plan the planner costs, by :mod:`dpcomm.plan.builders` (what the queries run).

    Aggregate: G grouping sets of C = T compute nodes each; K-means: I iterations with K = T
    centroids. ``num_sources`` is the number of source nodes (S_t once recruited).
    """
    if workload == "aggregate":
        return aggregate_plan(
            num_sources=num_sources,
            flows=tuple(f"grouping set {index + 1}" for index in range(num_clusters)),
            compute_nodes=(num_targets,) * num_clusters,
        )
    return kmeans_plan(
        num_sources=num_sources, num_centroids=num_targets, num_iterations=num_clusters
    )


def _first_flow(workload: Workload) -> str:
    """The data-dependent flow of the first cluster of :func:`request_plan`."""
    return "grouping set 1" if workload == "aggregate" else kmeans_flow(1)


@dataclass(frozen=True)
class PlanCosts:
    """What a configuration costs, read from the transformed plan of the request.

    Attributes:
        messages: every message of the plan, dummies included
            (:attr:`dpcomm.plan.TransformedPlan.messages`).
        channels_by_role: upper bound on the secure channels of one node, per role
            (:meth:`dpcomm.plan.TransformedPlan.channels_by_role`).
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
        """The largest of :attr:`channels_by_role`."""
        return max(self.channels_by_role.values(), default=0)


@lru_cache(maxsize=4096)
def _costs(
    workload: Workload,
    num_clusters: int,
    num_targets: int,
    num_sources: int,
    countermeasure: Countermeasure,
) -> PlanCosts:
    plan = request_plan(
        workload=workload,
        num_sources=num_sources,
        num_targets=num_targets,
        num_clusters=num_clusters,
    )
    transformed = transform(plan, countermeasure)
    return PlanCosts(
        messages=transformed.messages,
        channels_by_role=MappingProxyType(transformed.channels_by_role()),
        batch_sizes=transformed.batches.get(_first_flow(workload)),
        num_scramblers=transformed.num_scramblers(),
    )


def plan_costs(
    countermeasure: Configuration | Countermeasure,
    *,
    num_sources: int,
    num_targets: int,
    workload: Workload,
    num_clusters: int,
) -> PlanCosts:
    """The costs of ``countermeasure`` on the plan of the request, from the cost model.

    The plan (:func:`request_plan`, ``num_sources`` = S_t) is transformed with the
    countermeasure (:func:`dpcomm.plan.transform`): the messages per routed flow are exact
    (Sections 3.3, 4.4 and 5.1: S_t (d + 1) per local cluster, 2 S_t + K·d through K balanced
    scramblers, the centroids of K-means broadcast back through the scramblers), the channels
    an upper bound derived from the routed flows. Cached: the search costs many candidates.
    """
    if isinstance(countermeasure, Configuration):
        countermeasure = countermeasure.countermeasure()
    return _costs(workload, num_clusters, num_targets, num_sources, countermeasure)


def _request_costs(
    request: PlanRequest, countermeasure: Configuration | Countermeasure, num_sources: int
) -> PlanCosts:
    """:func:`plan_costs` of ``countermeasure`` on the request's plan of ``num_sources``."""
    return plan_costs(
        countermeasure,
        num_sources=num_sources,
        num_targets=request.num_targets,
        workload=request.workload,
        num_clusters=request.num_clusters,
    )


def nonprivate_load(
    *, num_sources: int, num_targets: int, workload: Workload, num_clusters: int
) -> int:
    """Messages of the plan of S sources without countermeasures (:func:`plan_costs`)."""
    return plan_costs(
        NoCountermeasure(),
        num_sources=num_sources,
        num_targets=num_targets,
        workload=workload,
        num_clusters=num_clusters,
    ).messages


def default_batch_sizes(num_sources: int) -> tuple[int, ...]:
    """The batch sizes n tried for S_t sources: log-spaced from 10 to min(1000, S_t).

    A target n0 gives ⌈S_t/n0⌉ scramblers with balanced batches; the planner names the
    configuration by its largest batch, n = max(balanced_batch_sizes(S_t, n0)) <= n0, which
    cuts S_t into the same batches (so that n is what a scrambler actually holds).
    """
    low, high = DEFAULT_BATCH_RANGE
    high = min(high, num_sources)
    low = min(low, high)
    targets = np.unique(np.round(np.geomspace(low, high, DEFAULT_BATCH_STEPS)).astype(int))
    return tuple(sorted({max(balanced_batch_sizes(num_sources, int(n))) for n in targets}))


# --- The search -----------------------------------------------------------------------------------


def _minimal_true(predicate: Callable[[int], bool], *, guess: int, maximum: int) -> int | None:
    """Smallest d in [0, maximum] with ``predicate`` true, for a predicate monotone in d.

    Gallops from ``guess`` to bracket, then bisects; checks d − 1 fails. None if
    ``predicate(maximum)`` is false.
    """
    if predicate(0):
        return 0
    low = 0  # predicate false
    guess = min(max(guess, 1), maximum)
    step = max(1, guess // 16)
    if predicate(guess):
        high = guess
        while True:
            probe = high - step
            if probe <= low:
                break
            if predicate(probe):
                high = probe
                step *= 2
            else:
                low = probe
                break
    else:
        low = guess
        while True:
            probe = min(maximum, low + step)
            if probe == low:
                return None
            if predicate(probe):
                high = probe
                break
            low = probe
            step *= 2
    while high - low > 1:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class _Raw:
    """A privacy-feasible configuration before costs: (mechanism, σ, n, d, S_t)."""

    mechanism: Mechanism
    sampling_rate: float
    batch_size: int | None
    num_dummies: int
    recruited: int


class _Searcher:
    """Minimal d per (mechanism, σ, n) for one request, with caches shared across σ."""

    def __init__(self, request: PlanRequest, *, max_dummies: int) -> None:
        self.request = request
        self.max_dummies = max_dummies
        self.epsilon_check = max(
            0.0, request.cluster_epsilon - min(EPSILON_MARGIN, request.cluster_epsilon / 2)
        )
        self.sizes = SizeTable(request.num_targets)
        self._evaluators: dict[float, Lemma2AtEpsilon] = {}

    def evaluator(self, sampling_rate: float) -> Lemma2AtEpsilon:
        found = self._evaluators.get(sampling_rate)
        if found is None:
            found = Lemma2AtEpsilon(
                num_targets=self.request.num_targets,
                sampling_rate=sampling_rate,
                epsilon=self.epsilon_check,
                sizes=self.sizes,
            )
            self._evaluators[sampling_rate] = found
        return found

    def post_processing_ok(self, sampling_rate: float) -> bool:
        """The scrambler's output is a post-processing of one source's R_σ (valid for any n, d)."""
        return _local_ok(self.request, sampling_rate, 0, self.epsilon_check)

    def local_dummies(self, sampling_rate: float) -> int | None:
        """Smallest flooding d ≤ T − 1 for R_σ^d (exact δ(ε), a closed form)."""
        for dummies in range(self.request.num_targets):
            if _local_ok(self.request, sampling_rate, dummies, self.epsilon_check):
                return dummies
        return None

    def scrambler_dummies(
        self, sampling_rate: float, batches: Sequence[int], guess: int
    ) -> int | None:
        """Smallest d with every batch size of the cluster at the target (fast exact Lemma 2)."""
        if self.post_processing_ok(sampling_rate):
            return 0
        evaluator = self.evaluator(sampling_rate)
        target = self.request.cluster_delta

        def feasible(dummies: int) -> bool:
            return all(
                evaluator.delta(batch_size=b, num_dummies=dummies) <= target for b in batches
            )

        return _minimal_true(feasible, guess=guess, maximum=self.max_dummies)


def _search(
    request: PlanRequest,
    *,
    sampling_rates: Sequence[float],
    batch_sizes: Sequence[int] | None,
    mechanisms: Sequence[Mechanism],
    max_dummies: int,
    progress: bool,
) -> tuple[list[_Raw], _Searcher]:
    """Every privacy-feasible (mechanism, σ, n) with its minimal d, under the consent limit."""
    searcher = _Searcher(request, max_dummies=max_dummies)
    found: list[_Raw] = []
    previous: dict[int, int] = {}
    for sigma in with_progress(
        sampling_rates, enabled=progress, description="planner σ grid", unit="σ"
    ):
        recruited = _recruited(request, sigma)
        if _utility(request, sigma, recruited) < request.min_utility - _UTILITY_TOLERANCE:
            continue
        if "local" in mechanisms:
            dummies = searcher.local_dummies(sigma)
            if dummies is not None:
                found.append(_Raw("local", sigma, None, dummies, recruited))
        if "scrambler" not in mechanisms:
            continue
        sizes = default_batch_sizes(recruited) if batch_sizes is None else tuple(batch_sizes)
        current: dict[int, int] = {}
        for index, batch in enumerate(sorted(set(sizes), reverse=True)):
            if batch > recruited and batch_sizes is not None:
                continue
            batches = sorted(batch_size_counts(recruited, batch))
            dummies = searcher.scrambler_dummies(sigma, batches, _guess(index, previous, current))
            if dummies is None:
                continue
            current[index] = dummies
            found.append(_Raw("scrambler", sigma, batch, dummies, recruited))
        previous = current
    return found, searcher


def _guess(index: int, previous: dict[int, int], current: dict[int, int]) -> int:
    """A starting d for the search: extrapolated from the neighbours in the (σ, n) grid."""
    above, before = previous.get(index), current.get(index - 1)
    if above is not None and before is not None:
        corner = previous.get(index - 1)
        if corner:
            return max(1, round(above * before / corner))
    if above is not None:
        return max(1, above)
    if before is not None:
        return max(1, before)
    return 64


def _configuration(raw: _Raw, dummies: int | None = None) -> Configuration:
    d = raw.num_dummies if dummies is None else dummies
    if raw.mechanism == "local" or raw.batch_size is None:
        return Configuration(mechanism="local", sampling_rate=raw.sampling_rate, num_dummies=d)
    return Configuration(
        mechanism="scrambler",
        sampling_rate=raw.sampling_rate,
        num_dummies=d,
        batch_size=raw.batch_size,
        batch_sizes=balanced_batch_sizes(raw.recruited, raw.batch_size),
    )


def _candidate(request: PlanRequest, raw: _Raw, configuration: Configuration) -> PlanCandidate:
    costs = _request_costs(request, configuration, raw.recruited)
    return PlanCandidate(
        configuration=configuration,
        num_sources=raw.recruited,
        epsilon=request.epsilon,
        delta=request.delta,
        network_load_messages=costs.messages,
        max_channels_per_node=costs.max_channels,
        extra_consents=raw.recruited - request.num_sources,
        utility=_utility(request, raw.sampling_rate, raw.recruited),
    )


def _order_key(candidate: PlanCandidate) -> tuple[int, int, int, int, float, int]:
    configuration = candidate.configuration
    return (
        *candidate.costs,
        0 if configuration.mechanism == "scrambler" else 1,
        configuration.sampling_rate,
        configuration.batch_size or 0,
    )


def pareto_front(candidates: Sequence[PlanCandidate]) -> tuple[PlanCandidate, ...]:
    """The candidates not dominated in (network load, max channels, extra consents), by load.

    One candidate is kept per distinct cost vector (the first by :func:`_order_key`).
    """
    ordered = sorted(candidates, key=_order_key)
    front: list[PlanCandidate] = []
    seen: set[tuple[int, int, int]] = set()
    for candidate in ordered:
        costs = candidate.costs
        if costs in seen:
            continue
        dominated = any(
            all(o <= c for o, c in zip(other.costs, costs, strict=True)) for other in front
        )
        if not dominated:
            front.append(candidate)
            seen.add(costs)
    return tuple(front)


# --- Verification with the accountant's own classes, and the reported ε ---------------------


def _local_ok(request: PlanRequest, sampling_rate: float, num_dummies: int, epsilon: float) -> bool:
    """R_σ^d (R_σ for d = 0) meets δ_c at ``epsilon``: its exact δ(ε), a closed form."""
    local = LocalRandomizer(
        num_targets=request.num_targets, sampling_rate=sampling_rate, num_dummies=num_dummies
    )
    return pure.local_delta(local, epsilon) <= request.cluster_delta


def _exact_cluster_ok(
    request: PlanRequest, configuration: Configuration, recruited: int, epsilon: float
) -> bool:
    """The cluster meets δ_c at ``epsilon`` by ExactLemma2 / post-processing / local exact δ."""
    sigma = configuration.sampling_rate
    if configuration.mechanism == "local":
        return _local_ok(request, sigma, configuration.num_dummies, epsilon)
    if _local_ok(request, sigma, 0, epsilon):
        return True
    if configuration.batch_size is None:
        raise InvalidParameterError("batch_size", "a batch size n >= 1 for scramblers", None)
    for batch in batch_size_counts(recruited, configuration.batch_size):
        mechanism = ScramblerMechanism(
            num_targets=request.num_targets,
            sampling_rate=sigma,
            batch_size=batch,
            num_dummies=configuration.num_dummies,
        )
        if ExactLemma2(mechanism).delta(epsilon) > request.cluster_delta:
            return False
    return True


def _verified(request: PlanRequest, raw: _Raw, epsilon_check: float) -> _Raw:
    """Check d with ExactLemma2 itself (raise d if it ever disagreed) and that d − 1 fails."""
    dummies = raw.num_dummies
    while not _exact_cluster_ok(
        request, _configuration(raw, dummies), raw.recruited, epsilon_check
    ):
        dummies += 1  # never expected: the fast evaluation equals ExactLemma2
    if dummies > 0 and _exact_cluster_ok(
        request, _configuration(raw, dummies - 1), raw.recruited, epsilon_check
    ):
        raise DpcommError(
            f"internal error: δ is not monotone in d at {_configuration(raw).describe()}"
        )
    return replace(raw, num_dummies=dummies)


def planned_guarantee(request: PlanRequest, candidate: PlanCandidate) -> tuple[float, float]:
    """The plan's (ε, δ) of ``candidate``: :func:`dpcomm.plan.account_plan` at δ_c = δ/G.

    Accounted on the plan of S_t sources (:func:`request_plan`), every balanced batch size on
    its own: the very number ``dpcomm run`` reports for this configuration on S_t rows.
    """
    plan = request_plan(
        workload=request.workload,
        num_sources=candidate.num_sources,
        num_targets=request.num_targets,
        num_clusters=request.num_clusters,
    )
    guarantee = account_plan(
        plan, candidate.configuration.countermeasure(), delta=request.cluster_delta
    ).guarantee
    return guarantee.epsilon, guarantee.delta


def _with_guarantee(request: PlanRequest, candidate: PlanCandidate) -> PlanCandidate:
    epsilon, delta = planned_guarantee(request, candidate)
    return replace(candidate, epsilon=epsilon, delta=delta)


# --- Entry point ----------------------------------------------------------------------------------


def _within_channels(request: PlanRequest, candidate: PlanCandidate) -> bool:
    return request.max_channels is None or candidate.max_channels_per_node <= request.max_channels


def _limits_text(request: PlanRequest) -> str:
    parts = []
    if request.max_channels is not None:
        parts.append(f"at most {request.max_channels:,} channels per node")
    if request.max_extra_consents is not None:
        parts.append(
            f"at most {request.max_extra_consents:,} extra consents "
            f"(utility >= {request.min_utility:g})"
        )
    return " and ".join(parts)


def _infeasible_message(
    request: PlanRequest,
    limited: Sequence[PlanCandidate],
    unlimited: Sequence[PlanCandidate],
    max_dummies: int,
) -> str:
    """One line naming the limit to relax and by how much."""
    target = f"ε ≤ {request.epsilon:g} at δ = {request.delta:g}"
    if not unlimited:
        return (
            f"no configuration in the search grid meets {target} (G = {request.num_clusters} "
            f"clusters of T = {request.num_targets}, d ≤ {max_dummies:,}): relax --epsilon "
            "or --delta"
        )
    head = f"no configuration meets {target} with {_limits_text(request)}"
    advice = []
    if request.max_channels is not None and limited:
        # Without the channel limit (the consent limit kept): the least channels that work.
        need = min(limited, key=lambda c: (c.max_channels_per_node, *c.costs))
        advice.append(
            f"the feasible configuration with the fewest channels needs "
            f"{need.max_channels_per_node:,}: relax --max-channels by "
            f"{need.max_channels_per_node - request.max_channels:,} "
            f"(to {need.max_channels_per_node:,})"
        )
    if request.max_extra_consents is not None:
        # Without the consent limit (the channel limit kept): the least consents that work.
        within = [c for c in unlimited if _within_channels(request, c)]
        if within:
            need = min(within, key=lambda c: (c.extra_consents, *c.costs))
            advice.append(
                f"within the other limits the fewest extra consents that work are "
                f"{need.extra_consents:,}: relax --max-extra-consents by "
                f"{need.extra_consents - request.max_extra_consents:,} "
                f"(to {need.extra_consents:,}) or lower --min-utility"
            )
    if not advice:
        channels = min(c.max_channels_per_node for c in unlimited)
        consents = min(c.extra_consents for c in unlimited)
        advice.append(
            f"only relaxing both limits helps (at least {channels:,} channels and "
            f"{consents:,} extra consents): relax --max-channels and --max-extra-consents"
        )
    return f"{head}: " + "; ".join(advice)


def plan_countermeasures(
    *,
    num_sources: int,
    num_targets: int,
    epsilon: float,
    delta: float,
    grouping_sets: int | None = None,
    iterations: int | None = None,
    max_channels: int | None = None,
    max_extra_consents: int | None = None,
    min_utility: float = 1.0,
    sampling_rates: Sequence[float] | None = None,
    batch_sizes: Sequence[int] | None = None,
    mechanisms: Sequence[Mechanism] = ("scrambler", "local"),
    max_dummies: int = DEFAULT_MAX_DUMMIES,
    progress: bool = False,
) -> PlannerResult:
    """The feasible configuration of minimal network load, and the Pareto front (module doc).

    Args:
        num_sources: S, real tuples the computation must use.
        num_targets: T, targets (compute nodes, centroids) per cluster.
        epsilon: ε of the whole plan (Theorem 2).
        delta: δ of the whole plan.
        grouping_sets: G, for an Aggregate plan (exclusive with ``iterations``).
        iterations: I, for a K-means plan with K = T centroids.
        max_channels: largest number of secure channels a node may have.
        max_extra_consents: c, largest S_t − S.
        min_utility: u, least expected tuples used / S (matters with ``max_extra_consents``).
        sampling_rates: σ grid (default 0, 0.05, ..., 0.95).
        batch_sizes: n grid (default :func:`default_batch_sizes` per S_t; given sizes are used
            as they are, those above S_t skipped).
        mechanisms: which of ``"scrambler"`` and ``"local"`` to consider.
        max_dummies: largest d per scrambler tried.
        progress: show a progress bar over the σ grid.

    Raises:
        InvalidParameterError: a parameter is out of range.
        DpcommError: no configuration meets the target within the limits; the message names
            the limit to relax and by how much.
    """
    if (grouping_sets is None) == (iterations is None):
        raise InvalidParameterError(
            "grouping_sets/iterations",
            "exactly one of them",
            "both" if grouping_sets is not None else "neither",
        )
    workload: Workload = "aggregate" if grouping_sets is not None else "kmeans"
    clusters = grouping_sets if grouping_sets is not None else iterations
    request = PlanRequest(
        num_sources=num_sources,
        num_targets=num_targets,
        workload=workload,
        num_clusters=clusters,  # type: ignore[arg-type]
        epsilon=epsilon,
        delta=delta,
        max_channels=max_channels,
        max_extra_consents=max_extra_consents,
        min_utility=min_utility,
    )
    rates = DEFAULT_SAMPLING_RATES if sampling_rates is None else tuple(sampling_rates)
    if not rates:
        raise InvalidParameterError("sampling_rates", "at least one σ", rates)
    for rate in rates:
        _real("sampling_rates", rate, "numbers in [0, 1)")
        if not 0.0 <= rate < 1.0:
            raise InvalidParameterError("sampling_rates", "numbers in [0, 1)", rate)
    if batch_sizes is not None:
        if not batch_sizes:
            raise InvalidParameterError("batch_sizes", "at least one n", batch_sizes)
        for size in batch_sizes:
            check_int("batch_sizes", size, minimum=1)
    chosen_mechanisms = tuple(mechanisms)
    if not chosen_mechanisms or any(m not in ("scrambler", "local") for m in chosen_mechanisms):
        raise InvalidParameterError("mechanisms", "'scrambler' and/or 'local'", mechanisms)
    max_dummies = check_int("max_dummies", max_dummies, minimum=0)
    options = {
        "sampling_rates": rates,
        "batch_sizes": batch_sizes,
        "mechanisms": chosen_mechanisms,
        "max_dummies": max_dummies,
        "progress": progress,
    }
    raws, searcher = _search(request, **options)  # type: ignore[arg-type]
    candidates = [_candidate(request, raw, _configuration(raw)) for raw in raws]
    limited = [c for c in candidates if _within_channels(request, c)]
    if not limited:
        unlimited = candidates
        if request.max_extra_consents is not None:
            free = replace(request, max_extra_consents=None, min_utility=1.0)
            more, _ = _search(free, **options)  # type: ignore[arg-type]
            unlimited = [_candidate(free, raw, _configuration(raw)) for raw in more]
        raise DpcommError(_infeasible_message(request, candidates, unlimited, max_dummies))
    by_key = {_order_key(c): raw for c, raw in zip(candidates, raws, strict=True)}
    # The fast evaluation equals ExactLemma2; the chosen configuration is re-checked with
    # ExactLemma2 itself (d passes, d − 1 fails) before its ε is computed.
    while True:
        best = min(limited, key=_order_key)
        key = _order_key(best)
        checked = _verified(request, by_key[key], searcher.epsilon_check)
        if checked.num_dummies == by_key[key].num_dummies:
            break
        by_key[key] = checked
        candidates = [_candidate(request, raw, _configuration(raw)) for raw in by_key.values()]
        limited = [c for c in candidates if _within_channels(request, c)]
    best = _with_guarantee(request, best)
    front = tuple(best if c.costs == best.costs else c for c in pareto_front(limited))
    chosen_costs = _request_costs(request, best.configuration, best.num_sources)
    return PlannerResult(
        configuration=best.configuration,
        epsilon=best.epsilon,
        delta=best.delta,
        network_load_messages=best.network_load_messages,
        max_channels_per_node=best.max_channels_per_node,
        extra_consents=best.extra_consents,
        utility=best.utility,
        pareto=front,
        num_sources=best.num_sources,
        nonprivate_load_messages=_request_costs(
            request, NoCountermeasure(), request.num_sources
        ).messages,
        num_candidates=len(candidates),
        channels_by_role=chosen_costs.channels_by_role,
        request=request,
    )


def plot_pareto(result: PlannerResult, path: str | Path) -> Path:
    """Draw the Pareto front (network load vs max channels, colour = extra consents) to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = [c.network_load_messages for c in result.pareto]
    channels = [c.max_channels_per_node for c in result.pareto]
    consents = [c.extra_consents for c in result.pareto]
    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    try:
        points = axes.scatter(loads, channels, c=consents, cmap="viridis", s=36, zorder=2)
        axes.scatter(
            [result.network_load_messages],
            [result.max_channels_per_node],
            s=160,
            facecolors="none",
            edgecolors="red",
            linewidths=1.5,
            zorder=3,
            label="chosen (minimal load)",
        )
        figure.colorbar(points, ax=axes, label="extra consents")
        axes.set_xlabel("network load (messages)")
        axes.set_ylabel("max secure channels per node")
        axes.set_yscale("log")
        axes.set_title(
            f"Pareto front, ε = {result.epsilon:.3g}, δ = {result.delta:.2g}", fontsize=10
        )
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize=8)
        figure.tight_layout()
        output = Path(path)
        figure.savefig(output, dpi=120)
    finally:
        plt.close(figure)
    return output
