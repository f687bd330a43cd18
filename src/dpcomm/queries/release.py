"""A noisy release of an Aggregate result: central DP on what the result node publishes.

The result node releases, for every grouping set, one row per key of a **public key domain**
given by the user (the product of each key column's listed values): keys that received no
tuple are released too (COUNT and SUM 0, plus noise), keys outside the domain are not, so the
set of released keys never depends on the data. Each COUNT and SUM gets noise drawn by OpenDP
(integer noise for counts: discrete Laplace or discrete Gaussian), once, at the result node;
an AVG is the noisy SUM over the noisy COUNT. The noise's scale follows from the query
([`dpcomm.accounting.release`][]); OpenDP's own privacy map of every measurement is checked
against it before any noise is drawn.

The noise is drawn from OpenDP's cryptographically secure generator, never from the run's
seed: a seeded noise would be predictable by whoever holds the seed, and the release would
not be private. A seeded run is therefore reproducible up to the release's noise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpcomm.accounting.release import (
    AggregateNoise,
    ReleasedFunction,
    ReleaseMechanism,
    aggregate_sensitivity,
    calibrate_noise,
    rho_for,
)
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.queries.groupby import key_order
from dpcomm.queries.query import BoundAggregate

Row = dict[str, Any]


@dataclass(frozen=True)
class Release:
    """A query's noisy release: its mechanism, each aggregate's noise, the key domains.

    Attributes:
        mechanism: Laplace or Gaussian, with the release's budget (ε2, δ2).
        noises: the noise of every released aggregate (core output columns).
        domains: each key column of the query (core names) and its public values.
    """

    mechanism: ReleaseMechanism
    noises: tuple[AggregateNoise, ...]
    domains: tuple[tuple[str, tuple[object, ...]], ...]

    @property
    def epsilon(self) -> float:
        """ε2: the sum of the aggregates' shares."""
        return math.fsum(n.epsilon for n in self.noises)

    @property
    def delta(self) -> float:
        """δ2: the sum of the aggregates' shares."""
        return math.fsum(n.delta for n in self.noises)


def bind_release(
    bound: BoundAggregate,
    mechanism: ReleaseMechanism,
    keys: Mapping[str, Sequence[object]],
) -> Release:
    """The release of ``bound`` (a query bound with ``bounds``, see ``bind_sql``).

    Raises:
        InvalidParameterError: a grouping column without a key domain, a domain for a column
            the query does not group by, or an aggregate a release cannot carry.
    """
    if not isinstance(keys, Mapping):
        raise InvalidParameterError(
            "keys", "a mapping from each grouping column to its public values", keys
        )
    wanted = {c.lower(): c for c in bound.grouping_columns}
    domains: dict[str, tuple[object, ...]] = {}
    for name, values in keys.items():
        column = wanted.get(str(name).lower())
        if column is None:
            raise InvalidParameterError(
                "keys",
                f"domains of the query's grouping columns ({', '.join(bound.grouping_columns)})",
                name,
            )
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise InvalidParameterError(f"keys[{name!r}]", "a non-empty list of values", values)
        sql_type = dict(bound.schema).get(column, "VARCHAR")
        domains[column] = tuple(dict.fromkeys(_typed(v, sql_type, column) for v in values))
    missing = [c for c in bound.grouping_columns if c not in domains]
    if missing:
        raise InvalidParameterError(
            "keys",
            "a public domain for every grouping column under a noisy release (keys that "
            "occur in the data are never released as they are)",
            f"none for {', '.join(missing)}",
        )
    clamps = {name: (lo, hi) for name, _, lo, hi in bound.clamps}
    aggregates: list[tuple[str, ReleasedFunction, Any]] = []
    for output in bound.outputs:
        if output.kind != "aggregate":
            continue
        function = output.function
        if function == "count_star" or function == "count":
            sensitivity = aggregate_sensitivity(function, bound.grouping_sets)
        elif function == "sum" and output.column in clamps:
            low, high = clamps[output.column]
            sensitivity = aggregate_sensitivity(
                "sum", bound.grouping_sets, bound=max(abs(low), abs(high)), width=high - low
            )
        else:
            raise InvalidParameterError(
                "release", "COUNT, SUM and AVG of bounded columns", output.name
            )
        aggregates.append((output.name, function, sensitivity))
    return Release(
        mechanism, calibrate_noise(mechanism, aggregates), tuple(sorted(domains.items()))
    )


