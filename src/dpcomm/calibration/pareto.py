"""The order of the feasible candidates and their Pareto front.

The answer is the feasible candidate of minimal network load (ties: fewer channels, then fewer
consents, scramblers before local, smaller σ, smaller n: `order_key`). The Pareto front
over (network load, max channels, extra consents) of the feasible candidates the search
evaluated is returned with it: the pruned configurations all cost more than the answer, so the
front's members of least load are exact, the rest a sample. This goes beyond the paper, which
explores the trade-offs by plotting them (Section 5.2).
"""

from __future__ import annotations

from collections.abc import Sequence

from dpcomm.calibration.configuration import PlanCandidate


def order_key(candidate: PlanCandidate) -> tuple[int, int, int, int, float, int]:
    """(load, channels, consents, scramblers before local, σ, n): the planner's preference."""
    configuration = candidate.configuration
    return (
        *candidate.costs,
        0 if configuration.mechanism == "scrambler" else 1,
        configuration.sampling_rate,
        configuration.batch_size or 0,
    )


def pareto_front(candidates: Sequence[PlanCandidate]) -> tuple[PlanCandidate, ...]:
    """The candidates not dominated in (network load, max channels, extra consents), by load.

    One candidate is kept per distinct cost vector (the first by `order_key`).
    """
    ordered = sorted(candidates, key=order_key)
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
