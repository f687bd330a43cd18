"""A noisy release of an Aggregate result: central DP on what the result node publishes.

The result node releases, for every grouping set, the rows of its keys, chosen one of two ways:

* **A public key domain** given by the user (the product of each key column's listed
  values): keys that received no tuple are released too (COUNT and SUM 0, plus noise), keys
  outside the domain are not, so the set of released keys never depends on the data.
* **Key selection** (``key_selection_delta``), for a grouping set with a column without a
  domain: OpenDP's threshold mechanism (``make_laplace_threshold``,
  ``make_gaussian_threshold``) adds a released COUNT's noise (COUNT(*) if the query has one,
  else another COUNT, else a COUNT(*) added for it) to the count of every key that received
  a tuple and releases the keys whose noisy count reaches a threshold τ, with that noisy
  count; τ is the smallest whose OpenDP privacy map gives δ ≤ ``key_selection_delta``
  for the distances of one row replaced ([`dpcomm.release.mechanisms.selection_distances`][]).
  A key held by a few rows is released only with small probability; its presence is then
  covered by δ_sel. The other aggregates are released, with noise, for the selected keys.

Each COUNT and SUM gets noise drawn by OpenDP (integer noise for counts: discrete Laplace or
discrete Gaussian), once, at the result node; an AVG is the noisy SUM over the noisy COUNT.
The noise's scale follows from the query ([`dpcomm.release.mechanisms`][]); OpenDP's own
privacy map of every measurement is checked against it before any noise is drawn. Under key
selection that COUNT's noise is the threshold mechanism's on the selected grouping sets and
plain noise of the same scale on the others: their privacy maps add up to the COUNT's share
of the budget (ε_i for Laplace, the zCDP ρ_i for the Gaussian), plus δ_sel.

The noise is drawn from OpenDP's cryptographically secure generator, never from the run's
seed: a seeded noise would be predictable by whoever holds the seed, and the release would
not be private. A seeded run is therefore reproducible up to the release's noise.
"""

from __future__ import annotations

import abc
import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dpcomm.accounting.search import integer_crossing
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasures, shares_blanket
from dpcomm.queries.groupby import key_order, node_of_key
from dpcomm.queries.query import BoundAggregate
from dpcomm.release.mechanisms import (
    MAP_TOLERANCE,
    AggregateNoise,
    Charged,
    JointView,
    ReleasedFunction,
    ReleaseMechanism,
    SelectionDistances,
    Sensitivity,
    ValueUses,
    aggregate_sensitivity,
    calibrate_noise,
    centred_sum_sensitivity,
    check_key_selection_delta,
    release_shares,
    rho_for,
    selection_distances,
    threshold_for,
)
from dpcomm.release.quantile import (
    QuantileNoise,
    calibrate_quantile,
    candidate_grid,
    quantile_distance,
    released_quantile,
)

if TYPE_CHECKING:
    from dpcomm.data.partitioned import RowSource
    from dpcomm.data.table import Table
    from dpcomm.plan.privacy import PlanGuarantee
    from dpcomm.queries.aggregate import AggregateProgram, AggregateState
    from dpcomm.release.compose import ReleaseComposition

Row = dict[str, Any]

#: The largest threshold tried (OpenDP's integer counts are 32-bit).
MAX_THRESHOLD = 2**31 - 1


@dataclass(frozen=True)
class KeySelection:
    """Keys chosen by OpenDP's threshold mechanism, for grouping sets without a public domain.

    Attributes:
        delta: δ_sel, as given: a bound on the chance that a key some neighbouring table
            lacks is released.
        grouping_sets: the indices of the grouping sets whose keys are selected.
        count_output: the COUNT column whose noisy values are thresholded (and released).
        count_added: whether that COUNT was added for the selection (the query has none).
        threshold: τ: a key is released when its noisy count is at least τ.
        distances: (l0, l1, l∞) of the thresholded counts of neighbouring tables.
        accounted_loss: OpenDP's map of the threshold measurement at these distances: its ε
            (Laplace) or zCDP ρ (Gaussian).
        accounted_delta: OpenDP's δ at τ (at most ``delta``).
    """

    delta: float
    grouping_sets: tuple[int, ...]
    count_output: str
    count_added: bool
    threshold: int
    distances: SelectionDistances
    accounted_loss: float
    accounted_delta: float


class ReleaseShares(abc.ABC):
    """ε2 and δ2 of a release: the sums of the shares of what it charges."""

    @property
    @abc.abstractmethod
    def charged(self) -> tuple[Charged, ...]:
        """Every released aggregate's (ε_i, δ_i)."""

    @property
    def epsilon(self) -> float:
        """ε2: the sum of the aggregates' shares (the key selection's is its COUNT's)."""
        return math.fsum(n.epsilon for n in self.charged)

    @property
    def delta(self) -> float:
        """δ2: the sum of the aggregates' shares, and the key selection's δ_sel."""
        return math.fsum(n.total_delta for n in self.charged)

    def composed_with(self, traffic: PlanGuarantee) -> ReleaseComposition:
        """``traffic``'s guarantee and this release composed: what an observer of both learns.

        The composition a run reports and a budget charges (`dpcomm.release.compose`).
        """
        from dpcomm.release.compose import compose_release

        return compose_release(traffic, self.charged)


