"""A calibration's release: what ``release=`` of `dpcomm.calibrate` takes, and its split.

[`release_kind`][] reads ``release=`` (a name or a class: the calibration chooses its ε);
[`release_shape`][] reads what the query's release publishes, public quantities only; and
[`split_release`][] splits (ε, δ) between the traffic and that release
([`dpcomm.calibration.split.split_budget`][]).

The accountant and the release's noise are imported on first use (they need scipy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_delta, check_number

if TYPE_CHECKING:
    from dpcomm.calibration.planner import PlannerResult
    from dpcomm.calibration.split import BudgetSplit, ReleaseName, ReleaseShape

#: What ``release=`` of `dpcomm.calibrate` takes.
RELEASE_KINDS = "'laplace' or 'gaussian' (or the class dpcomm.Laplace or dpcomm.Gaussian)"


def release_kind(release: object) -> ReleaseName | None:
    """``release`` of `dpcomm.calibrate` as ``"laplace"``, ``"gaussian"`` or None.

    A mechanism with its ε (``dpcomm.Laplace(epsilon=1)``) is refused: its ε is what the
    calibration chooses.
    """
    from dpcomm.release.mechanisms import Gaussian, Laplace

    if release is None:
        return None
    if release is Laplace or (isinstance(release, str) and release.lower() == "laplace"):
        return "laplace"
    if release is Gaussian or (isinstance(release, str) and release.lower() == "gaussian"):
        return "gaussian"
    if isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError("release", f"{RELEASE_KINDS}: calibrate chooses its ε", release)
    raise InvalidParameterError("release", RELEASE_KINDS, release)


def release_placeholder(kind: ReleaseName, delta: float) -> Any:
    """A release of the right kind to bind the query with (its ε is replaced by the split's)."""
    from dpcomm.calibration.split import release_mechanism

    checked = check_delta("delta", delta)
    return release_mechanism(kind, epsilon=1.0, delta=0.5 * checked)


def release_shape(program: Any) -> ReleaseShape:
    """What the release of ``program`` publishes, as the split's error model sees it.

    ``program`` is an `dpcomm.queries.aggregate.AggregateProgram` bound with a release; the
    shape holds public quantities only ([`ReleaseShape`][dpcomm.calibration.split.ReleaseShape]).
    """
    import math

    from dpcomm.calibration.split import ReleaseShape
    from dpcomm.release.mechanisms import aggregate_sensitivity

    release = program.release
    query = program.query
    clamps = {name: (low, high) for name, _, low, high in query.clamps}
    outputs = {o.name: o for o in query.outputs}
    magnitudes = []
    for noise in release.noises:
        column = outputs[noise.output].column
        if noise.function == "sum" and column in clamps:
            low, high = clamps[column]
            magnitudes.append(0.5 * (abs(low) + abs(high)))
        else:
            magnitudes.append(1.0)
    domains = dict(release.domains)
    grouping_sets = tuple(
        (
            math.prod(len(domains[c]) for c in columns)
            if all(c in domains for c in columns)
            else program.targets_of(index),  # keys selected by a threshold: not public
            program.targets_of(index),
        )
        for index, columns in enumerate(query.grouping_sets)
    )
    selection = release.selection
    independent = []
    for noise in release.noises:
        column = outputs[noise.output].column
        low, high = clamps.get(column, (0.0, 0.0)) if noise.function == "sum" else (0.0, 0.0)
        sensitivity = aggregate_sensitivity(
            noise.function,
            query.grouping_sets,
            bound=max(abs(low), abs(high)),
            width=high - low,
            views=["own-row"] * len(query.grouping_sets),
        )
        independent.append((noise.output, noise.function, sensitivity))
    return ReleaseShape(
        num_rows=program.num_sources,
        aggregates=tuple((n.output, n.function, n.sensitivity) for n in release.noises),
        independent_aggregates=tuple(independent),
        magnitudes=tuple(magnitudes),
        grouping_sets=grouping_sets,
        selection=None if selection is None else (selection.count_output, selection.delta),
    )


def split_release(
    kind: ReleaseName,
    program: Any,
    epsilon: float,
    delta: float,
    plan_traffic: Callable[[float, float], PlannerResult],
) -> BudgetSplit:
    """`dpcomm.calibration.split.split_budget` for the release of ``program``."""
    from dpcomm.calibration.split import split_budget

    shape = release_shape(program)
    return split_budget(
        shape=shape,
        release=kind,
        epsilon=check_number("epsilon", epsilon, above=0.0),
        delta=check_delta("delta", delta),
        plan_traffic=plan_traffic,
    )
