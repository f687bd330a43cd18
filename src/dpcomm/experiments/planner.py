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
* Privacy: the G (or I) clusters lie on every data path and compose. A configuration is
  feasible when the whole plan is (ε, δ)-DP by either of two valid accountings (each an upper
  bound on the plan's δ(ε), so meeting either suffices, and their OR is monotone in d when
  both are):

  - basic composition (Theorem 2): every cluster reaches ε/G at δ/G, checked with the exact
    valid accounting the accountant reports: Lemma 2 evaluated exactly (``Lemma2AtEpsilon``,
    equal to ``ExactLemma2``) for every balanced batch size, or post-processing of one
    source's R_σ; the exact δ(ε) of R_σ^d (``pure.local_delta``) for the local randomizer;
  - composition of privacy loss distributions (G > 1 only, :mod:`dpcomm.accounting.pld`):
    the G-fold composition of the cluster's dominating pair reaches δ at ε. The cluster's pair
    is the Lemma 2 pair of its *smallest* balanced batch (see :func:`cluster_pair`), or
    R_σ's pair (post-processing, valid for every n and d), or R_σ^d's for local flooding.
    The search discretizes losses on a grid of :data:`SEARCH_INTERVAL` = 10⁻³, which rounds
    every loss up to a subset of the 10⁻⁴ grid (:data:`dpcomm.accounting.pld.DEFAULT_INTERVAL`),
    hence dominates the finer PLD: a configuration feasible in the search stays feasible at
    10⁻⁴, where the chosen one is checked again.

  With G = 1 both coincide with the exact one-cluster check (no composition). Checks are made
  at ε − 10⁻⁶ so that the accountant's bisections (tolerance 10⁻⁶) report at most ε. The
  reported ε of the chosen configuration is :func:`dpcomm.plan.account_plan`'s on the plan of
  S_t sources at the plan's δ: what ``dpcomm run`` reports for that configuration on S_t rows.
* Costs come from the one cost model (:mod:`dpcomm.plan.costs`): the plan of the request is
  built by :mod:`dpcomm.plan.builders` for S_t sources and transformed with the candidate
  countermeasure (:func:`dpcomm.plan.transform`); the network load is every message of the
  transformed plan (dummies included, exactly what the engines send), the max channels per node
  the largest of its per-role bounds on distinct peers (reached when every scrambler sends to
  every target); see :func:`plan_costs`.

Search (every bound it prunes with is valid, so the answer is the optimum over the σ grid,
every number K of scramblers and every d ≤ ``max_dummies``; ``tests/unit/test_planner.py``
compares it with a brute-force enumeration):

* σ on a 0.01 grid; for scramblers every K in 1..S_t that balanced batches realize
  (K = ⌈S_t/n⌉ for some n; the configuration is named by its largest batch n = ⌈S_t/K⌉).
* The least feasible d is non-decreasing in K (batches shrink, and the pair of a smaller batch
  dominates that of a larger one, :func:`cluster_pair`), so the search over K starts at the
  previous K's d, and the one-cluster check at ε and δ (necessary: composing only adds loss)
  gives a floor. δ is non-increasing in d (the pair for d + 1 is a post-processing of the pair
  for d: one more uniform dummy), so the least d is found by galloping and bisection.
* Pruning, from the cost model's monotonicity (messages non-decreasing in d, in K at fixed d
  and in S_t; channels non-decreasing in d): a σ whose cheapest scrambler configuration
  (K = 1, d = 0) costs more than the best feasible configuration found so far within the
  limits is skipped; the K loop stops when K with the previous K's d already costs more (every
  K' ≥ K needs at least that d), or when the largest d affordable at K is infeasible (d*(K') ≥
  d*(K) and the affordable d only shrinks with K'); a K whose channels at its floor on d exceed
  the channel limit is skipped.

