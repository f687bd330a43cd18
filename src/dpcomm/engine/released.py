"""A noisy release described: the run's report of it, and what a result node publishes.

Apart from `dpcomm.engine.runs` so that the networked runtime's result node
(`dpcomm.engine.network.deploy.published_result`) describes a release the way a run's
report does, without importing the engines.
"""

from __future__ import annotations

from typing import Any

from dpcomm.engine.report import KeySelectionReport, ReleasedAggregate, ReleaseReport
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.queries.aggregate import AggregateProgram

Row = dict[str, Any]


def release_report(
    program: AggregateProgram,
    privacy: PlanGuarantee,
    released: list[list[Row]] | None = None,
) -> ReleaseReport:
    """The release's noise and its composition with the traffic's guarantee ``privacy``.

    ``released`` (each grouping set's released core rows) gives the keys a threshold
    selected; without it (before the run) the report has none.
    """
    from dpcomm.plan.privacy import compose_release

    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    both = compose_release(privacy, release.noises)
    return ReleaseReport(
        mechanism=release.mechanism.name,
        epsilon=release.epsilon,
        delta=release.delta,
        keys=_keys_described(program),
        composed_epsilon=both.composed_epsilon,
        composed_delta=both.delta,
        summed_epsilon=both.summed_epsilon,
        epsilon_total=both.epsilon,
        aggregates=_aggregates_report(program),
        key_selection=_key_selection_report(program, released),
    )


def published_release(program: AggregateProgram, state: Any) -> dict[str, Any]:
    """What the result node of a deployment publishes under a noisy release (JSON-ready).

    The released rows and the release's own guarantee (ε2, δ2, each aggregate's noise, the
    keys and their selection). The noise is drawn here, in the result node's process, once
    per state (`AggregateProgram.core_result`): the exact aggregates do not leave the node.
    Not the composition with the traffic: it depends on the batches the scramblers actually
    ran, which the coordinator knows (``dpcomm deploy configs`` prints the planned one).
    """
    from dataclasses import asdict

    from dpcomm._json import json_ready

    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    released = program.core_result(state)
    selection = _key_selection_report(program, released)
    published: dict[str, Any] = json_ready(
        {
            "rows": program.result(state),
            "release": {
                "mechanism": release.mechanism.name,
                "epsilon": release.epsilon,
                "delta": release.delta,
                "keys": _keys_described(program),
                "aggregates": [asdict(a) for a in _aggregates_report(program)],
                "key_selection": None if selection is None else asdict(selection),
            },
        }
    )
    return published


def _aggregates_report(program: AggregateProgram) -> tuple[ReleasedAggregate, ...]:
    """Every released aggregate's noise, described."""
    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    aggregates = []
    for noise in release.noises:
        described = _released_label(program, noise.output)
        if release.selection is not None and noise.output == release.selection.count_output:
            described += " (selects keys" + (
                ", added for it)" if release.selection.count_added else ")"
            )
        kind = release.mechanism.name + (" (discrete)" if noise.integer else "")
        aggregates.append(
            ReleasedAggregate(
                described,
                kind,
                noise.sensitivity.l1,
                noise.sensitivity.l2,
                noise.scale,
                noise.standard_deviation,
                noise.half_width_95,
                noise.epsilon,
                noise.total_delta,
            )
        )
    return tuple(aggregates)


def _released_label(program: AggregateProgram, name: str) -> str:
    """``COUNT(*)``, ``SUM(body_mass_g clamped to [2500, 6500])``: a released core column."""
    output = next(o for o in program.query.outputs if o.name == name)
    clamps = {name: (column, low, high) for name, column, low, high in program.query.clamps}
    if output.function == "count_star":
        return "COUNT(*)"
    if output.column in clamps:
        column, low, high = clamps[output.column]
        function = "SUM" if output.function == "sum" else "COUNT"
        return f"{function}({column} clamped to [{low:g}, {high:g}])"
    return f"{(output.function or '').upper()}({output.column})"


def _keys_described(program: AggregateProgram) -> str:
    """How each grouping set's released keys were chosen, in a few words."""
    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    selected = set() if release.selection is None else set(release.selection.grouping_sets)
    domains = dict(release.domains)
    public = [
        " × ".join(str(len(domains[c])) for c in columns) if columns else "1"
        for index, columns in enumerate(program.query.grouping_sets)
        if index not in selected
    ]
    parts = []
    if public:
        parts.append(
            f"public key domain ({' + '.join(public)} keys: every key released, absent ones too)"
        )
    if selected:
        threshold = release.selection.threshold if release.selection else 0
        sets = ", ".join(program.flow_names[i] for i in sorted(selected))
        parts.append(f"keys of {sets} selected by a noisy-count threshold τ = {threshold}")
    return "; ".join(parts)


def _key_selection_report(
    program: AggregateProgram, released: list[list[Row]] | None
) -> KeySelectionReport | None:
    """The key selection's threshold and δ, and the keys it released (None: no selection)."""
    release = program.release
    selection = None if release is None else release.selection
    if release is None or selection is None:
        return None
    counted = _released_label(program, selection.count_output)
    keys = None
    if released is not None:
        keys = {
            program.flow_names[index]: tuple(
                tuple(row[c] for c in program.query.grouping_sets[index]) for row in released[index]
            )
            for index in selection.grouping_sets
        }
    gaussian = release.mechanism.name == "gaussian"
    return KeySelectionReport(
        mechanism="make_gaussian_threshold" if gaussian else "make_laplace_threshold",
        count=counted + (" (added)" if selection.count_added else ""),
        threshold=selection.threshold,
        delta=selection.delta,
        opendp_delta=selection.accounted_delta,
        changed_keys=selection.distances.l0,
        grouping_sets=tuple(program.flow_names[i] for i in selection.grouping_sets),
        selected_keys=keys,
    )


__all__ = ["published_release", "release_report"]
