"""Unbiased estimates of an Aggregate result, with standard errors and 95% intervals.

Under local sampling R_σ each real tuple reaches its compute node independently with a known
probability P = 1 − σ + σ/T (`dpcomm.plan.costs.delivery_probability`; 1 for a cluster
without countermeasure or with a single target). The estimates go beyond the paper, which
reports the values of the delivered tuples; they are valid because P is public and the same
for every tuple of a grouping set:

* COUNT and SUM: the Horvitz–Thompson estimator Ŷ = Σ_delivered x_i / P (x_i = 1 for COUNT),
  unbiased for Y = Σ_all x_i. Its variance Var(Ŷ) = Σ_all x_i² (1 − P)/P is estimated without
  bias by v̂ = Σ_delivered x_i² (1 − P)/P²; the standard error is √v̂.
* AVG: the ratio of the two estimates, R̂ = Ŷ / N̂, which equals the average of the delivered
  values (P cancels). It is consistent, not exactly unbiased (its bias is of order 1/N). Its
  standard error is the delta method's: v̂ = (1 − P) Σ_delivered (x_i − R̂)² / c², c the
  delivered non-NULL values.
* MIN and MAX: those of the delivered tuples, not estimates (no interval).

The 95% interval is the normal one, estimate ± 1.96 standard errors (a COUNT's lower end is
clipped at 0). It is approximate: good when a group has many delivered tuples (tens or more),
poor for a handful. With P = 1 the standard error is 0 and the interval the value itself.

A group of the key domain that received no tuple is estimated too (COUNT and SUM 0, standard
error 0; AVG, MIN and MAX NULL): dropping it would bias averages over runs upward. The key
domain is that of the whole table, which the simulation knows (a deployment would publish it,
e.g. the age ranges of a form). Without it such groups are missing, and the report says so.

The estimates are post-processing of the released result: the traffic's privacy guarantee is
unchanged. They are not differentially private either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpcomm._json import json_ready
from dpcomm.data.table import Column, Table
from dpcomm.engine.run import Run
from dpcomm.plan.countermeasures import NoCountermeasure
from dpcomm.queries.aggregate import AggregateProgram, AggregateState
from dpcomm.queries.groupby import group_ids, key_order
from dpcomm.queries.query import GROUPING_SET_COLUMN, OutputColumn

Row = dict[str, Any]
Key = tuple[object, ...]

#: The confidence of the intervals, and the normal quantile z_{0.975} that gives them.
CONFIDENCE = 0.95
Z_95 = 1.959963984540054

#: The functions whose values are estimated (the others, MIN and MAX, are of delivered tuples).
ESTIMATED_FUNCTIONS = ("count", "count_star", "sum", "avg")

#: What the report says the values of an estimated result are.
ESTIMATE_SEMANTICS = (
    "unbiased estimates of the result over every tuple, from the tuples that reached their "
    "compute node: COUNT and SUM divided by the known delivery probability P "
    "(Horvitz–Thompson), AVG their ratio (the delivered average), each with its standard "
    "error and 95% normal interval; MIN and MAX are those of the delivered tuples; not "
    "differentially private: the countermeasures hide the traffic pattern, not the values"
)


def estimate_name(name: str) -> str:
    """The result column of the estimate of output ``name``: ``count_star() (estimate)``."""
    return f"{name} (estimate)"


def standard_error_name(name: str) -> str:
    """The column of the estimate's standard error: ``count_star() (se)``."""
    return f"{name} (se)"


def interval_names(name: str) -> tuple[str, str]:
    """The columns of the 95% interval: ``count_star() (95% low)``, ``... (95% high)``."""
    return f"{name} (95% low)", f"{name} (95% high)"