@dataclass(frozen=True)
class Release(ReleaseShares):
    """A query's noisy release: its mechanism, each aggregate's noise, the key domains.

    Attributes:
        mechanism: Laplace or Gaussian, with the release's budget (ε2, δ2).
        noises: the noise of every released aggregate (core output columns).
        domains: key columns of the query (core names) with their public values.
        selection: how the keys of grouping sets without a public domain are selected (None:
            every grouping set has a domain).
        views: each grouping set's `JointView`, which set the sensitivities.
        shared_blanket: whether the sensitivities cover scramblers with sampling (one other
            source's tuple; `dpcomm.plan.countermeasures.shares_blanket`).
        consistent_totals: whether the published totals are made consistent across grouping
            sets (`dpcomm.release.postprocess`; post-processing, no privacy cost).
        quantiles: each released quantile's mechanism (`dpcomm.release.quantile`).
    """

    mechanism: ReleaseMechanism
    noises: tuple[AggregateNoise, ...]
    domains: tuple[tuple[str, tuple[object, ...]], ...]
    selection: KeySelection | None = None
    views: tuple[JointView, ...] = ()
    shared_blanket: bool = True
    consistent_totals: bool = False
    quantiles: tuple[QuantileNoise, ...] = ()

    @property
    def charged(self) -> tuple[Charged, ...]:
        """Every released aggregate's (ε_i, δ_i): the noisy ones and the quantiles."""
        return (*self.noises, *self.quantiles)

    # The hooks `dpcomm.queries.aggregate.AggregateProgram` calls (its ``NoisyRelease``).

    def check_for(self, countermeasures: Countermeasures) -> None:
        """`check_release_for` this release."""
        check_release_for(self, countermeasures)

    def to_spec(self) -> dict[str, Any]:
        """`release_spec` of this release."""
        return release_spec(self)

    def released_rows(
        self, bound: BoundAggregate, rows_by_set: Sequence[Sequence[Row]]
    ) -> list[list[Row]]:
        """`released_rows` of this release: each grouping set's rows, noisy."""
        return released_rows(bound, self, rows_by_set)

    def published_rows(
        self, bound: BoundAggregate, raw: Sequence[Sequence[Row]]
    ) -> list[list[Row]]:
        """[`dpcomm.release.postprocess.published_rows`][]: counts ≥ 0, totals consistent."""
        from dpcomm.release.postprocess import published_rows

        return published_rows(bound, self, raw)

    def published(self, program: AggregateProgram, state: AggregateState) -> dict[str, Any]:
        """[`dpcomm.release.report.published_release`][] of ``program``'s final ``state``."""
        from dpcomm.release.report import published_release

        return published_release(program, state)


def check_release_for(release: Release, countermeasures: Countermeasures) -> None:
    """Refuse to run ``release`` with ``countermeasures`` it was not calibrated for.

    A release bound for traffic that delivers each tuple independently (``shared_blanket``
    False: its sensitivities cover the replaced row only) does not hold under scramblers with
    sampling (`dpcomm.plan.countermeasures.shares_blanket`).
    """
    if release.shared_blanket or not shares_blanket(countermeasures):
        return
    raise InvalidParameterError(
        "countermeasure",
        "the countermeasure the release was bound for (its noise covers traffic that delivers "
        "each tuple independently; bind the release with this countermeasure)",
        "scramblers with sampling",
    )


def noisy_program(
    sql: str,
    data: Table | RowSource,
    *,
    release: ReleaseMechanism | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    keys: Mapping[str, Sequence[object]] | None = None,
    key_selection_delta: float | None = None,
    countermeasure: Countermeasures | None = None,
    consistent_totals: bool = False,
    **shape: Any,
) -> AggregateProgram:
    """``sql`` compiled over ``data`` (`AggregateProgram.from_sql` with ``shape``), released.

    ``release`` (Laplace or Gaussian; None: the exact result, no bounds, keys or δ_sel
    allowed) releases the result with noise: ``bounds`` clamp the columns a SUM or AVG
    reads, ``keys`` give grouping columns their public domains, and ``key_selection_delta``
    selects the keys of grouping sets without one by a DP threshold on a noisy COUNT
    (`bind_release`). The sensitivities are those of ``countermeasure`` (None: any
    countermeasure, scramblers with sampling included); a program bound for one
    countermeasure runs with it (`check_release_for`). ``consistent_totals`` publishes
    totals consistent across grouping sets (`dpcomm.release.postprocess`).
    """
    from dpcomm.queries.aggregate import AggregateProgram

    if release is None:
        if bounds is not None or keys is not None or key_selection_delta is not None:
            raise InvalidParameterError(
                "release",
                "Laplace(...) or Gaussian(...) when bounds, keys or key_selection_delta are given",
                None,
            )
        return AggregateProgram.from_sql(sql, data, **shape)
    program = AggregateProgram.from_sql(
        sql, data, bounds=bounds or {}, count_rows=key_selection_delta is not None, **shape
    )
    return with_release(
        program,
        release,
        keys,
        key_selection_delta=key_selection_delta,
        countermeasure=countermeasure,
        consistent_totals=consistent_totals,
    )