The answer is the feasible candidate of minimal network load (ties: fewer channels, then fewer
consents, scramblers before local, smaller σ, larger n). The Pareto front over (network load,
max channels, extra consents) of the feasible candidates the search evaluated is returned with
it: the pruned configurations all cost more than the answer, so the front's members of least
load are exact, the rest a sample. This goes beyond the paper, which explores the trade-offs by
plotting them (Section 5.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, pld, pure
from dpcomm.accounting.exact import Lemma2AtEpsilon, SizeTable
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.builders import aggregate_plan, kmeans_flow, kmeans_plan
from dpcomm.plan.costs import (
    balanced_batch_sizes,
    delivery_probability,
    num_scramblers,
    sources_needed,
)
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.plan.model import ExecutionPlan
from dpcomm.plan.privacy import PlanGuarantee, account_plan
from dpcomm.plan.transform import transform
from dpcomm.progress import with_progress
from dpcomm.validation import check_int

Mechanism = Literal["scrambler", "local"]
Workload = Literal["aggregate", "kmeans"]

#: σ grid of the search: 0, 0.01, ..., 0.99 (the paper's Table 1 lets σ range over [0, 1)).
DEFAULT_SAMPLING_RATES: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(100))
#: Largest d tried per scrambler (Table 1 goes to 1000).
DEFAULT_MAX_DUMMIES = 20_000
#: PLD grid of the search; a multiple of :data:`FINAL_INTERVAL`, so it dominates it.
SEARCH_INTERVAL = 1e-3
#: PLD grid the chosen configuration is checked on (dp_accounting's and the accountant's).
FINAL_INTERVAL = pld.DEFAULT_INTERVAL
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
        noun = "scrambler" if self.num_scramblers == 1 else "scramblers"
        return (
            f"{self.num_scramblers} {noun} of n={self.batch_size}, d={self.num_dummies} "
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
        epsilon: the plan's ε: the accountant's value for the chosen configuration, the target
            ε it was checked against otherwise.
        delta: the plan's δ.
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
        epsilon: the plan's ε, as :func:`dpcomm.plan.account_plan` reports it at the plan's δ
            for the plan of S_t sources.
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
        privacy: the chosen configuration's full account (PLD and basic composition, the
            certified lower bound) by :func:`dpcomm.plan.account_plan`.
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
    privacy: PlanGuarantee | None = None


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
        """δ/G: each cluster's δ in the basic-composition check (Theorem 2) only.

        ``delta`` is the whole plan's δ: the PLD check composes the G clusters at it, and the
        reported guarantee is :func:`dpcomm.plan.account_plan`'s at it.
        """
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


def cluster_pair(
    num_targets: int, sampling_rate: float, batch_sizes: Sequence[int], num_dummies: int
) -> pld.LossAtoms:
    """The dominating pair of one cluster of scramblers: the Lemma 2 pair of its smallest batch.

    Scramblers of one cluster see disjoint sources, so a source's data reaches one of them
    only, and the other scramblers' outputs are independent of it (a post-processing): the
    cluster is dominated by the pair of the scrambler holding the source, of batch size
    ⌈S_t/K⌉ or ⌊S_t/K⌋. The smaller batch dominates the larger: the Lemma 2 pair for n + 1
    sources is a post-processing of the pair for n (one more source that, w.p. σ, adds a
    uniform draw to the counts and one to the announced m, and otherwise sends to a fixed
    target whose count the observer subtracts), so the pair of the smallest batch dominates
    every scrambler of the cluster. Likewise the pair for d + 1 dummies is a post-processing of
    the pair for d (add a uniform dummy), which makes δ(ε) non-increasing in d.
    """
    return pld.scrambler_pair(
        ScramblerMechanism(
            num_targets=num_targets,
            sampling_rate=sampling_rate,
            batch_size=min(batch_sizes),
            num_dummies=num_dummies,
        )
    )


# --- The search -----------------------------------------------------------------------------------


