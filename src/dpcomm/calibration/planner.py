"""The planner's entry point: `plan_countermeasures` and its answer, `PlannerResult`.

The search (`dpcomm.calibration.search`) finds every feasible configuration worth costing;
each is costed (`dpcomm.calibration.costs`), the candidates within the channel limit are
ordered (`dpcomm.calibration.pareto`), and the best is checked again (d − 1 fails from
scratch; d passes with the PLDs on the final grid) before its ε is computed. The reported ε of
the chosen configuration is `dpcomm.plan.account_plan`'s on the plan of S_t sources at
the plan's δ: what ``dpcomm run`` reports for that configuration on S_t rows. When no
configuration is feasible, the error says what to relax (`dpcomm.calibration.advice`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from dpcomm.calibration.advice import (
    PYTHON_PARAMETER_NAMES,
    infeasible_message,
    too_many_messages,
)
from dpcomm.calibration.configuration import PlanCandidate
from dpcomm.calibration.costs import costs_for, requested_plan, utility_for
from dpcomm.calibration.feasibility import FINAL_INTERVAL, SEARCH_INTERVAL, Feasibility
from dpcomm.calibration.pareto import order_key, pareto_front
from dpcomm.calibration.request import (
    DEFAULT_MAX_DUMMIES,
    DEFAULT_SAMPLING_RATES,
    SEARCHED_MECHANISMS,
    PlanRequest,
    SearchOptions,
    Workload,
)
from dpcomm.calibration.search import Found, least_satisfying, search
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.countermeasures import CountermeasureName, NoCountermeasure
from dpcomm.plan.privacy import PlanGuarantee, account_plan
from dpcomm.validation import check_int


@dataclass(frozen=True, kw_only=True)
class PlannerResult(PlanCandidate):
    """The planner's answer: the chosen configuration (a [`PlanCandidate`][]) and more.

    Attributes:
        epsilon: the plan's ε, as `dpcomm.plan.account_plan` reports it at the plan's δ
            for the plan of S_t sources (the other fields are the candidate's).
        pareto: non-dominated feasible candidates over (load, channels, consents), by load,
            within the limits (``max_messages`` too); the chosen configuration is the first.
        nonprivate_load_messages: messages of the plan without countermeasures (S sources).
        num_candidates: candidates meeting the privacy target (before the channel limit).
        channels_by_role: the bound on the channels of one node, per role, of the chosen
            configuration (`dpcomm.plan.TransformedPlan.channels_by_role`).
        request: what was asked for.
        privacy: the chosen configuration's full account (PLD and basic composition, the
            certified lower bound) by `dpcomm.plan.account_plan`.
    """

    pareto: tuple[PlanCandidate, ...]
    nonprivate_load_messages: int = 0
    num_candidates: int = 0
    channels_by_role: Mapping[str, int] = field(default_factory=dict)
    request: PlanRequest | None = None
    privacy: PlanGuarantee | None = None


#: The chosen candidate, every candidate and those within the channel limit.
_Chosen = tuple[PlanCandidate, list[PlanCandidate], list[PlanCandidate]]


def _candidate(request: PlanRequest, found: Found) -> PlanCandidate:
    """``found`` with its costs, its utility and the target (ε, δ) it was checked against."""
    configuration = found.configuration
    costs = costs_for(request, configuration.countermeasure, found.num_sources)
    return PlanCandidate(
        configuration=configuration,
        num_sources=found.num_sources,
        epsilon=request.epsilon,
        delta=request.delta,
        network_load_messages=costs.messages,
        max_channels_per_node=costs.max_channels,
        extra_consents=found.num_sources - request.num_sources,
        utility=utility_for(request, configuration.sampling_rate, found.num_sources),
    )


def _verified(found: Found, search_check: Feasibility, final_check: Feasibility) -> Found:
    """The least d of ``found``'s (σ, K) for the search's predicate, and feasible at 10⁻⁴.

    The search starts each K at the previous K's d (d* is non-decreasing in K); here d − 1 is
    checked to fail from scratch (if it ever passed, d is searched again from 0), and d to pass
    with the PLDs on the final grid (a coarser pessimistic grid dominates, so it does; should
    rounding ever disagree, d is raised until it passes).
    """
    configuration = found.configuration

    def configuration_ok(check: Feasibility, dummies: int) -> bool:
        return check.configuration_ok(configuration.with_dummies(dummies))

    dummies = configuration.num_dummies
    if dummies > 0 and configuration_ok(search_check, dummies - 1):
        least = least_satisfying(lambda d: configuration_ok(search_check, d), low=0, high=dummies)
        dummies = configuration.num_dummies if least is None else least
    while not configuration_ok(final_check, dummies):
        dummies += 1  # never expected: the coarser grid dominates the final one
    return replace(found, configuration=configuration.with_dummies(dummies))


def planned_privacy(request: PlanRequest, candidate: PlanCandidate) -> PlanGuarantee:
    """`dpcomm.plan.account_plan` of ``candidate`` on the plan of S_t sources at δ.

    Accounted on the plan of S_t sources (`dpcomm.calibration.costs.requested_plan`) with
    ``delta`` the whole plan's δ: the very number ``dpcomm run --delta δ`` reports for this
    configuration on S_t rows (the accountant's ε is the least of its PLD composition and basic
    composition, each at least as loose as the planner's check, so it is at most the target).
    """
    plan = requested_plan(request, candidate.num_sources)
    return account_plan(plan, candidate.configuration.countermeasure, delta=request.delta)


def plan_countermeasures(
    *,
    num_sources: int,
    num_targets: int,
    epsilon: float,
    delta: float,
    grouping_sets: int | None = None,
    iterations: int | None = None,
    free_grouping_sets: int = 0,
    max_channels: int | None = None,
    max_extra_consents: int | None = None,
    min_utility: float = 1.0,
    max_messages: int | None = None,
    sampling_rates: Sequence[float] | None = None,
    batch_sizes: Sequence[int] | None = None,
    mechanisms: Sequence[CountermeasureName] = SEARCHED_MECHANISMS,
    max_dummies: int = DEFAULT_MAX_DUMMIES,
    progress: bool = False,
    parameter_names: Mapping[str, str] = PYTHON_PARAMETER_NAMES,
) -> PlannerResult:
    """The feasible configuration of minimal network load, and the Pareto front (package doc).

    Args:
        num_sources: S, real tuples the computation must use.
        num_targets: T, targets (compute nodes, centroids) per cluster.
        epsilon: ε of the whole plan.
        delta: δ of the whole plan.
        grouping_sets: G, for an Aggregate plan (exclusive with ``iterations``).
        iterations: I, for a K-means plan with K = T centroids.
        free_grouping_sets: grouping sets of one compute node besides the G (the empty
            grouping set ``()``): their traffic is data-independent (ε = 0), so they are not
            composed, but their messages and channels are costed (Aggregate only).
        max_channels: largest number of secure channels a node may have.
        max_extra_consents: c, largest S_t − S.
        min_utility: u, least expected tuples used / S (matters with ``max_extra_consents``).
        max_messages: largest network load (every message of the plan, dummies included):
            the least-load configuration must fit it.
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
    workload, clusters = _workload(grouping_sets, iterations)
    if max_messages is not None:
        max_messages = check_int("max_messages", max_messages, minimum=1)
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
        free_clusters=free_grouping_sets,
    )
    options = SearchOptions(
        sampling_rates=DEFAULT_SAMPLING_RATES if sampling_rates is None else sampling_rates,
        batch_sizes=batch_sizes,
        mechanisms=mechanisms,
        max_dummies=max_dummies,
    )
    search_check = Feasibility(request, interval=SEARCH_INTERVAL)
    found = search(request, options, progress=progress, feasibility=search_check)
    candidates = [_candidate(request, one) for one in found]
    limited = [c for c in candidates if request.allows_channels(c.max_channels_per_node)]
    if not limited:
        raise _infeasible(request, options, progress=progress, parameter_names=parameter_names)
    chosen = _checked_best(request, candidates, found, search_check)
    return _result(request, chosen, max_messages=max_messages, parameter_names=parameter_names)