def with_release(
    program: AggregateProgram,
    release: ReleaseMechanism,
    keys: Mapping[str, Sequence[object]] | None,
    *,
    key_selection_delta: float | None = None,
    countermeasure: Countermeasures | None = None,
    consistent_totals: bool = False,
) -> AggregateProgram:
    """``program``, compiled with its bounds, with its noisy release bound.

    `noisy_program`'s second step, for whoever keeps the compiled query and binds releases to
    it again. The sensitivities are those of ``countermeasure`` (None: any countermeasure).
    """
    bound = bind_release(
        program.query,
        release,
        keys,
        key_selection_delta=key_selection_delta,
        num_targets=program.num_targets,
        shared_blanket=countermeasure is None or shares_blanket(countermeasure),
        consistent_totals=consistent_totals,
    )
    return replace(program, release=bound)


def release_spec(release: Release) -> dict[str, Any]:
    """The public description of ``release``, JSON-ready (`release_from_spec` rebinds it).

    Its mechanism with (ε2, δ2), each key domain (values as text, as the CLI takes them) and
    the key selection's δ_sel: what `bind_release` needs to bind the same release again; and
    each aggregate's share of ε2, which the node's own binding must reproduce exactly.
    """
    mechanism = release.mechanism
    return {
        "mechanism": mechanism.name,
        "epsilon": mechanism.epsilon,
        "delta": mechanism.delta,
        "keys": {column: [_key_text(v) for v in values] for column, values in release.domains},
        "key_selection_delta": None if release.selection is None else release.selection.delta,
        "shared_blanket": release.shared_blanket,
        "shares": {n.output: n.epsilon for n in release.charged},
        "consistent_totals": release.consistent_totals,
        "module": __name__,  # what a node imports to bind it again (`release_from_spec`)
    }


def release_from_spec(
    bound: BoundAggregate, spec: Mapping[str, Any], *, num_targets: int
) -> Release:
    """The release `release_spec` describes, bound again to ``bound`` over T = ``num_targets``."""
    from dpcomm.release.mechanisms import mechanism_from_spec

    mechanism = mechanism_from_spec(spec)
    selection = spec.get("key_selection_delta")
    release = bind_release(
        bound,
        mechanism,
        spec.get("keys") or None,
        key_selection_delta=None if selection is None else float(selection),
        num_targets=num_targets,
        shared_blanket=bool(spec.get("shared_blanket", True)),
        consistent_totals=bool(spec.get("consistent_totals", False)),
    )
    shares = {n.output: n.epsilon for n in release.charged}
    described = spec.get("shares")
    if described is not None and {k: float(v) for k, v in described.items()} != shares:
        raise InvalidParameterError(
            "release shares", f"the shares of ε this node computes ({shares})", described
        )
    return release


def _key_text(value: object) -> object:
    """A key value as `_typed` reads it back: text, or None (NULL)."""
    import datetime

    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return str(value)


def bind_release(
    bound: BoundAggregate,
    mechanism: ReleaseMechanism,
    keys: Mapping[str, Sequence[object]] | None,
    *,
    key_selection_delta: float | None = None,
    num_targets: int,
    shared_blanket: bool = True,
    consistent_totals: bool = False,
) -> Release:
    """The release of ``bound`` (a query bound with ``bounds``, see ``bind_sql``).

    ``keys`` gives grouping columns their public domains; a grouping set with a column
    without one has its keys selected by a threshold when ``key_selection_delta`` is given
    (``bound`` then has a COUNT, see ``bind_sql(count_rows=True)``). ``num_targets`` is T, the
    compute nodes of each grouping set with keys, and ``shared_blanket`` whether the traffic
    may run scramblers with sampling: they set the sensitivities ([`joint_views`][]).
    ``consistent_totals``: publish totals consistent across grouping sets.

    Raises:
        InvalidParameterError: a grouping column without a key domain (and no key
            selection), a key selection nothing needs, a domain for a column the query does
            not group by, or an aggregate a release cannot carry.
    """
    domains = _key_domains(bound, keys)
    selected = tuple(
        index
        for index, columns in enumerate(bound.grouping_sets)
        if any(c not in domains for c in columns)
    )
    if selected and key_selection_delta is None:
        missing = [c for c in bound.grouping_columns if c not in domains]
        raise InvalidParameterError(
            "keys",
            "a public domain for every grouping column under a noisy release, or "
            "key_selection_delta= (--key-selection-delta) to select keys by a DP threshold "
            "(keys that occur in the data are never released as they are)",
            f"none for {', '.join(bound.key_label(c) for c in missing)}",
        )
    if key_selection_delta is not None:
        key_selection_delta = check_key_selection_delta(key_selection_delta)
        if not selected:
            raise InvalidParameterError(
                "key_selection_delta",
                "None when every grouping set's keys have a public domain (keys=)",
                key_selection_delta,
            )
    views = joint_views(
        bound, domains, selected, num_targets=num_targets, shared_blanket=shared_blanket
    )
    noises, quantiles = _calibrated(bound, mechanism, views, shared_blanket=shared_blanket)
    release = Release(
        mechanism,
        noises,
        tuple(sorted(domains.items())),
        None,
        views,
        shared_blanket,
        consistent_totals is True,
        quantiles,
    )
    if key_selection_delta is not None:
        release = _with_selection(bound, release, selected, key_selection_delta)
    if release.consistent_totals:
        from dpcomm.release.postprocess import finest_set

        finest_set(bound, release)  # refused here, before any run, where totals cannot add up
    return release