def least_satisfying(
    predicate: Callable[[int], bool],
    *,
    low: int,
    high: int,
    guess: int | None = None,
    high_ok: bool = False,
) -> int | None:
    """Smallest d in [low, high] with ``predicate``, for a predicate monotone in d.

    The caller knows that ``predicate`` is false below ``low`` (and true at ``high`` when
    ``high_ok``). Gallops from ``guess`` (default ``low``) to bracket, then bisects, so that
    the answer passes and the answer − 1 fails or is below ``low``. None if
    ``predicate(high)`` is false.
    """
    if low > high:
        return None
    false_at = low - 1
    true_at: int | None = high if high_ok else None
    start = low if guess is None else min(max(guess, low), high)
    step = 1
    if true_at is not None and start >= true_at:
        pass
    elif predicate(start):
        true_at = start
        while True:
            probe = true_at - step
            if probe <= false_at:
                break
            if predicate(probe):
                true_at = probe
                step *= 2
            else:
                false_at = probe
                break
    else:
        false_at = start
        while True:
            probe = min(high, false_at + step)
            if true_at is not None and probe >= true_at:
                break
            if probe == false_at:
                return None
            if predicate(probe):
                true_at = probe
                break
            false_at = probe
            step *= 2
    assert true_at is not None
    while true_at - false_at > 1:
        middle = (false_at + true_at) // 2
        if predicate(middle):
            true_at = middle
        else:
            false_at = middle
    return true_at


def _minimal_true(predicate: Callable[[int], bool], *, guess: int, maximum: int) -> int | None:
    """Smallest d in [0, maximum] with ``predicate`` true (monotone), None if none."""
    return least_satisfying(predicate, low=0, high=maximum, guess=guess)


@dataclass(frozen=True)
class _Raw:
    """A privacy-feasible configuration before costs: (mechanism, σ, n, d, S_t)."""

    mechanism: Mechanism
    sampling_rate: float
    batch_size: int | None
    num_dummies: int
    recruited: int


def _margin(epsilon: float) -> float:
    return max(0.0, epsilon - min(EPSILON_MARGIN, epsilon / 2))