def _workload(grouping_sets: int | None, iterations: int | None) -> tuple[Workload, int | None]:
    """The plan's workload and its number of clusters (G or I): exactly one is given."""
    if (grouping_sets is None) == (iterations is None):
        raise InvalidParameterError(
            "grouping_sets/iterations",
            "exactly one of them",
            "both" if grouping_sets is not None else "neither",
        )
    workload: Workload = "aggregate" if grouping_sets is not None else "kmeans"
    return workload, grouping_sets if grouping_sets is not None else iterations


def _infeasible(
    request: PlanRequest,
    options: SearchOptions,
    *,
    progress: bool,
    parameter_names: Mapping[str, str],
) -> DpcommError:
    """The error when no candidate fits the channel limit: what to relax, from wider searches."""
    unlimited_channels = replace(request, max_channels=None)
    fewest = search(unlimited_channels, options, progress=progress, by_channels=True)
    any_channels = [_candidate(request, one) for one in fewest]
    unlimited = any_channels
    if request.max_extra_consents is not None:
        free = replace(request, max_extra_consents=None, min_utility=1.0)
        more = search(free, options, progress=progress)
        unlimited = [_candidate(free, one) for one in more]
        unlimited = [*unlimited, *any_channels]
    return DpcommError(
        infeasible_message(request, any_channels, unlimited, options.max_dummies, parameter_names)
    )