def _calibrated(
    bound: BoundAggregate,
    mechanism: ReleaseMechanism,
    views: Sequence[JointView],
    *,
    shared_blanket: bool,
) -> tuple[tuple[AggregateNoise, ...], tuple[QuantileNoise, ...]]:
    """The noise of each COUNT and SUM and the mechanism of each quantile of ``bound``.

    `calibrate_release_parts` of its aggregates (sensitivities of ``views``), its
    quantiles (each over `candidate_grid` of its bounds) and their d (`quantile_distance`).
    """
    quantiles = tuple(
        (carrier, alpha, candidate_grid(low, high, len(bins)))
        for carrier, _, low, high, alpha, bins in bound.quantiles
    )
    return calibrate_release_parts(
        mechanism,
        _released_aggregates(bound, views),
        quantiles,
        quantile_distance(bound.grouping_sets, views),
        shared_blanket=shared_blanket,
        uses=bound.value_uses,
    )


def calibrate_release_parts(
    mechanism: ReleaseMechanism,
    aggregates: Sequence[tuple[str, ReleasedFunction, Sensitivity]],
    quantiles: Sequence[tuple[str, float, tuple[float, ...]]],
    distance: int,
    *,
    shared_blanket: bool,
    uses: ValueUses,
) -> tuple[tuple[AggregateNoise, ...], tuple[QuantileNoise, ...]]:
    """The noise of each COUNT and SUM and the mechanism of each quantile of a release.

    ``quantiles``: each one's output, α and candidates; ``distance``: their d. The release's
    ε is split among all of them (`release_shares`; a quantile's value reads only itself, so
    it weighs as one value of its own), δ equally (a quantile spends none of its share: pure
    ε). A run (`bind_release`) and `dpcomm.calibrate`'s error model calibrate through it.
    """
    placeholders = [(q[0], "count", Sensitivity(distance, distance)) for q in quantiles]
    everything: list[tuple[str, ReleasedFunction, Sensitivity]] = [
        *aggregates,
        *placeholders,  # type: ignore[list-item]
    ]
    if not everything:
        raise InvalidParameterError("release", "a query with COUNT, SUM or a quantile", "none")
    shares = release_shares(mechanism, everything, uses)
    parts = len(everything)
    noises = (
        calibrate_noise(
            mechanism,
            aggregates,
            shared_blanket=shared_blanket,
            uses=uses,
            shares=shares[: len(aggregates)],
            parts=parts,
        )
        if aggregates
        else ()
    )
    delta_share = mechanism.delta / parts
    calibrated = tuple(
        calibrate_quantile(
            output,
            share,
            alpha,
            candidates,
            distance,
            delta_share,
            shared_blanket=shared_blanket,
        )
        for (output, alpha, candidates), share in zip(
            quantiles, shares[len(aggregates) :], strict=True
        )
    )
    return noises, calibrated


def _key_domains(
    bound: BoundAggregate, keys: Mapping[str, Sequence[object]] | None
) -> dict[str, tuple[object, ...]]:
    """``keys`` checked: each grouping column's public values, typed as the column."""
    keys = {} if keys is None else keys
    if not isinstance(keys, Mapping):
        raise InvalidParameterError(
            "keys", "a mapping from each grouping column to its public values", keys
        )
    # a derived key is named as the user wrote it: its alias, or its SQL
    named = [bound.key_label(c) for c in bound.grouping_columns]
    wanted = {label.lower(): c for c, label in bound.key_labels}
    wanted.update({c.lower(): c for c in bound.grouping_columns if c not in dict(bound.key_labels)})
    domains: dict[str, tuple[object, ...]] = {}
    for name, values in keys.items():
        column = wanted.get(str(name).lower())
        if column is None:
            raise InvalidParameterError(
                "keys", f"domains of the query's grouping keys ({', '.join(named)})", name
            )
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise InvalidParameterError(f"keys[{name!r}]", "a non-empty list of values", values)
        sql_type = dict(bound.schema).get(column, "VARCHAR")
        domains[column] = tuple(dict.fromkeys(_typed(v, sql_type, column) for v in values))
    return domains


def joint_views(
    bound: BoundAggregate,
    domains: Mapping[str, Sequence[object]],
    selected: Sequence[int],
    *,
    num_targets: int,
    shared_blanket: bool = True,
) -> tuple[JointView, ...]:
    """Each grouping set's `JointView` for the sensitivity.

    Without ``shared_blanket`` (no scramblers with sampling: each source's tuple arrives
    independently of the others given the traffic) every set is ``own-row``. With it, a set
    whose keys are selected by a threshold (not public), or whose public domain puts two keys
    on one compute node (hashed as the sources hash them, `node_of_key`), is
    ``one-other-shared-node``, the others ``one-other``. The empty set's view does not
    matter (one cell).
    """
    types = dict(bound.schema)
    views: list[JointView] = []
    for index, columns in enumerate(bound.grouping_sets):
        if not columns or not shared_blanket:
            views.append("own-row")
        elif index in selected or _shares_a_node(
            [[_row_value(v, types.get(c, "VARCHAR")) for v in domains[c]] for c in columns],
            num_targets=num_targets,
        ):
            views.append("one-other-shared-node")
        else:
            views.append("one-other")
    return tuple(views)


class _Unsure:
    """A key value whose row form is not certain (it is then assumed to share a node)."""