@dataclass(frozen=True)
class EstimateReport:
    """How an Aggregate result was estimated: what the report says of an estimated run.

    Attributes:
        method: ``horvitz-thompson`` (COUNT, SUM; AVG their ratio, delta-method error).
        delivery_probability: P per grouping set (1 − σ + σ/T under R_σ; 1 without
            countermeasure or with a single target).
        confidence: of the intervals (0.95, normal).
        columns: per estimated output, its estimate's column (``count_star() (estimate)``);
            each has ``(se)``, ``(95% low)`` and ``(95% high)`` columns beside it.
        delivered_columns: the outputs left as they are over the delivered tuples (MIN, MAX).
        key_domain: where the known keys come from (None: none known).
        groups_estimated_empty: per grouping set, groups of the key domain that received no
            tuple, estimated as 0 (COUNT, SUM; AVG, MIN, MAX NULL).
        no_interval: estimate columns without a standard error, and why (a SUM or AVG needs
            the delivered values' squares, read where the program holds the table).
    """

    method: str
    delivery_probability: Mapping[str, float]
    confidence: float
    columns: Mapping[str, str]
    delivered_columns: tuple[str, ...]
    key_domain: str | None
    groups_estimated_empty: Mapping[str, int]
    no_interval: Mapping[str, str]

    def describe(self) -> str:
        """One line: P of every grouping set, the key domain, the groups estimated as 0."""
        shown = ", ".join(f"{name}: {p:.6g}" for name, p in self.delivery_probability.items())
        text = f"Horvitz–Thompson, delivery probability P ({shown}); {self.confidence:.0%} normal"
        text += " intervals"
        if self.key_domain is None:
            text += "; no key domain known: groups that received no tuple are missing"
        else:
            empty = ", ".join(f"{k}: {v:,}" for k, v in self.groups_estimated_empty.items())
            text += f"; groups that received no tuple, estimated as 0: {empty}"
        if self.delivered_columns:
            text += (
                f"; of the delivered tuples (not estimates): {', '.join(self.delivered_columns)}"
            )
        for column, why in self.no_interval.items():
            text += f"; {column}: no interval ({why})"
        return text

    def to_dict(self) -> dict[str, Any]:
        """The estimate's description as JSON."""
        document: dict[str, Any] = json_ready(asdict(self))
        return document


@dataclass(frozen=True)
class UnbiasedEstimate:
    """An Aggregate result estimated, as printed and as compared with the exact result.

    Attributes:
        rows: the result rows: keys, each estimate with its standard error and interval,
            MIN and MAX as delivered (columns `columns`).
        columns: the result's column names, in order.
        types: their DuckDB types (estimates and their errors are DOUBLE).
        per_set: per grouping set, the rows with the query's own column names and the
            estimates as values (what the utility compares with the exact result).
        report: what the report says of the estimate.
    """

    rows: list[Row]
    columns: tuple[str, ...]
    types: tuple[str, ...]
    per_set: tuple[list[Row], ...]
    report: EstimateReport


def delivery_probabilities(program: AggregateProgram, run: Run) -> dict[str, float]:
    """P per grouping set: the probability that a real tuple is counted (1 − σ + σ/T under R_σ).

    Clusters without countermeasure, and single-target ones (which send straight), count
    every tuple.
    """
    from dpcomm.plan.costs import delivery_probability

    probabilities = {}
    for name in program.flow_names:
        chosen = run.transformed.countermeasures[name]
        targets = program.plan.group(program.plan.flow(name).receiver).count
        if isinstance(chosen, NoCountermeasure) or targets == 1:
            probabilities[name] = 1.0
        else:
            probabilities[name] = delivery_probability(
                sampling_rate=chosen.sampling_rate, num_targets=targets
            )
    return probabilities


def estimated_columns(program: AggregateProgram) -> frozenset[str]:
    """The outputs an estimate replaces (COUNT, SUM and AVG; MIN and MAX stay delivered)."""
    return frozenset(
        o.name
        for o in program.query.outputs
        if o.kind == "aggregate" and o.function in ESTIMATED_FUNCTIONS
    )


class _NanKey:
    """Stands for a NaN key value (NaN != NaN, but is one group)."""

    __slots__ = ()


_NAN = _NanKey()


def _canonical(key: Sequence[object]) -> Key:
    return tuple(_NAN if isinstance(v, float) and math.isnan(v) else v for v in key)


def _keyed_rows(state: AggregateState, flow: str) -> dict[Key, tuple[Key, Row]]:
    """The (key, row) pairs of grouping set ``flow`` by their canonical key, from a state."""
    return {
        _canonical(key): (tuple(key), dict(row))
        for (name, _), output in state.outputs
        if name == flow
        for key, row in zip(output.keys, output.rows, strict=True)
    }


def _floats(column: Column) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A numeric column's values as float64 (NULL slots hold fillers, never read)."""
    if column.values.dtype.kind == "O":
        return np.array([0.0 if v is None else float(v) for v in column.values.tolist()])
    return np.asarray(column.values, dtype=np.float64)