def _checked_best(
    request: PlanRequest,
    candidates: list[PlanCandidate],
    found: Sequence[Found],
    search_check: Feasibility,
) -> _Chosen:
    """The least-load candidate once checked again, and the candidates (all, within limits).

    The chosen configuration is checked again (d − 1 fails from scratch; d passes with the
    PLDs on the final grid) before its ε is computed; when its d changes, it is costed again
    and the choice is made anew.
    """
    by_key = {order_key(c): one for c, one in zip(candidates, found, strict=True)}
    final_check = Feasibility(request, interval=FINAL_INTERVAL)
    limited = [c for c in candidates if request.allows_channels(c.max_channels_per_node)]
    while True:
        best = min(limited, key=order_key)
        key = order_key(best)
        checked = _verified(by_key[key], search_check, final_check)
        if checked.configuration.num_dummies == by_key[key].configuration.num_dummies:
            return best, candidates, limited
        del by_key[key]
        by_key[order_key(_candidate(request, checked))] = checked
        candidates = [_candidate(request, one) for one in by_key.values()]
        limited = [c for c in candidates if request.allows_channels(c.max_channels_per_node)]


def _result(
    request: PlanRequest,
    chosen: _Chosen,
    *,
    max_messages: int | None,
    parameter_names: Mapping[str, str],
) -> PlannerResult:
    """The chosen candidate, if within ``max_messages``, with its ε and the Pareto front."""
    best, candidates, limited = chosen
    if max_messages is not None and best.network_load_messages > max_messages:
        raise DpcommError(
            too_many_messages(request, best.network_load_messages, max_messages, parameter_names)
        )
    privacy = planned_privacy(request, best)
    best = replace(best, epsilon=privacy.guarantee.epsilon, delta=privacy.guarantee.delta)
    front = tuple(
        best if c.costs == best.costs else c
        for c in pareto_front(limited)
        if max_messages is None or c.network_load_messages <= max_messages
    )
    chosen_costs = costs_for(request, best.configuration.countermeasure, best.num_sources)
    return PlannerResult(
        **best.candidate_fields(),
        pareto=front,
        nonprivate_load_messages=costs_for(
            request, NoCountermeasure(), request.num_sources
        ).messages,
        num_candidates=len(candidates),
        channels_by_role=chosen_costs.channels_by_role,
        request=request,
        privacy=privacy,
    )