def _row_value(value: object, sql_type: str) -> object:
    """``value`` as a source holds it in a column of ``sql_type`` (what it hashes), or _Unsure."""
    import datetime
    from decimal import Decimal

    from dpcomm.data.table import value_kind

    kind = value_kind(sql_type)
    if value is None:
        return None
    if type(value) in (int, float):  # not bool, not numpy's or pandas' number types
        number = float(value)  # type: ignore[arg-type]
        if kind in ("int", "wideint") and number.is_integer():
            return int(value)  # type: ignore[call-overload]
        if kind == "float":
            return number + 0.0  # −0.0 is 0.0 (one group; `node_of_key` hashes them alike)
    exact: dict[str | None, type] = {
        "text": str,
        "bool": bool,
        "decimal": Decimal,
        "timestamp": datetime.datetime,
        "date": datetime.date,
    }
    if kind in exact and type(value) is exact[kind]:  # subclasses (pandas' Timestamp) differ
        return value
    return _Unsure()


def _shares_a_node(domains: Sequence[Sequence[object]], *, num_targets: int) -> bool:
    """Whether some compute node may own two keys of the product of ``domains``."""
    size = math.prod(len(d) for d in domains)
    if size > num_targets:
        return True  # pigeonhole
    if any(isinstance(v, _Unsure) for d in domains for v in d):
        return True
    nodes = [node_of_key(key, num_targets) for key in itertools.product(*domains)]
    return len(set(nodes)) < len(nodes)


def _released_aggregates(
    bound: BoundAggregate, views: Sequence[JointView]
) -> list[tuple[str, ReleasedFunction, Sensitivity]]:
    """Every aggregate of ``bound`` with its function and sensitivity in ``views``."""
    centres = dict(bound.centres)
    clamps = {name: (lo, hi) for name, _, lo, hi in bound.clamps}
    drawn = {q[0] for q in bound.quantiles} | {b for q in bound.quantiles for b in q[5]}
    aggregates: list[tuple[str, ReleasedFunction, Sensitivity]] = []
    for output in bound.outputs:
        if output.kind != "aggregate" or output.name in drawn:
            continue
        function = output.function
        if function == "count_star" or function == "count":
            sensitivity = aggregate_sensitivity(function, bound.grouping_sets, views=views)
        elif function == "sum" and output.column in centres:
            low, high = clamps[output.column]
            if centres[output.column] != (low + high) / 2.0:  # what the sources subtract
                raise InvalidParameterError(
                    "centres", f"the midpoint of [{low:g}, {high:g}]", centres[output.column]
                )
            sensitivity = centred_sum_sensitivity(bound.grouping_sets, low, high, views=views)
        elif function == "sum" and output.column in clamps:
            low, high = clamps[output.column]
            sensitivity = aggregate_sensitivity(
                "sum",
                bound.grouping_sets,
                bound=max(abs(low), abs(high)),
                width=high - low,
                views=views,
            )
        else:
            raise InvalidParameterError(
                "release", "COUNT, SUM and AVG of bounded columns", output.name
            )
        aggregates.append((output.name, function, sensitivity))
    return aggregates


def _with_selection(
    bound: BoundAggregate, release: Release, selected: tuple[int, ...], delta: float
) -> Release:
    """``release`` whose COUNT also selects the keys of the ``selected`` grouping sets."""
    counts = [n for n in release.noises if n.function in ("count_star", "count")]
    counts.sort(key=lambda n: n.function != "count_star")  # COUNT(*) first
    count = counts[0] if counts else None
    if count is None:
        raise InvalidParameterError(
            "release", "a COUNT to select keys with (bind_sql(count_rows=True))", None
        )
    distances = selection_distances(len(selected), cells_per_set=3 if release.shared_blanket else 2)
    threshold = _smallest_threshold(count, distances, delta)
    loss, accounted = _threshold_map(_threshold_measurement(count, threshold), count, distances)
    rest = _rest_sensitivity(count.sensitivity, distances)
    spent = loss + (0.0 if rest is None else _vector_loss(count, rest))
    if spent > _allowed(count) * (1.0 + MAP_TOLERANCE) or accounted > delta:
        raise DpcommError(
            f"OpenDP accounts {spent:.6g} (δ {accounted:.3g}) for the COUNT that selects "
            f"keys, above the {_allowed(count):.6g} (δ {delta:.3g}) it was calibrated to"
        )
    post = bound.post
    count_added = post is not None and f'"{count.output}"' not in post.sql
    selection = KeySelection(
        delta, selected, count.output, count_added, threshold, distances, loss, accounted
    )
    noises = tuple(replace(n, selection_delta=delta) if n is count else n for n in release.noises)
    return replace(release, noises=noises, selection=selection)


def _rest_sensitivity(whole: Sensitivity, distances: SelectionDistances) -> Sensitivity | None:
    """The COUNT's sensitivity on the grouping sets not selected (None: there are none).

    Every cell of a COUNT's vector changes by at most 1, so removing the selected sets'
    cells removes l1 from the L1 and l0 from the squared L2 sensitivity.
    """
    l1 = whole.l1 - distances.l1
    if l1 <= 0.0:
        return None
    return Sensitivity(l1, math.sqrt(max(whole.l2**2 - distances.l0, 0.0)))


def _opendp() -> Any:
    from dpcomm.release import opendp_core as dp

    dp.enable_features("contrib")
    return dp