class Feasibility:
    """The planner's privacy predicate for one request (module doc), with its caches.

    ``interval`` is the PLD grid (:data:`SEARCH_INTERVAL` in the search; the chosen
    configuration is checked again at :data:`FINAL_INTERVAL`).
    """

    def __init__(self, request: PlanRequest, *, interval: float = SEARCH_INTERVAL) -> None:
        self.request = request
        self.interval = interval
        self.clusters = request.num_clusters
        self.epsilon_check = _margin(request.epsilon)
        self.cluster_epsilon_check = _margin(request.epsilon / self.clusters)
        self.cluster_delta = request.delta / self.clusters
        self.sizes = SizeTable(request.num_targets)
        self._evaluators: dict[tuple[float, float], Lemma2AtEpsilon] = {}
        self._composed: dict[tuple[object, ...], bool] = {}

    def evaluator(self, sampling_rate: float, epsilon: float) -> Lemma2AtEpsilon:
        """Lemma 2 evaluated exactly at one (σ, ε), cached (shared across n and d)."""
        key = (sampling_rate, epsilon)
        found = self._evaluators.get(key)
        if found is None:
            found = Lemma2AtEpsilon(
                num_targets=self.request.num_targets,
                sampling_rate=sampling_rate,
                epsilon=epsilon,
                sizes=self.sizes,
            )
            self._evaluators[key] = found
        return found

    def _composed_ok(
        self, key: tuple[object, ...], make_pld: Callable[[], PrivacyLossDistribution]
    ) -> bool:
        """The G-fold composition of a cluster's PLD has δ ≤ the plan's δ at ε (cached)."""
        found = self._composed.get(key)
        if found is None:
            try:
                one = make_pld()
            except pld.PairUnavailableError:
                found = False  # no pair: basic composition only (still valid)
            else:
                try:
                    composed = pld.compose([one], counts=[self.clusters])
                except ValueError:
                    # dp_accounting cannot compose a PLD whose mass is all at +∞: δ = 1.
                    found = False
                else:
                    delta = float(composed.get_delta_for_epsilon(self.epsilon_check))
                    found = delta <= self.request.delta
            self._composed[key] = found
        return found

    def local_ok(self, sampling_rate: float, num_dummies: int) -> bool:
        """R_σ^d (R_σ for d = 0) meets the plan's (ε, δ) on the G clusters."""
        local = LocalRandomizer(
            num_targets=self.request.num_targets,
            sampling_rate=sampling_rate,
            num_dummies=num_dummies,
        )
        if self.clusters == 1:
            return pure.local_delta(local, self.epsilon_check) <= self.request.delta
        if pure.local_delta(local, self.cluster_epsilon_check) <= self.cluster_delta:
            return True
        if pure.local_delta(local, self.epsilon_check) > self.request.delta:
            return False  # one cluster already misses it, and composing only adds loss
        return self._composed_ok(
            ("local", sampling_rate, num_dummies),
            lambda: pld.local_randomizer_pair(local).pld(interval=self.interval),
        )

    def scrambler_basic(self, sampling_rate: float, batches: Sequence[int], dummies: int) -> bool:
        """Every batch size meets (ε/G, δ/G) by Lemma 2 evaluated exactly (G = 1: (ε, δ))."""
        evaluator = self.evaluator(sampling_rate, self.cluster_epsilon_check)
        return all(
            evaluator.delta(batch_size=b, num_dummies=dummies) <= self.cluster_delta
            for b in batches
        )

    def scrambler_one_cluster(self, sampling_rate: float, batch: int, dummies: int) -> bool:
        """Necessary for G > 1: one cluster's pair reaches the plan's δ at ε.

        Composing G clusters only adds loss (the first cluster's output is a post-processing
        of all G), so a configuration whose one cluster misses (ε, δ) is infeasible by the
        PLD check, and a fortiori by basic composition. ``Lemma2AtEpsilon`` is the pair's
        hockey-stick curve plus tail charges below 10⁻²⁸ and a factor 1 + 10⁻⁹; the test
        allows 10⁻⁶ relative for them.
        """
        evaluator = self.evaluator(sampling_rate, self.epsilon_check)
        value = evaluator.delta(batch_size=batch, num_dummies=dummies)
        return value <= self.request.delta * (1.0 + 1e-6) + 1e-25

    def scrambler_ok(self, sampling_rate: float, batches: Sequence[int], dummies: int) -> bool:
        """The cluster's scramblers meet the plan's target (basic composition or PLDs)."""
        if self.scrambler_basic(sampling_rate, batches, dummies):
            return True
        if self.clusters == 1:
            return False
        if not self.scrambler_one_cluster(sampling_rate, min(batches), dummies):
            return False
        size = self.request.num_targets
        mechanism = ScramblerMechanism(
            num_targets=size,
            sampling_rate=sampling_rate,
            batch_size=min(batches),
            num_dummies=dummies,
        )
        # The PLD of cluster_pair (the smallest batch's Lemma 2 pair), from cached rows.
        return self._composed_ok(
            ("scrambler", sampling_rate, min(batches), dummies),
            lambda: pld.scrambler_pld(mechanism, interval=self.interval),
        )

    def post_processing_ok(self, sampling_rate: float) -> bool:
        """The scrambler's output is a post-processing of one source's R_σ (any n, d)."""
        return self.local_ok(sampling_rate, 0)

    def configuration_ok(self, configuration: Configuration) -> bool:
        """The predicate for a configuration (as the search evaluates it)."""
        sigma, dummies = configuration.sampling_rate, configuration.num_dummies
        if configuration.mechanism == "local":
            return self.local_ok(sigma, dummies)
        if configuration.batch_sizes is None:
            raise InvalidParameterError("batch_sizes", "balanced batches for scramblers", None)
        if self.post_processing_ok(sigma):
            return True
        return self.scrambler_ok(sigma, sorted(set(configuration.batch_sizes)), dummies)


