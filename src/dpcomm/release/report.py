"""A noisy release described: the run's report of it, and what a result node publishes.

A run's report (`dpcomm.pipeline.runs`) and a deployment's result node
(`dpcomm.engine.network.deploy.published_result`, through the program's release) describe a
release the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.compose import ReleaseComposition, compose_release

Row = dict[str, Any]


@dataclass(frozen=True)
class ReleasedAggregate:
    """One released aggregate's noise.

    Attributes:
        aggregate: what is released (``COUNT(*)``, ``SUM(body_mass_g in [2500, 6500])``).
        noise: ``laplace``, ``gaussian``, with ``discrete`` for integer noise.
        sensitivity_l1: L1 sensitivity of its vector over every grouping set.
        sensitivity_l2: L2 sensitivity of the same vector.
        scale: Laplace's b or the Gaussian's standard deviation.
        standard_deviation: the noise's standard deviation (its expected error).
        half_width_95: half-width of the noise's central 95% interval.
        epsilon: its share of the release's ε.
        delta: its share of the release's δ.
    """

    aggregate: str
    noise: str
    sensitivity_l1: float
    sensitivity_l2: float
    scale: float
    standard_deviation: float
    half_width_95: float
    epsilon: float
    delta: float


@dataclass(frozen=True)
class KeySelectionReport:
    """How the keys of grouping sets without a public domain were selected.

    OpenDP's threshold mechanism added the noise of ``count`` to the count of every key
    that received a tuple and released the keys whose noisy count reached ``threshold``
    (the result's rows of these grouping sets are exactly these keys).

    Attributes:
        mechanism: OpenDP's measurement (``make_laplace_threshold``, ...).
        count: the released COUNT thresholded (``COUNT(*)``; ``added`` when the query has
            none: a COUNT(*) released only to select keys, with its share of ε).
        threshold: τ, the smallest integer whose OpenDP privacy map gives δ ≤ ``delta``.
        delta: δ_sel, part of the release's δ.
        opendp_delta: OpenDP's δ at ``threshold`` for one row replaced (at most ``delta``).
        changed_keys: l0, the keys whose counts one replaced row changes (2 per grouping set).
        grouping_sets: the grouping sets whose keys were selected.
        selected_keys: per such grouping set, the keys released (None before the run).
    """

    mechanism: str
    count: str
    threshold: int
    delta: float
    opendp_delta: float
    changed_keys: int
    grouping_sets: tuple[str, ...]
    selected_keys: Mapping[str, tuple[tuple[Any, ...], ...]] | None = None

    def describe(self) -> str:
        """``keys of (species) selected by a threshold τ = 57 on the noisy COUNT(*) ...``."""
        sets = ", ".join(self.grouping_sets)
        text = (
            f"keys of {sets} selected by OpenDP's {self.mechanism}: released where the noisy "
            f"{self.count} is at least τ = {self.threshold} (δ = {self.delta:g})"
        )
        if self.selected_keys is not None:
            shown = ", ".join(f"{name} {len(k):,}" for name, k in self.selected_keys.items())
            text += f"; keys released: {shown}"
        return text


@dataclass(frozen=True)
class ReleaseReport:
    """The noisy release and one guarantee for traffic and release.

    Against an observer of the traffic only, the plan's (ε1, δ1) of ``report.privacy``;
    against a reader of the release only, (``epsilon``, ``delta``) = (ε2, δ2); against an
    observer of both, ``composed_epsilon`` at ``composed_delta`` = δ1 + δ2 (privacy loss
    distributions composed; None where unavailable) and the paper's sum
    (``summed_epsilon`` = ε1 + ε2 at the same δ), of which the smaller is the guarantee.

    Attributes:
        mechanism: ``laplace`` or ``gaussian``.
        epsilon: ε2 of the release.
        delta: δ2 of the release.
        keys: how the released keys were chosen.
        composed_epsilon: traffic and release composed by PLD, at ``composed_delta``.
        composed_delta: δ1 + δ2.
        summed_epsilon: ε1 + ε2 (basic composition, the paper's statement).
        epsilon_total: the guarantee against an observer of both: the smaller of the two.
        aggregates: every released aggregate's noise.
        key_selection: how keys were selected by a threshold (None: every key released
            comes from a public domain).
        split: each released aggregate with its share of ε2, chosen to minimise the
            published values' expected error (`dpcomm.release.mechanisms.release_shares`).
        split_rule: how ε2 was split (K-means's release: equally).
    """

    mechanism: str
    epsilon: float
    delta: float
    keys: str
    composed_epsilon: float | None
    composed_delta: float
    summed_epsilon: float
    epsilon_total: float
    aggregates: tuple[ReleasedAggregate, ...]
    key_selection: KeySelectionReport | None = None
    split: tuple[tuple[str, float], ...] = ()
    split_rule: str = "to minimise the published values' expected error"

    def describe_split(self) -> str:
        """``ε2 = 1 split to minimise the published values' expected error: COUNT(*) 0.2, ...``."""
        shares = ", ".join(f"{aggregate} {share:.4g}" for aggregate, share in self.split)
        return f"ε2 = {self.epsilon:.4g} split {self.split_rule}: {shares}"


def release_report(
    program: AggregateProgram,
    privacy: PlanGuarantee,
    released: list[list[Row]] | None = None,
    *,
    composition: ReleaseComposition | None = None,
) -> ReleaseReport:
    """The release's noise and its composition with the traffic's guarantee ``privacy``.

    ``released`` (each grouping set's released core rows) gives the keys a threshold
    selected; without it (before the run) the report has none. ``composition``: the
    composition already computed (the run pipeline's `dpcomm.pipeline.job.Guarantee`).
    """
    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    both = composition or compose_release(privacy, release.charged)
    aggregates = _aggregates_report(program)
    return ReleaseReport(
        mechanism=release.mechanism.name,
        epsilon=release.epsilon,
        delta=release.delta,
        keys=_keys_described(program),
        composed_epsilon=both.composed_epsilon,
        composed_delta=both.delta,
        summed_epsilon=both.summed_epsilon,
        epsilon_total=both.epsilon,
        aggregates=aggregates,
        key_selection=_key_selection_report(program, released),
        split=tuple((a.aggregate, a.epsilon) for a in aggregates),
    )


def published_release(program: AggregateProgram, state: Any) -> dict[str, Any]:
    """What the result node of a deployment publishes under a noisy release (JSON-ready).

    The released rows (post-processed: counts ≥ 0, totals consistent on request), the raw
    noisy rows, and the release's own guarantee (ε2, δ2, each aggregate's noise, the keys and
    their selection). The noise is drawn here, in the result node's process, once
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
            "raw_rows": program.raw_result(state),  # before counts are clamped, unbiased
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
    for quantile in release.quantiles:
        low, high = quantile.candidates[0], quantile.candidates[-1]
        described = (
            f"{program.query.output_label(quantile.output)} (quantile {quantile.alpha:g} over "
            f"{len(quantile.candidates)} candidates in [{low:g}, {high:g}])"
        )
        aggregates.append(
            ReleasedAggregate(
                described,
                "exponential (OpenDP private quantile; sensitivity: values moved)",
                float(quantile.distance),
                float(quantile.distance),
                quantile.scale,
                math.nan,  # in the column's units: depends on the data
                math.nan,
                quantile.epsilon,
                quantile.total_delta,
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
        centre = dict(program.query.centres).get(output.column)
        # A centred sum is released as Σ (x − c): the SUM minus c times the COUNT.
        centred = "" if centre is None or function == "COUNT" else f" − {centre:g} × COUNT"
        return f"{function}({column} clamped to [{low:g}, {high:g}]){centred}"
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


__all__ = [
    "KeySelectionReport",
    "ReleaseReport",
    "ReleasedAggregate",
    "published_release",
    "release_report",
]