def _threshold_measurement(noise: AggregateNoise, threshold: int) -> Any:
    """OpenDP's threshold mechanism on integer counts keyed by integers, of ``noise``'s scale."""
    dp = _opendp()
    domain = dp.map_domain(dp.atom_domain(T=int), dp.atom_domain(T=int))
    if noise.delta == 0.0:
        metric = dp.l01inf_distance(dp.absolute_distance(T=int))
        return dp.m.make_laplace_threshold(domain, metric, scale=noise.scale, threshold=threshold)
    metric = dp.l02inf_distance(dp.absolute_distance(T=int))
    return dp.m.make_gaussian_threshold(domain, metric, scale=noise.scale, threshold=threshold)


def _threshold_map(
    measurement: Any, noise: AggregateNoise, distances: SelectionDistances
) -> tuple[float, float]:
    """OpenDP's (ε, δ) (Laplace) or (ρ, δ) (Gaussian) of the threshold measurement.

    The Gaussian's L2 distance is given as the integer ⌈√l0⌉ (the metric is over integers);
    OpenDP uses the smaller of its square and l0·l∞², here l0, the exact squared distance.
    """
    if noise.delta == 0.0:
        given = (distances.l0, distances.l1, distances.linf)
    else:
        given = (distances.l0, math.ceil(distances.l2), distances.linf)
    loss, delta = measurement.map(given)
    return float(loss), float(delta)


def _smallest_threshold(noise: AggregateNoise, distances: SelectionDistances, delta: float) -> int:
    """The smallest integer τ whose OpenDP map gives δ ≤ ``delta`` (δ falls as τ grows).

    The search starts at the standard formula's τ ([`threshold_for`][]).
    """

    def accepted(threshold: int) -> bool:
        measurement = _threshold_measurement(noise, threshold)
        return _threshold_map(measurement, noise, distances)[1] <= delta

    start = threshold_for(
        scale=noise.scale, delta=delta, distances=distances, gaussian=noise.delta > 0.0
    )
    high = min(max(math.ceil(start), 1), MAX_THRESHOLD) if math.isfinite(start) else MAX_THRESHOLD
    while not accepted(high):
        if high >= MAX_THRESHOLD:
            raise InvalidParameterError(
                "key_selection_delta", "a δ some threshold of 32-bit counts reaches", delta
            )
        high = min(2 * high, MAX_THRESHOLD)
    return integer_crossing(accepted, high, 0)  # 0: not accepted (or below the counts' range)


#: What a key value of each kind of column is, in a few words (for `_typed`'s errors).
_KEY_TYPES = {
    "text": "text",
    "int": "integers",
    "wideint": "integers",
    "float": "numbers",
    "decimal": "numbers",
    "bool": "booleans",
    "date": "dates",
    "timestamp": "timestamps",
    "time": "times of day",
}


def _from_text(kind: str, text: str) -> object:
    """A key given as text (the CLI's) as a value of a column of ``kind`` (text: itself)."""
    import datetime
    from decimal import Decimal

    parsers: dict[str, Callable[[str], object]] = {
        "int": int,
        "wideint": int,
        "float": float,
        "decimal": Decimal,
        "bool": lambda word: {"true": True, "false": False}[word.strip().lower()],
        "date": datetime.date.fromisoformat,
        "timestamp": datetime.datetime.fromisoformat,
        "time": datetime.time.fromisoformat,
    }
    parse = parsers.get(kind)
    return text if parse is None else parse(text)


#: The values of each fixed-width integer type (a key outside can never occur).
_INTEGER_RANGES = {
    name: ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1))
    for bits, signed_name, unsigned_name in (
        (8, "TINYINT", "UTINYINT"),
        (16, "SMALLINT", "USMALLINT"),
        (32, "INTEGER", "UINTEGER"),
        (64, "BIGINT", "UBIGINT"),
        (128, "HUGEINT", "UHUGEINT"),
    )
    for name, signed in ((signed_name, True), (unsigned_name, False))
}


def _typed(value: object, sql_type: str, column: str) -> object:
    """`_typed_value`, refused in one line when it overflows or is outside the column's type."""
    refused = InvalidParameterError(
        f"keys[{column!r}]", f"a value of the column's type {sql_type}", value
    )
    try:
        typed = _typed_value(value, sql_type, column)
    except OverflowError:
        raise refused from None
    limits = _INTEGER_RANGES.get(sql_type.upper())
    if limits is not None and isinstance(typed, int) and not limits[0] <= typed <= limits[1]:
        raise refused
    return typed