class _Search:
    """The pruned search of one request (module doc): candidates and the best load so far."""

    def __init__(
        self,
        request: PlanRequest,
        *,
        feasibility: Feasibility,
        batch_sizes: Sequence[int] | None,
        mechanisms: Sequence[Mechanism],
        max_dummies: int,
        by_channels: bool = False,
    ) -> None:
        self.request = request
        self.by_channels = by_channels
        self.fewest_channels = math.inf
        self.feasibility = feasibility
        self.batch_sizes = batch_sizes
        self.mechanisms = mechanisms
        self.max_dummies = max_dummies
        self.found: list[_Raw] = []
        self.best = math.inf  # least load of a candidate within the limits
        self.seeding = False  # basic composition only, to bound the best load (G > 1)
        self._best_sigma = 0.0

    def _messages(self, recruited: int, countermeasure: Countermeasure) -> PlanCosts:
        return _request_costs(self.request, countermeasure, recruited)

    def _within(self, costs: PlanCosts) -> bool:
        limit = self.request.max_channels
        return limit is None or costs.max_channels <= limit

    def _record(self, raw: _Raw) -> None:
        self.found.append(raw)
        costs = self._messages(raw.recruited, _configuration(raw).countermeasure())
        if self.by_channels:
            self.fewest_channels = min(self.fewest_channels, costs.max_channels)
        elif self._within(costs) and costs.messages < self.best:
            self.best = costs.messages
            self._best_sigma = raw.sampling_rate

    def _seed(self, raw: _Raw) -> None:
        """A feasible configuration (basic composition) bounds the best load; not recorded."""
        costs = self._messages(raw.recruited, _configuration(raw).countermeasure())
        if self._within(costs) and costs.messages < self.best:
            self.best = costs.messages
            self._best_sigma = raw.sampling_rate

    def best_sigma(self) -> float:
        """σ of the least load found so far within the limits (0 if none)."""
        return self._best_sigma

    def local(self, sigma: float, recruited: int) -> None:
        """The least flooding d ≤ T − 1 for R_σ^d (δ non-increasing in d)."""
        check = self.feasibility
        dummies = least_satisfying(
            lambda d: check.local_ok(sigma, d), low=0, high=self.request.num_targets - 1
        )
        if dummies is not None:
            self._record(_Raw("local", sigma, None, dummies, recruited))

    def _affordable(self, sigma: float, recruited: int, batch: int, low: int) -> int:
        """The largest d ≤ max_dummies whose load at this (σ, n) is at most the best so far."""
        if math.isinf(self.best):
            return self.max_dummies

        def load(d: int) -> int:
            return self._messages(
                recruited, Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=d)
            ).messages

        base = load(low)
        if base > self.best:
            return low - 1
        slope = load(low + 1) - base  # messages are affine in d (each dummy is a message)
        guess = self.max_dummies if slope <= 0 else low + int((self.best - base) // slope)
        guess = min(guess, self.max_dummies)
        if load(guess) <= self.best and (guess == self.max_dummies or load(guess + 1) > self.best):
            return guess
        found = least_satisfying(lambda d: load(d) > self.best, low=low, high=self.max_dummies)
        return self.max_dummies if found is None else found - 1

    def scramblers(self, sigma: float, recruited: int) -> None:
        """Every realized K with its least d, pruned by the best load (module doc)."""
        check = self.feasibility
        counts = scrambler_counts(recruited, self.batch_sizes)
        if not counts:
            return
        first = self._messages(
            recruited,
            Scramblers(sampling_rate=sigma, batch_size=-(-recruited // counts[0]), num_dummies=0),
        )
        if first.messages > self.best:
            return
        free = check.post_processing_ok(sigma)
        low = 0
        position: float | None = None  # where d* fell in its bracket at the previous K
        for count in counts:
            batch = -(-recruited // count)
            batches = sorted(set(balanced_batch_sizes(recruited, batch)))
            at_low = self._messages(
                recruited, Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=low)
            )
            if at_low.messages > self.best:
                break  # every K' >= K needs d >= low: it costs more
            if not self._within(at_low) or at_low.max_channels > self.fewest_channels:
                continue  # channels only grow with d
            if free:
                raw = _Raw("scrambler", sigma, batch, 0, recruited)
                (self._seed if self.seeding else self._record)(raw)
                continue

            def ok(d: int, batches: Sequence[int] = batches) -> bool:
                return check.scrambler_ok(sigma, batches, d)

            def basic_ok(d: int, batches: Sequence[int] = batches) -> bool:
                return check.scrambler_basic(sigma, batches, d)

            def one_cluster(d: int, smallest: int = batches[0]) -> bool:
                return check.scrambler_one_cluster(sigma, smallest, d)

            floor = low
            if self.request.num_clusters > 1:
                # The one-cluster floor on d is non-decreasing in K too: prune with it.
                found = least_satisfying(one_cluster, low=low, high=self.max_dummies)
                if found is None:
                    break
                floor = found
                at_floor = self._messages(
                    recruited,
                    Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=floor),
                )
                if at_floor.messages > self.best:
                    break
                if not self._within(at_floor) or at_floor.max_channels > self.fewest_channels:
                    continue
            high = self._affordable(sigma, recruited, batch, low)
            if high < low:
                break

            if self.request.num_clusters == 1:
                dummies = least_satisfying(ok, low=low, high=high)
            elif self.seeding:
                dummies = least_satisfying(basic_ok, low=low, high=high)
            else:
                if floor > high:
                    break
                basic = least_satisfying(basic_ok, low=floor, high=high)
                top = high if basic is None else basic
                if basic is None and not ok(high):
                    break
                guess = floor
                if floor > low and position is not None:
                    guess = floor + round(position * (top - floor))
                dummies = least_satisfying(ok, low=floor, high=top, guess=guess, high_ok=True)
                if dummies is not None and top > floor:
                    position = (dummies - floor) / (top - floor)
            if dummies is None:
                break  # d*(K) > the affordable d, which only shrinks with K
            low = dummies
            raw = _Raw("scrambler", sigma, batch, dummies, recruited)
            if self.seeding:
                self._seed(raw)
            else:
                self._record(raw)


def _search(
    request: PlanRequest,
    *,
    sampling_rates: Sequence[float],
    batch_sizes: Sequence[int] | None,
    mechanisms: Sequence[Mechanism],
    max_dummies: int,
    progress: bool,
    feasibility: Feasibility | None = None,
    by_channels: bool = False,
) -> list[_Raw]:
    """Every privacy-feasible (mechanism, σ, K) the pruned search evaluates, with its least d.

    ``by_channels``: prune by channels instead of load, to find the fewest channels that any
    feasible configuration needs (for the advice when the channel limit cannot be met).
    """
    check = Feasibility(request) if feasibility is None else feasibility
    search = _Search(
        request,
        feasibility=check,
        batch_sizes=batch_sizes,
        mechanisms=mechanisms,
        max_dummies=max_dummies,
        by_channels=by_channels,
    )
    usable = []
    for sigma in sampling_rates:
        recruited = _recruited(request, sigma)
        if _utility(request, sigma, recruited) >= request.min_utility - _UTILITY_TOLERANCE:
            usable.append((sigma, recruited))
    if "local" in mechanisms:  # cheap: an upper bound on the load before the scramblers
        for sigma, recruited in usable:
            search.local(sigma, recruited)
    if "scrambler" in mechanisms:
        # Coarse σ first (multiples of 0.1), then the others nearest the best σ so far: a good
        # bound early prunes the rest (the order does not change the answer).
        coarse = [item for item in usable if abs(item[0] * 10 - round(item[0] * 10)) < 1e-9]
        rest = [item for item in usable if item not in coarse]
        if request.num_clusters > 1 and not by_channels:
            # Basic composition alone (fast, and an upper bound on the least d) bounds the
            # best load before any PLD is composed; only the bound is kept.
            search.seeding = True
            for sigma, recruited in coarse:
                search.scramblers(sigma, recruited)
            search.seeding = False
        for sigma, recruited in with_progress(
            coarse, enabled=progress, description="planner σ grid", unit="σ"
        ):
            search.scramblers(sigma, recruited)
        centre = search.best_sigma()
        rest.sort(key=lambda item: (abs(item[0] - centre), item[0]))
        for sigma, recruited in with_progress(
            rest, enabled=progress, description="planner σ grid (fine)", unit="σ"
        ):
            search.scramblers(sigma, recruited)
    return search.found


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


def _verified(request: PlanRequest, raw: _Raw, search: Feasibility, final: Feasibility) -> _Raw:
    """The least d of ``raw``'s (σ, K) for the search's predicate, and feasible at 10⁻⁴.

    The search starts each K at the previous K's d (d* is non-decreasing in K); here d − 1 is
    checked to fail from scratch (if it ever passed, d is searched again from 0), and d to pass
    with the PLDs on the final grid (a coarser pessimistic grid dominates, so it does; should
    rounding ever disagree, d is raised until it passes).
    """

    def configuration_ok(check: Feasibility, dummies: int) -> bool:
        return check.configuration_ok(_configuration(raw, dummies))

    dummies = raw.num_dummies
    if dummies > 0 and configuration_ok(search, dummies - 1):
        least = least_satisfying(lambda d: configuration_ok(search, d), low=0, high=dummies)
        dummies = raw.num_dummies if least is None else least
    while not configuration_ok(final, dummies):
        dummies += 1  # never expected: the coarser grid dominates the final one
    return replace(raw, num_dummies=dummies)


def planned_privacy(request: PlanRequest, candidate: PlanCandidate) -> PlanGuarantee:
    """:func:`dpcomm.plan.account_plan` of ``candidate`` on the plan of S_t sources at δ."""
    plan = request_plan(
        workload=request.workload,
        num_sources=candidate.num_sources,
        num_targets=request.num_targets,
        num_clusters=request.num_clusters,
    )
    return account_plan(plan, candidate.configuration.countermeasure(), delta=request.delta)


def planned_guarantee(request: PlanRequest, candidate: PlanCandidate) -> tuple[float, float]:
    """The plan's (ε, δ) of ``candidate``: :func:`dpcomm.plan.account_plan` at the plan's δ.

    Accounted on the plan of S_t sources (:func:`request_plan`) with ``delta`` the whole
    plan's δ: the very number ``dpcomm run --delta δ`` reports for this configuration on S_t
    rows (the accountant's ε is the least of its PLD composition and basic composition, each
    at least as loose as the planner's check, so it is at most the target).
    """
    guarantee = planned_privacy(request, candidate).guarantee
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


#: How the infeasibility advice names the parameters (Python keywords by default).
PYTHON_PARAMETER_NAMES: Mapping[str, str] = {
    name: name for name in ("epsilon", "delta", "max_channels", "max_extra_consents", "min_utility")
}


def _infeasible_message(
    request: PlanRequest,
    limited: Sequence[PlanCandidate],
    unlimited: Sequence[PlanCandidate],
    max_dummies: int,
    names: Mapping[str, str] = PYTHON_PARAMETER_NAMES,
) -> str:
    """One line naming the limit to relax (as ``names`` spells it) and by how much."""
    target = f"ε ≤ {request.epsilon:g} at δ = {request.delta:g}"
    if not unlimited:
        return (
            f"no configuration in the search grid meets {target} (G = {request.num_clusters} "
            f"clusters of T = {request.num_targets}, d ≤ {max_dummies:,}): "
            f"relax {names['epsilon']} or {names['delta']}"
        )
    head = f"no configuration meets {target} with {_limits_text(request)}"
    advice = []
    if request.max_channels is not None and limited:
        # Without the channel limit (the consent limit kept): the least channels that work.
        need = min(limited, key=lambda c: (c.max_channels_per_node, *c.costs))
        advice.append(
            f"the feasible configuration with the fewest channels needs "
            f"{need.max_channels_per_node:,}: relax {names['max_channels']} by "
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
                f"{need.extra_consents:,}: relax {names['max_extra_consents']} by "
                f"{need.extra_consents - request.max_extra_consents:,} "
                f"(to {need.extra_consents:,}) or lower {names['min_utility']}"
            )
    if not advice:
        channels = min(c.max_channels_per_node for c in unlimited)
        consents = min(c.extra_consents for c in unlimited)
        advice.append(
            f"only relaxing both limits helps (at least {channels:,} channels and "
            f"{consents:,} extra consents): relax {names['max_channels']} and "
            f"{names['max_extra_consents']}"
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
    parameter_names: Mapping[str, str] = PYTHON_PARAMETER_NAMES,
) -> PlannerResult:
    """The feasible configuration of minimal network load, and the Pareto front (module doc).

    Args:
        num_sources: S, real tuples the computation must use.
        num_targets: T, targets (compute nodes, centroids) per cluster.
        epsilon: ε of the whole plan.
        delta: δ of the whole plan.
        grouping_sets: G, for an Aggregate plan (exclusive with ``iterations``).
        iterations: I, for a K-means plan with K = T centroids.
        max_channels: largest number of secure channels a node may have.
        max_extra_consents: c, largest S_t − S.
        min_utility: u, least expected tuples used / S (matters with ``max_extra_consents``).
        sampling_rates: σ grid (default 0, 0.01, ..., 0.99).
        batch_sizes: a restriction list of n: only the numbers of scramblers ⌈S_t/n⌉ of these
            (those above S_t skipped); default every number of scramblers.
        mechanisms: which of ``"scrambler"`` and ``"local"`` to consider.
        max_dummies: largest d per scrambler tried.
        progress: show a progress bar over the σ grid.
        parameter_names: how the error's advice spells the parameters (the CLI's flags for
            ``dpcomm plan``; Python keywords by default).

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
    search_check = Feasibility(request, interval=SEARCH_INTERVAL)
    raws = _search(request, feasibility=search_check, **options)  # type: ignore[arg-type]
    candidates = [_candidate(request, raw, _configuration(raw)) for raw in raws]
    limited = [c for c in candidates if _within_channels(request, c)]
    if not limited:
        unlimited_channels = replace(request, max_channels=None)
        fewest = _search(
            unlimited_channels,
            by_channels=True,
            **options,  # type: ignore[arg-type]
        )
        any_channels = [_candidate(request, raw, _configuration(raw)) for raw in fewest]
        unlimited = any_channels
        if request.max_extra_consents is not None:
            free = replace(request, max_extra_consents=None, min_utility=1.0)
            more = _search(free, **options)  # type: ignore[arg-type]
            unlimited = [_candidate(free, raw, _configuration(raw)) for raw in more]
            unlimited = [*unlimited, *any_channels]
        raise DpcommError(
            _infeasible_message(request, any_channels, unlimited, max_dummies, parameter_names)
        )
    by_key = {_order_key(c): raw for c, raw in zip(candidates, raws, strict=True)}
    # The chosen configuration is checked again (d − 1 fails from scratch; d passes with the
    # PLDs on the final grid) before its ε is computed.
    final_check = Feasibility(request, interval=FINAL_INTERVAL)
    while True:
        best = min(limited, key=_order_key)
        key = _order_key(best)
        checked = _verified(request, by_key[key], search_check, final_check)
        if checked.num_dummies == by_key[key].num_dummies:
            break
        del by_key[key]
        by_key[_order_key(_candidate(request, checked, _configuration(checked)))] = checked
        candidates = [_candidate(request, raw, _configuration(raw)) for raw in by_key.values()]
        limited = [c for c in candidates if _within_channels(request, c)]
    privacy = planned_privacy(request, best)
    best = replace(best, epsilon=privacy.guarantee.epsilon, delta=privacy.guarantee.delta)
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
        privacy=privacy,
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
