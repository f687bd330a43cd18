"""What to relax, and by how much, when no configuration meets the target within the limits.

`infeasible_message` is the one line of the `dpcomm.errors.DpcommError` the
planner raises: the limit to relax (as the caller spells it: Python keywords, or the CLI's
flags) and the least value that works, from searches without that limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dpcomm.calibration.configuration import PlanCandidate
from dpcomm.calibration.request import PlanRequest


def _limits_text(request: PlanRequest) -> str:
    """``"at most 15 channels per node and at most 0 extra consents (utility >= 1)"``."""
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
    name: name
    for name in (
        "epsilon",
        "delta",
        "max_channels",
        "max_extra_consents",
        "min_utility",
        "max_messages",
    )
}


def too_many_messages(
    request: PlanRequest,
    least_load: int,
    max_messages: int,
    names: Mapping[str, str] = PYTHON_PARAMETER_NAMES,
) -> str:
    """One line: the least network load meeting the target exceeds the limit on it."""
    return (
        f"no configuration meets ε ≤ {request.epsilon:g} at δ = {request.delta:g} within "
        f"{names['max_messages']} = {max_messages:,}: the least network load is "
        f"{least_load:,} messages (raise {names['max_messages']} or {names['epsilon']})"
    )


def infeasible_message(
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
        within = [c for c in unlimited if request.allows_channels(c.max_channels_per_node)]
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