def _typed_value(value: object, sql_type: str, column: str) -> object:
    """A key value (the CLI's text, or a Python value) as the column's Python value.

    A value of another type than the column's (``keys={"species": [1, 2]}`` for a text
    column) is refused: its key could never occur, so the release would publish pure noise
    for it and drop every real row.
    """
    import datetime
    import numbers
    from decimal import Decimal, InvalidOperation

    from dpcomm.data.table import value_kind

    kind = value_kind(sql_type)
    if value is None or kind is None:
        return value
    refused = InvalidParameterError(
        f"keys[{column!r}]", f"{_KEY_TYPES[kind]} (the column's type is {sql_type})", value
    )
    if isinstance(value, str):
        try:
            return _from_text(kind, value)
        except (ValueError, KeyError, InvalidOperation):
            raise refused from None
    is_bool = isinstance(value, bool) or type(value).__name__ == "bool_"
    if kind == "bool" and is_bool:
        return bool(value)
    if is_bool or kind == "text":
        raise refused
    if kind in ("int", "wideint") and isinstance(value, numbers.Integral):
        return int(value)
    if kind == "float" and isinstance(value, numbers.Real):
        return float(value)
    if kind == "decimal" and isinstance(value, Decimal | numbers.Integral):
        return Decimal(int(value)) if isinstance(value, numbers.Integral) else value
    if kind == "decimal" and isinstance(value, numbers.Real):
        return Decimal(repr(float(value)))
    if kind == "date" and isinstance(value, datetime.date):
        if isinstance(value, datetime.datetime):
            raise refused
        return value
    if kind == "timestamp" and isinstance(value, datetime.datetime):
        return value
    if kind == "time" and isinstance(value, datetime.time):
        return value
    raise refused


def _selected_keys(
    bound: BoundAggregate, release: Release, rows_by_set: Sequence[Sequence[Row]]
) -> dict[int, list[tuple[tuple[object, ...], Row, int]]]:
    """Per selected grouping set, its released keys: (key, exact row, noisy count).

    Keys with a positive count (and, for columns that have a domain, a value in it) enter
    OpenDP's threshold mechanism, numbered; those it releases come back with their count
    plus noise, at least τ.
    """
    selection = release.selection
    if selection is None:
        return {}
    domains = {c: set(values) for c, values in release.domains}
    entries: list[tuple[int, tuple[object, ...], Row]] = []
    counts: dict[int, int] = {}
    for set_index in selection.grouping_sets:
        columns = bound.grouping_sets[set_index]
        for row in rows_by_set[set_index]:
            key = tuple(row[c] for c in columns)
            if any(c in domains and v not in domains[c] for c, v in zip(columns, key, strict=True)):
                continue
            count = row[selection.count_output]
            if count is not None and int(count) > 0:
                counts[len(entries)] = int(count)
                entries.append((set_index, key, row))
    noise = next(n for n in release.noises if n.output == selection.count_output)
    measurement = _threshold_measurement(noise, selection.threshold)
    loss, delta = _threshold_map(measurement, noise, selection.distances)
    if loss > selection.accounted_loss * (1.0 + MAP_TOLERANCE) or delta > selection.delta:
        raise DpcommError(
            f"OpenDP accounts ({loss:.6g}, {delta:.3g}) for the key selection, above the "
            f"({selection.accounted_loss:.6g}, {selection.delta:.3g}) it was calibrated to"
        )
    released: Mapping[int, int] = measurement(counts) if counts else {}
    chosen: dict[int, list[tuple[tuple[object, ...], Row, int]]] = {
        i: [] for i in selection.grouping_sets
    }
    for number, noisy in released.items():
        set_index, key, row = entries[number]
        chosen[set_index].append((key, row, int(noisy)))
    for items in chosen.values():
        items.sort(key=lambda item: key_order(item[0]))
    return chosen


def released_rows(
    bound: BoundAggregate, release: Release, rows_by_set: Sequence[Sequence[Row]]
) -> list[list[Row]]:
    """Each grouping set's released rows, their aggregates noisy.

    The rows of every key of the domain, or of the keys the threshold selected.
    """
    domains = dict(release.domains)
    selected = _selected_keys(bound, release, rows_by_set)
    count_output = None if release.selection is None else release.selection.count_output
    completed: list[list[Row]] = []
    thresholded: list[bool] = []  # per released row: its thresholded COUNT is already noisy
    for set_index, rows in enumerate(rows_by_set):
        columns = bound.grouping_sets[set_index]
        items: list[tuple[tuple[object, ...], Row | None, int | None]]
        if set_index in selected:
            items = [(key, found, noisy) for key, found, noisy in selected[set_index]]
        else:
            present = {tuple(row[c] for c in columns): row for row in rows}
            keys = list(itertools.product(*(domains[c] for c in columns))) if columns else [()]
            keys.sort(key=key_order)
            items = [(key, present.get(key), None) for key in keys]
        released = []
        for key, found, noisy in items:
            row: Row = dict.fromkeys(bound.grouping_columns)
            row.update(zip(columns, key, strict=True))
            for noise in release.noises:
                value = None if found is None else found[noise.output]
                row[noise.output] = 0 if value is None else value
            _draw_quantiles(bound, release, row, found)
            if noisy is not None:
                row[count_output or ""] = noisy
            released.append(row)
            thresholded.append(noisy is not None)
        completed.append(released)
    flat = [row for rows in completed for row in rows]
    for noise in release.noises:
        if noise.output == count_output and release.selection is not None:
            rest = _rest_sensitivity(noise.sensitivity, release.selection.distances)
            cells = [row for row, done in zip(flat, thresholded, strict=True) if not done]
            spent = release.selection.accounted_loss
            if rest is None or not cells:
                continue
        else:
            rest, cells, spent = None, flat, 0.0
        values = [row[noise.output] for row in cells]
        for row, noisy in zip(cells, _noisy(noise, values, rest, spent), strict=True):
            row[noise.output] = noisy
    names = bound.output_names
    return [[{name: row.get(name) for name in names} for row in rows] for rows in completed]