@dataclass(frozen=True)
class _Squares:
    """Per group of the delivered tuples: non-NULL values and the sum of their squares."""

    counts: Mapping[Key, int]
    squares: Mapping[Key, float]


def _delivered_squares(
    table: Table, grouping_set: Sequence[str], column: str, delivered: np.ndarray[Any, Any]
) -> _Squares:
    """Σ x² and the count of non-NULL x over the delivered tuples, per group key."""
    mask = np.asarray(delivered, dtype=bool)
    ids, keys = group_ids(table, grouping_set, mask)
    values = table.column(column)
    selected = np.flatnonzero(mask)
    present = ~values.is_null[selected]
    x = _floats(values)[selected][present]
    group = ids[present]
    num_groups = keys.num_rows if grouping_set else 1
    counts = np.bincount(group, minlength=num_groups)
    squares = np.bincount(group, weights=x * x, minlength=num_groups)
    key_values = [c.values.tolist() for c in keys.columns]
    for column_index, key_column in enumerate(keys.columns):
        for row in np.flatnonzero(key_column.is_null).tolist():
            key_values[column_index][row] = None
    all_keys = [_canonical(k) for k in zip(*key_values, strict=True)] if grouping_set else [()]
    return _Squares(
        {k: int(c) for k, c in zip(all_keys, counts, strict=False)},
        {k: float(s) for k, s in zip(all_keys, squares, strict=False)},
    )


def _interval(
    estimate: float | None, error: float | None, *, non_negative: bool
) -> tuple[float | None, float | None]:
    """The normal 95% interval, estimate ± z·se (a COUNT's lower end clipped at 0)."""
    if estimate is None or error is None:
        return None, None
    low, high = estimate - Z_95 * error, estimate + Z_95 * error
    return (max(low, 0.0) if non_negative else low), high


def _result_columns(program: AggregateProgram) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The estimated result's column names and DuckDB types (estimates and errors DOUBLE)."""
    estimated = estimated_columns(program)
    columns: list[str] = []
    types: list[str] = []
    for output, sql_type in zip(program.query.outputs, program.query.output_types, strict=True):
        name = output.name
        if name in estimated:
            columns.extend((estimate_name(name), standard_error_name(name), *interval_names(name)))
            types.extend(["DOUBLE"] * 4)
        else:
            columns.append(name)
            types.append(sql_type)
    if program.query.num_grouping_sets > 1:
        columns.append(GROUPING_SET_COLUMN)
        types.append("VARCHAR")
    return tuple(columns), tuple(types)


def _estimate(
    output: OutputColumn, value: Any, p: float, squares: _Squares | None, key: Key
) -> tuple[float | None, float | None]:
    """(estimate, standard error) of one delivered group's output (None: NULL or unknown).

    COUNT: c/P and √(c (1 − P))/P. SUM: s/P and √(Σx² (1 − P))/P. AVG: the delivered
    average and √((1 − P) Σ(x − avg)²)/c. The squares are None without the table.
    """
    function = output.function
    if function in ("count", "count_star"):
        count = int(value)
        return count / p, math.sqrt(count * (1.0 - p)) / p
    if value is None:
        return None, None
    estimate = float(value) / (p if function == "sum" else 1.0)
    if squares is None:
        return estimate, None
    total = squares.squares.get(key, 0.0)
    if function == "sum":
        return estimate, math.sqrt(total * (1.0 - p)) / p
    count = squares.counts.get(key, 0)
    spread = max(total - count * estimate * estimate, 0.0)
    return estimate, (math.sqrt((1.0 - p) * spread) / count if count else None)


@dataclass(frozen=True)
class _GroupingSet:
    """What one grouping set's rows are estimated with."""

    p: float
    estimated: frozenset[str]
    squares: Mapping[str, _Squares]


def _estimate_row(
    program: AggregateProgram, context: _GroupingSet, key: Key, row: Row, *, empty: bool
) -> tuple[Row, Row]:
    """One group's printed row (estimates, errors, intervals) and its compared row.

    A group that received no tuple (``empty``) has COUNT and SUM 0 with error 0, and AVG,
    MIN and MAX NULL.
    """
    printed: Row = {}
    compared: Row = {}
    for output in program.query.outputs:
        name = output.name
        if output.kind == "group":
            printed[name] = compared[name] = row[name]
            continue
        if name not in context.estimated:
            printed[name] = compared[name] = None if empty else row[name]
            continue
        value: float | None
        error: float | None
        if empty:
            value = error = None if output.function == "avg" else 0.0
        else:
            found = context.squares.get(output.column or "")
            value, error = _estimate(output, row[name], context.p, found, key)
        non_negative = output.function in ("count", "count_star")
        low, high = _interval(value, error, non_negative=non_negative)
        low_name, high_name = interval_names(name)
        compared[name] = printed[estimate_name(name)] = value
        printed[standard_error_name(name)] = error
        printed[low_name], printed[high_name] = low, high
    return printed, compared