def _typed(value: object, sql_type: str, column: str) -> object:
    """A key value given as text (the CLI's) as the column's Python value."""
    import datetime

    from dpcomm.data.table import value_kind

    if not isinstance(value, str) or value_kind(sql_type) in ("text", None):
        return value
    kind = value_kind(sql_type)
    try:
        if kind in ("int", "wideint"):
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            return {"true": True, "false": False}[value.strip().lower()]
        if kind == "date":
            return datetime.date.fromisoformat(value)
        if kind == "timestamp":
            return datetime.datetime.fromisoformat(value)
    except (ValueError, KeyError):
        raise InvalidParameterError(
            f"keys[{column!r}]", f"values of the column's type {sql_type}", value
        ) from None
    return value


def released_rows(
    bound: BoundAggregate, release: Release, rows_by_set: Sequence[Sequence[Row]]
) -> list[list[Row]]:
    """Each grouping set's released rows: every key of the domain, its aggregates noisy."""
    domains = dict(release.domains)
    completed: list[list[Row]] = []
    for set_index, rows in enumerate(rows_by_set):
        columns = bound.grouping_sets[set_index]
        present = {tuple(row[c] for c in columns): row for row in rows}
        keys = list(itertools.product(*(domains[c] for c in columns))) if columns else [()]
        keys.sort(key=key_order)
        released = []
        for key in keys:
            row: Row = dict.fromkeys(bound.grouping_columns)
            row.update(zip(columns, key, strict=True))
            found = present.get(key)
            for noise in release.noises:
                value = None if found is None else found[noise.output]
                row[noise.output] = 0 if value is None else value
            released.append(row)
        completed.append(released)
    flat = [row for rows in completed for row in rows]
    for noise in release.noises:
        values = [row[noise.output] for row in flat]
        for row, noisy in zip(flat, _noisy(noise, values), strict=True):
            row[noise.output] = noisy
    names = bound.output_names
    return [[{name: row.get(name) for name in names} for row in rows] for rows in completed]


def _noisy(noise: AggregateNoise, values: list[Any]) -> list[Any]:
    """``values`` plus OpenDP's noise, after checking OpenDP's privacy map of the measurement."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if not values:
        return []
    if noise.integer:
        domain = dp.vector_domain(dp.atom_domain(T=int))
        data: list[Any] = [int(v) for v in values]
    else:
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        data = [float(v) for v in values]
    if noise.delta == 0.0:
        metric = dp.l1_distance(T=int if noise.integer else float)
        measurement: Any = dp.m.make_laplace(domain, metric, scale=noise.scale)
        shift = math.ceil(noise.sensitivity.l1) if noise.integer else noise.sensitivity.l1
        spent, allowed = float(measurement.map(shift)), noise.epsilon
    else:
        metric = dp.l2_distance(T=float)
        measurement = dp.m.make_gaussian(domain, metric, scale=noise.scale)
        spent = float(measurement.map(noise.sensitivity.l2))
        allowed = rho_for(noise.epsilon, noise.delta)
    if spent > allowed * (1.0 + 1e-9):
        raise DpcommError(
            f"OpenDP accounts {spent:.6g} for the noise of {noise.output}, above the "
            f"{allowed:.6g} it was calibrated to: refusing to release"
        )
    return list(measurement(data))


__all__ = ["Release", "bind_release", "released_rows"]