def _draw_quantiles(bound: BoundAggregate, release: Release, row: Row, found: Row | None) -> None:
    """Each quantile of ``release`` drawn into ``row`` from the bins' counts of ``found``.

    A value snapped to candidate i is counted in bin i's COUNT, the candidate's bin 2i of
    `dpcomm.release.quantile.bin_of`; a cell without tuples draws over no values. The
    bins' exact counts stay out of ``row``.
    """
    for noise, (_, _, _, _, _, bins) in zip(release.quantiles, bound.quantiles, strict=True):
        counts = [0] * (2 * len(bins) - 1)
        if found is not None:
            counts[::2] = [int(found[b] or 0) for b in bins]
        row[noise.output] = released_quantile(noise, counts)


def _allowed(noise: AggregateNoise) -> float:
    """What ``noise`` was calibrated to: ε_i (Laplace) or the zCDP ρ_i (Gaussian)."""
    return noise.epsilon if noise.delta == 0.0 else rho_for(noise.epsilon, noise.delta)


def _vector_measurement(noise: AggregateNoise) -> Any:
    """OpenDP's Laplace or Gaussian measurement on a vector, of ``noise``'s scale."""
    return _measurement(noise.scale, integer=noise.integer, gaussian=noise.delta > 0.0)


@functools.lru_cache(maxsize=256)
def _measurement(scale: float, *, integer: bool, gaussian: bool) -> Any:
    """``_vector_measurement``, built once per scale and kind (a run draws anew each call)."""
    dp = _opendp()
    if integer:
        domain = dp.vector_domain(dp.atom_domain(T=int))
    else:
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if not gaussian:
        metric = dp.l1_distance(T=int if integer else float)
        return dp.m.make_laplace(domain, metric, scale=scale)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale)


def _vector_loss(
    noise: AggregateNoise, sensitivity: Sensitivity, measurement: Any | None = None
) -> float:
    """OpenDP's map of the vector measurement at ``sensitivity``: ε (Laplace) or ρ."""
    chosen = _vector_measurement(noise) if measurement is None else measurement
    if noise.delta == 0.0:
        shift = math.ceil(sensitivity.l1) if noise.integer else sensitivity.l1
        return float(chosen.map(shift))
    return float(chosen.map(sensitivity.l2))


def _noisy(
    noise: AggregateNoise,
    values: list[Any],
    sensitivity: Sensitivity | None = None,
    spent: float = 0.0,
) -> list[Any]:
    """``values`` plus OpenDP's noise, after checking OpenDP's privacy map of the measurement.

    ``sensitivity`` is that of these values (default the aggregate's), ``spent`` what the
    aggregate's other measurement (its key selection) already accounts.
    """
    if not values:
        return []
    data: list[Any] = [int(v) for v in values] if noise.integer else [float(v) for v in values]
    measurement = _vector_measurement(noise)
    _check_loss(noise, sensitivity or noise.sensitivity, spent, measurement)
    return list(measurement(data))


def _check_loss(
    noise: AggregateNoise, sensitivity: Sensitivity, spent: float, measurement: Any
) -> None:
    """Refuse ``noise`` unless its OpenDP map at ``sensitivity``, plus ``spent``, is in budget.

    The budget is what ``noise`` was calibrated to (ε_i, or the zCDP ρ_i of a Gaussian).
    """
    total = spent + _vector_loss(noise, sensitivity, measurement)
    if total > _allowed(noise) * (1.0 + MAP_TOLERANCE):
        raise DpcommError(
            f"OpenDP accounts {total:.6g} for the noise of {noise.output}, above the "
            f"{_allowed(noise):.6g} it was calibrated to: refusing to release"
        )


def _noisy_each(noises: Sequence[AggregateNoise], values: Sequence[float]) -> list[float]:
    """``values[i]`` plus the noise of ``noises[i]``, each an aggregate of its own (floats).

    The same as ``_noisy(noises[i], [values[i]])`` for every i, faster: OpenDP's privacy map
    is checked once for each distinct (scale, kind, sensitivity, calibrated loss), and the
    values whose noises have one scale and kind are drawn in one call (independent draws,
    entry by entry, either way: a K-means centroid's D coordinates in one call, not D).
    """
    drawn = [0.0] * len(values)
    groups: dict[tuple[float, bool], list[int]] = {}
    checked: set[tuple[float, bool, float, float, float]] = set()
    for index, noise in enumerate(noises):
        if noise.integer:
            raise DpcommError(f"{noise.output}: _noisy_each draws floating-point noise only")
        gaussian = noise.delta > 0.0
        measurement = _measurement(noise.scale, integer=False, gaussian=gaussian)
        key = (noise.scale, gaussian, noise.sensitivity.l1, noise.sensitivity.l2, _allowed(noise))
        if key not in checked:
            _check_loss(noise, noise.sensitivity, 0.0, measurement)
            checked.add(key)
        groups.setdefault((noise.scale, gaussian), []).append(index)
    for (scale, gaussian), indices in groups.items():
        measurement = _measurement(scale, integer=False, gaussian=gaussian)
        noisy = measurement([float(values[i]) for i in indices])
        for index, value in zip(indices, noisy, strict=True):
            drawn[index] = float(value)
    return drawn


__all__ = [
    "KeySelection",
    "Release",
    "bind_release",
    "calibrate_release_parts",
    "noisy_program",
    "release_from_spec",
    "release_spec",
    "released_rows",
    "with_release",
]