def _squared_outputs(program: AggregateProgram) -> list[OutputColumn]:
    """The SUM and AVG outputs, whose errors need the delivered values' squares."""
    estimated = estimated_columns(program)
    return [
        o
        for o in program.query.outputs
        if o.name in estimated and o.function in ("sum", "avg") and o.column
    ]


def _set_squares(program: AggregateProgram, run: Run, index: int) -> dict[str, _Squares]:
    """Per column of a SUM or AVG, its squares over grouping set ``index``'s delivered tuples."""
    squares: dict[str, _Squares] = {}
    if program.table is None:
        return squares
    flow = program.flow_names[index]
    for output in _squared_outputs(program):
        column = output.column or ""
        if column not in squares:
            squares[column] = _delivered_squares(
                program.table, program.query.grouping_sets[index], column, run.delivered[flow]
            )
    return squares


def unbiased_estimate(
    program: AggregateProgram, run: Run, baseline: Run | None = None
) -> UnbiasedEstimate:
    """The run's result estimated over every tuple, with standard errors and 95% intervals.

    COUNT and SUM are divided by their grouping set's P, AVG is kept (the ratio of the two
    estimates), MIN and MAX are those of the delivered tuples (the module's docstring gives
    the estimators and their variances). ``baseline`` (the run without countermeasures)
    gives the key domain: its groups that received no tuple are estimated as 0; without it
    they are missing. A SUM's or AVG's standard error needs the delivered values' squares:
    without the table in this process (a row source read by workers) it is NULL.
    """
    from dpcomm.errors import InvalidParameterError

    if program.query.post is not None:
        raise InvalidParameterError(
            "estimate",
            "'none' for a query with WHERE, expressions, HAVING, ORDER BY, LIMIT or GROUPING() "
            "(unbiased estimates cover plain GROUP BY queries)",
            "unbiased",
        )
    probabilities = delivery_probabilities(program, run)
    estimated = estimated_columns(program)
    no_interval = {
        estimate_name(output.name): "its values' squares are read where the table is held; "
        "here a row source is read only by the workers"
        for output in _squared_outputs(program)
        if program.table is None
    }
    rows: list[Row] = []
    per_set: list[list[Row]] = []
    empty_groups: dict[str, int] = {}
    several = program.query.num_grouping_sets > 1
    for index, flow in enumerate(program.flow_names):
        context = _GroupingSet(probabilities[flow], estimated, _set_squares(program, run, index))
        delivered = _keyed_rows(run.state, flow)
        known = {} if baseline is None else _keyed_rows(baseline.state, flow)
        empty = {key: pair for key, pair in known.items() if key not in delivered}
        empty_groups[flow] = len(empty)
        merged = [(key, pair, False) for key, pair in delivered.items()]
        merged += [(key, pair, True) for key, pair in empty.items()]
        merged.sort(key=lambda item: key_order(item[1][0]))
        compared_rows = []
        label = program.query.labels[index]
        for key, (_, row), is_empty in merged:
            printed, compared = _estimate_row(program, context, key, row, empty=is_empty)
            if several:
                printed[GROUPING_SET_COLUMN] = label
            rows.append(printed)
            compared_rows.append(compared)
        per_set.append(compared_rows)
    outputs = program.query.outputs
    report = EstimateReport(
        method="horvitz-thompson",
        delivery_probability=probabilities,
        confidence=CONFIDENCE,
        columns={o.name: estimate_name(o.name) for o in outputs if o.name in estimated},
        delivered_columns=tuple(
            o.name for o in outputs if o.kind == "aggregate" and o.name not in estimated
        ),
        key_domain=None if baseline is None else "the keys of the whole table",
        groups_estimated_empty=empty_groups if baseline is not None else {},
        no_interval=no_interval,
    )
    columns, types = _result_columns(program)
    return UnbiasedEstimate(rows, columns, types, tuple(per_set), report)
