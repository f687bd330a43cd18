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

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from dpcomm._json import json_ready
from dpcomm.data.table import Column, Table
from dpcomm.engine.run import Run
from dpcomm.plan.countermeasures import NoCountermeasure
from dpcomm.queries.aggregate import AggregateProgram, AggregateState
from dpcomm.queries.groupby import group_ids, key_order
from dpcomm.queries.query import GROUPING_SET_COLUMN, OutputColumn
from dpcomm.release.mechanisms import AggregateNoise, half_width

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
        noise: under a noisy release, how the intervals cover the noise too (None: no
            release).
    """

    method: str
    delivery_probability: Mapping[str, float]
    confidence: float
    columns: Mapping[str, str]
    delivered_columns: tuple[str, ...]
    key_domain: str | None
    groups_estimated_empty: Mapping[str, int]
    no_interval: Mapping[str, str]
    noise: str | None = None

    def describe(self) -> str:
        """One line: P of every grouping set, the key domain, the groups estimated as 0."""
        shown = ", ".join(f"{name}: {p:.6g}" for name, p in self.delivery_probability.items())
        if self.noise is not None:
            text = (
                f"Horvitz–Thompson on the noisy release, delivery probability P ({shown}); "
                f"standard errors and {self.confidence:.0%} intervals {self.noise}; rows: "
                f"{self.key_domain}"
            )
            if self.delivered_columns:
                text += f"; released values (not estimates): {', '.join(self.delivered_columns)}"
            for column, why in self.no_interval.items():
                text += f"; {column}: no interval ({why})"
            return text
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
        error_names: how the utility names each compared column's error (None: the
            report's ``columns``).
    """

    rows: list[Row]
    columns: tuple[str, ...]
    types: tuple[str, ...]
    per_set: tuple[list[Row], ...]
    report: EstimateReport
    error_names: Mapping[str, str] | None = None


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


# ----------------------------------------------------------------- estimates of a noisy release
#: What the report says of an estimated noisy release's intervals.
RELEASE_ESTIMATE_NOTE = (
    "covering both the sampling's error (normal; its variance bounded from released values "
    "only: x² ≤ M·|x|, or M² per released count) and the noise's (its variance σ²/P² added; "
    "the normal and Laplace convolution's quantile, one count wider for integer noise); "
    "AVG's interval is the averages in [lo, hi] consistent with the released SUM and COUNT "
    "(Fieller-type), withheld with its reason where the noisy count is too small"
)


@dataclass(frozen=True)
class _Form:
    """What one final column of a released query is: a key, a COUNT or SUM, an AVG, other.

    ``kind`` is ``key``, ``value`` (``columns`` its core column), ``avg`` (``columns`` the
    SUM's and the COUNT's), ``centred_sum`` (likewise: the centred sum + c × COUNT) or
    ``other`` (an expression: the released value, not estimated).
    """

    kind: str
    columns: tuple[str, ...] = ()


def _release_forms(program: AggregateProgram) -> dict[str, _Form]:
    """Each final column's form, read from the post-processing of a released query.

    Refuses a post-processing that filters, orders or limits rows (HAVING, ORDER BY, LIMIT,
    OFFSET): the estimated rows are the released rows, in the released order.
    """
    from dpcomm.errors import InvalidParameterError

    post = program.query.post
    if post is None:  # a release always has its post-processing (the analyst rewrite)
        raise InvalidParameterError("program", "a released query", "a query without one")
    released = frozenset(n.output for n in program.release.noises) if program.release else None
    return dict(_forms(post.sql, post.names, post.key_names, released or frozenset()))


@functools.lru_cache(maxsize=64)
def _forms(
    sql: str, names: tuple[str, ...], key_names: tuple[str, ...], released: frozenset[str]
) -> tuple[tuple[str, _Form], ...]:
    """``_release_forms`` of a post-processing ``sql`` (parsed once per query)."""
    import sqlglot
    from sqlglot import exp

    from dpcomm.errors import InvalidParameterError

    select = sqlglot.parse_one(sql, read="duckdb")
    order = select.args.get("order")
    if any(select.args.get(c) for c in ("where", "limit", "offset")) or (
        order is not None and len(order.expressions) > 1
    ):
        raise InvalidParameterError(
            "estimate",
            "'delivered' for a released query with HAVING, ORDER BY, LIMIT or OFFSET "
            "(estimates cover the released rows as they are)",
            "unbiased",
        )
    forms: dict[str, _Form] = {}
    for item in select.expressions:
        name = item.alias_or_name
        if name not in names:
            continue
        node = item.this if isinstance(item, exp.Alias) else item
        node = node.this if isinstance(node, exp.Cast) else node
        if isinstance(node, exp.Column) and node.name in released:
            forms[name] = _Form("value", (node.name,))
        elif isinstance(node, exp.Column) and name in key_names:
            forms[name] = _Form("key")
        elif _centred_sum(node, released) is not None:
            forms[name] = _Form("centred_sum", _centred_sum(node, released) or ())
        elif (
            isinstance(node, exp.Case)
            and node.args.get("default") is None
            and len(node.args.get("ifs") or ()) == 1
        ):
            condition = node.args["ifs"][0]
            test, value = condition.this, condition.args.get("true")
            if isinstance(value, exp.Add) and isinstance(value.this, exp.Literal):
                value = value.expression  # a centred AVG: c + total / count
            if (
                isinstance(test, exp.GT)
                and isinstance(test.this, exp.Column)
                and isinstance(value, exp.Div)
                and isinstance(value.this, exp.Column)
                and isinstance(value.expression, exp.Column)
                and value.expression.name == test.this.name
                and {value.this.name, test.this.name} <= released
            ):
                forms[name] = _Form("avg", (value.this.name, test.this.name))
            else:
                forms[name] = _Form("other")
        else:
            forms[name] = _Form("key" if name in key_names else "other")
    return tuple(forms.items())


def _centred_sum(node: Any, released: frozenset[str]) -> tuple[str, str] | None:
    """(total, count) of a centred SUM's post-processing ``total + c * count``, else None."""
    from sqlglot import exp

    if not (isinstance(node, exp.Add) and isinstance(node.this, exp.Column)):
        return None
    product = node.expression
    if not (
        isinstance(product, exp.Mul)
        and isinstance(product.this, exp.Literal)
        and isinstance(product.expression, exp.Column)
    ):
        return None
    total, count = node.this.name, product.expression.name
    return (total, count) if {total, count} <= released else None


@dataclass(frozen=True)
class _Released:
    """What a released query's estimates need: P, each released column's noise, its clamp."""

    p: float
    noises: Mapping[str, AggregateNoise]
    functions: Mapping[str, str]
    clamps: Mapping[str, tuple[float, float]]  # measure column -> (lo, hi)
    measure: Mapping[str, str | None]  # core column -> its measure column
    centres: Mapping[str, float] = field(default_factory=dict)  # centred measure -> c


def _noise_half_width(sampling_sd: float, noise: AggregateNoise, scale: float) -> float:
    """95% half-width of a normal sampling error (sd) plus ``noise`` scaled by ``scale``.

    Laplace noise: the exact convolution ([`dpcomm.release.mechanisms.half_width`][]);
    Gaussian noise: the normal with both variances. Integer noise Z is dominated by
    |Z| ≤ |X| + 1 in distribution (X its continuous counterpart), hence one unit more.
    """
    if noise.delta == 0.0:
        width = half_width(normal_sd=sampling_sd, laplace_scale=noise.scale * scale)
    else:
        total = math.sqrt(sampling_sd**2 + noise.variance * scale**2)
        width = half_width(normal_sd=total)
    return width + (scale if noise.integer else 0.0)


def _sum_square_bound(context: _Released, column: str, row: Row) -> float | None:
    """A bound on Σ x² over a SUM's delivered values, from released values only.

    x in [lo, hi], M = max(|lo|, |hi|): Σ x² ≤ M·|Σ x| when lo ≥ 0 or hi ≤ 0, and
    Σ x² ≤ M² · (non-NULL values) with a released COUNT of the same measure (or COUNT(*)).
    The smaller of those available; None when neither is.
    """
    measure = context.measure.get(column)
    if measure is None or measure not in context.clamps:
        return None
    low, high = context.clamps[measure]
    bound = max(abs(low), abs(high))
    candidates = []
    if low >= 0.0 or high <= 0.0:
        candidates.append(bound * abs(float(row[column])))
    counts = [
        c
        for c, f in context.functions.items()
        if (f == "count" and context.measure.get(c) == measure) or f == "count_star"
    ]
    if counts:
        counted = min(max(float(row[c]), 0.0) for c in counts)
        candidates.append(bound * bound * counted)
    return min(candidates) if candidates else None


def _value_estimate(
    context: _Released, column: str, row: Row
) -> tuple[float, float | None, float | None]:
    """(estimate, se, half-width) of a released COUNT or SUM: ṽ/P, with both errors.

    Sampling variance (1 − P)/P² · Σ x² (x = 1 for a COUNT: its count, clipped at 0); the
    noise's variance σ²/P².
    """
    p, noise = context.p, context.noises[column]
    value = float(row[column])
    if context.functions[column] in ("count", "count_star"):
        squares: float | None = max(value, 0.0)
    else:
        squares = _sum_square_bound(context, column, row)
    if squares is None:
        return value / p, None, None
    sampling_sd = math.sqrt(squares * (1.0 - p)) / p
    error = math.sqrt(sampling_sd**2 + noise.variance / p**2)
    return value / p, error, _noise_half_width(sampling_sd, noise, 1.0 / p)


#: Why an AVG's interval is withheld, as its ``(no interval)`` column says it.
AVG_COUNT_TOO_SMALL = "noisy count ≤ 0, too small for an interval"
AVG_NO_FIT = "no average within the bounds fits the released SUM and COUNT"
AVG_NO_BOUNDS = "no bounds known for its values"

#: The same reasons, as the report explains them.
AVG_REASONS = {
    AVG_COUNT_TOO_SMALL: "the noisy COUNT is ≤ 0: no average is released, and the sampling "
    "error of its values cannot be sized",
    AVG_NO_FIT: "no average in the bounds [lo, hi] agrees at 95% with the released SUM and "
    "COUNT (their noise was unusually large)",
    AVG_NO_BOUNDS: "no bounds [lo, hi] are known for its values",
}

#: The test level of AVG's confidence set, and the points of its grid over [lo, hi].
_ALPHA = 1.0 - CONFIDENCE
_AVG_GRID = 401
#: The largest relative error of the noisy count for which AVG's standard error is given.
_AVG_SE_CV = 0.25


def no_interval_name(name: str) -> str:
    """The column that says why an AVG's interval is withheld: ``m (no interval)``."""
    return f"{name} (no interval)"


@dataclass(frozen=True)
class _AvgEstimate:
    """AVG's estimate, standard error and interval; ``reason`` when the interval is withheld."""

    value: float | None
    error: float | None = None
    low: float | None = None
    high: float | None = None
    reason: str | None = None


def _normal_laplace_tail(
    s: np.ndarray[Any, Any], b: np.ndarray[Any, Any], h: np.ndarray[Any, Any]
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """P(|N(0, s²) + Laplace(b)| > h), elementwise: the convolution in closed form.

    As in [`dpcomm.release.mechanisms.half_width`][]: P(X > h) = Φ(−h/s) + ½ e^{s²/2b² −
    h/b} Φ(h/s − s/b) − ½ e^{s²/2b² + h/b} Φ(−h/s − s/b); b = 0 gives 2Φ(−h/s), s = 0
    gives e^{−h/b}.
    """
    from scipy.special import log_ndtr

    s, b, h = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (s, b, h)))
    tail = np.where(h > 0.0, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        normal = (b == 0.0) & (s > 0.0)
        tail = np.where(normal, 2.0 * np.exp(log_ndtr(-h / s)), tail)
        laplace = (s == 0.0) & (b > 0.0)
        tail = np.where(laplace, np.exp(-h / b), tail)
        both = (s > 0.0) & (b > 0.0)
        shift = s * s / (2.0 * b * b)
        upper = (
            np.exp(log_ndtr(-h / s))
            + 0.5 * np.exp(shift - h / b + log_ndtr(h / s - s / b))
            - 0.5 * np.exp(shift + h / b + log_ndtr(-h / s - s / b))
        )
        tail = np.where(both, 2.0 * upper, tail)
    return np.clip(tail, 0.0, 1.0)


def _two_laplace_tail(
    s: np.ndarray[Any, Any], b1: np.ndarray[Any, Any], b2: np.ndarray[Any, Any], h: Any
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """P(|N(0, s²) + L1 + L2| > h), L1 and L2 Laplace of scales b1, b2, all independent.

    The density of L1 + L2 (b1 > b2) is the signed mixture w1 f_b1 + w2 f_b2 of Laplace
    densities, w1 = b1²/(b1² − b2²), w2 = −b2²/(b1² − b2²); so is the tail once the normal
    is added. Scales closer than 0.1% are made that far apart by raising the larger: a
    larger scale only widens (conservative), and the weights stay below 10³.
    """
    s, b1, b2 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (s, b1, b2)))
    small, large = np.minimum(b1, b2), np.maximum(b1, b2)
    large = np.maximum(large, small * (1.0 + 1e-3))
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(small > 0.0, small**2 / (large**2 - small**2), 0.0)
    mixed = (1.0 + weight) * _normal_laplace_tail(s, large, h)
    mixed -= weight * _normal_laplace_tail(s, small, h)
    return np.clip(mixed, 0.0, 1.0)


@dataclass(frozen=True)
class _Ratio:
    """What AVG's confidence set is tested with: released SUM S̃ and COUNT C̃, their noises."""

    total: float
    count: float
    p: float
    sum_noise: AggregateNoise
    count_noise: AggregateNoise
    low: float
    high: float

    def p_values(self, ratios: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
        """P(|E(R)| ≥ |S̃ − R C̃|) per candidate average R (see ``_avg_estimate``)."""
        ratios = np.asarray(ratios, dtype=np.float64)
        deviation = np.abs(self.total - ratios * self.count)
        # Integer noise Z is dominated by |Z| ≤ |X| + 1 (X continuous): 1 for S̃, |R| for R C̃.
        deviation -= float(self.sum_noise.integer) + np.abs(ratios) * self.count_noise.integer
        deviation = np.maximum(deviation, 0.0)
        spread = np.maximum((self.high - ratios) * (ratios - self.low), 0.0)  # Bhatia–Davis
        sampling_variance = (1.0 - self.p) * max(self.count, 0.0) * spread
        if self.sum_noise.delta == 0.0:
            return _two_laplace_tail(
                np.sqrt(sampling_variance),
                np.full_like(ratios, self.sum_noise.scale),
                np.abs(ratios) * self.count_noise.scale,
                deviation,
            )
        variance = (
            sampling_variance + self.sum_noise.variance + ratios**2 * self.count_noise.variance
        )
        return _normal_laplace_tail(np.sqrt(variance), np.zeros_like(ratios), deviation)

    def p_value_at(self, ratio: float) -> float:
        """`p_values` of one candidate R, in numpy scalars (the same operations and bits).

        The caller sets numpy's error state (`_two_laplace_tail_at`).
        """
        r = np.float64(ratio)
        deviation = np.abs(self.total - r * self.count)
        deviation -= float(self.sum_noise.integer) + np.abs(r) * self.count_noise.integer
        deviation = np.maximum(deviation, 0.0)
        spread = np.maximum((self.high - r) * (r - self.low), 0.0)
        sampling_variance = (1.0 - self.p) * max(self.count, 0.0) * spread
        if self.sum_noise.delta == 0.0:
            return float(
                _two_laplace_tail_at(
                    np.sqrt(sampling_variance),
                    np.float64(self.sum_noise.scale),
                    np.abs(r) * self.count_noise.scale,
                    deviation,
                )
            )
        variance = sampling_variance + self.sum_noise.variance + r**2 * self.count_noise.variance
        return float(_normal_laplace_tail_at(np.sqrt(variance), np.float64(0.0), deviation))

    def interval(self, estimate: float, error: float) -> tuple[float, float] | None:
        """The hull of {R in [lo, hi]: p-value > 5%}, its ends found to 10⁻¹⁰; None: empty.

        The grid is [lo, hi] in 400 steps, plus points around the estimate (within 4
        standard errors), so that a set narrower than a step is not missed.
        """
        from scipy.optimize import brentq

        near = estimate + error * np.array([0.0, -0.25, 0.25, -0.5, 0.5, -1.0, 1.0, -2, 2, -4, 4])
        grid = np.union1d(
            np.linspace(self.low, self.high, _AVG_GRID), np.clip(near, self.low, self.high)
        )
        accepted = np.flatnonzero(self.p_values(grid) > _ALPHA)
        if accepted.size == 0:
            return None

        def excess(ratio: float) -> float:
            return self.p_value_at(ratio) - _ALPHA

        first, last = int(accepted[0]), int(accepted[-1])
        low, high = float(grid[first]), float(grid[last])
        tolerance = 1e-10 * max(self.high - self.low, 1e-300)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if first > 0:
                low = float(brentq(excess, float(grid[first - 1]), low, xtol=tolerance))
            if last < grid.size - 1:
                high = float(brentq(excess, high, float(grid[last + 1]), xtol=tolerance))
        return low, high


def _avg_estimate(context: _Released, total: str, count: str, row: Row) -> _AvgEstimate:
    """AVG = S̃/C̃ with its standard error and a Fieller-type interval, or why not.

    The estimate is the released ratio (None when C̃ ≤ 0). Its interval inverts a test:
    for the true average R of the values (clamped to [lo, hi]), E(R) = S̃ − R C̃ is
    Σ_delivered (x − R) + Z_S − R Z_C, of mean 0: a sampling error of variance
    P(1 − P) Σ_all (x − R)² ≤ (1 − P) C̃ (hi − R)(R − lo) (Bhatia–Davis; P·N estimated by
    C̃), taken as normal, plus the noise (two Laplace, their convolution with the normal
    in closed form; or normal). The interval is the hull of every R in [lo, hi] whose
    p-value exceeds 5%: a denominator near 0 makes it wide (up to [lo, hi] itself), not
    wrong, unlike the delta method's ± 1.96 se (which covered 70% at 12 rows per key,
    P = 0.4, ε2 = 1). Withheld, with the reason, when C̃ ≤ 0 (no average is released, and
    the plug-in sampling variance would be 0) or when no R in [lo, hi] fits.

    The standard error is the delta method's, (1 − P)(hi − lo)²/4 / C̃ (Popoviciu) plus
    (σ_S² + R̂² σ_C²)/C̃², R̂ clamped to [lo, hi]. It is given only when the count's own
    error, √(σ_C² + (1 − P) C̃), is at most a quarter of C̃: the delta method expands 1/C̃
    to first order, and E[1/(1 + e)²] ≈ 1 + 3 CV² understates the variance by ~20% at a
    coefficient of variation of 0.25, by far more beyond (a ratio whose denominator is
    within its noise of 0 has no useful standard error). The interval does not use it.
    """
    denominator = float(row[count])
    if denominator <= 0.0:
        return _AvgEstimate(None, reason=AVG_COUNT_TOO_SMALL)
    estimate = float(row[total]) / denominator
    measure = context.measure.get(total)
    if measure is None or measure not in context.clamps:
        return _AvgEstimate(estimate, reason=AVG_NO_BOUNDS)
    centre = context.centres.get(measure, 0.0)
    if centre:  # in the centred values' coordinates, shifted back at the end
        low, high = context.clamps[measure]
        clamps = {**context.clamps, measure: (low - centre, high - centre)}
        centred = _avg_estimate(replace(context, clamps=clamps, centres={}), total, count, row)
        return _shifted(centred, centre)
    count_noise, sum_noise = context.noises[count], context.noises[total]
    low, high = context.clamps[measure]
    ratio = min(max(estimate, low), high)
    sampling_variance = (1.0 - context.p) * (high - low) ** 2 / 4.0 / denominator
    noise_variance = (sum_noise.variance + ratio**2 * count_noise.variance) / denominator**2
    delta_method = math.sqrt(sampling_variance + noise_variance)
    count_error = math.sqrt(count_noise.variance + (1.0 - context.p) * denominator)
    error = delta_method if count_error <= _AVG_SE_CV * denominator else None
    test = _Ratio(float(row[total]), denominator, context.p, sum_noise, count_noise, low, high)
    interval = test.interval(estimate, delta_method)
    if interval is None:
        return _AvgEstimate(estimate, error, reason=AVG_NO_FIT)
    return _AvgEstimate(estimate, error, *interval)


def _shifted(average: _AvgEstimate, centre: float) -> _AvgEstimate:
    """A centred AVG's estimate and interval moved back by its centre c (its error is not)."""

    def moved(value: float | None) -> float | None:
        return None if value is None else value + centre

    return _AvgEstimate(
        moved(average.value), average.error, moved(average.low), moved(average.high),
        average.reason,
    )  # fmt: skip


def _centred_sum_estimate(
    context: _Released, total: str, count: str, row: Row
) -> tuple[float, float, float]:
    """(estimate, se, half-width) of a centred SUM, S̃ + c C̃, estimated as (S̃ + c C̃)/P.

    Its error is the sampling's, (1 − P)/P² Σ x² ≤ (1 − P)/P² M² C̃ (M = max(|lo|, |hi|),
    C̃ clipped at 0), plus the noise Z_S + c Z_C over P: two Laplace errors and the normal
    convolved, or the normal with every variance; integer count noise |c|/P wider.
    """
    p = context.p
    measure = context.measure.get(total) or ""
    low, high = context.clamps[measure]
    centre = context.centres.get(measure, 0.0)
    sum_noise, count_noise = context.noises[total], context.noises[count]
    value = (float(row[total]) + centre * float(row[count])) / p
    squares = max(abs(low), abs(high)) ** 2 * max(float(row[count]), 0.0)
    sampling_sd = math.sqrt(squares * (1.0 - p)) / p
    noise_variance = (sum_noise.variance + centre**2 * count_noise.variance) / p**2
    error = math.sqrt(sampling_sd**2 + noise_variance)
    if sum_noise.delta == 0.0:
        width = _two_laplace_half_width(
            sampling_sd, sum_noise.scale / p, abs(centre) * count_noise.scale / p
        )
    else:
        width = half_width(normal_sd=error)
    return value, error, width + (abs(centre) / p if count_noise.integer else 0.0)


def _two_laplace_half_width(sd: float, first: float, second: float) -> float:
    """The h with P(|N(0, sd²) + L1 + L2| > h) = 5%, L1 and L2 Laplace of these scales."""
    from scipy.optimize import brentq
    from scipy.special import ndtri

    scales = (np.float64(sd), np.float64(first), np.float64(second))

    def outside(h: float) -> float:
        return float(_two_laplace_tail_at(*scales, np.float64(h))) - _ALPHA

    # Union bound: each of the three beyond its (1 − α/3) quantile.
    high = sd * float(-ndtri(_ALPHA / 6.0)) + (first + second) * math.log(3.0 / _ALPHA) + 1e-12
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return float(brentq(outside, 0.0, high, xtol=1e-12 * high, rtol=1e-12))


def _two_laplace_tail_at(
    s: np.float64, b1: np.float64, b2: np.float64, h: np.float64
) -> np.float64:
    """`_two_laplace_tail` of one (s, b1, b2, h), in numpy scalars.

    The same operations, without an array's overhead (a root search calls it a dozen times
    per released row). The caller sets numpy's error state.
    """
    small, large = min(b1, b2), max(b1, b2)
    large = max(large, small * (1.0 + 1e-3))
    weight = small**2 / (large**2 - small**2) if small > 0.0 else np.float64(0.0)
    mixed = (1.0 + weight) * _normal_laplace_tail_at(s, large, h)
    mixed -= weight * _normal_laplace_tail_at(s, small, h)
    return _clipped(mixed)


def _clipped(probability: np.float64) -> np.float64:
    """``probability`` within [0, 1] (NaN stays NaN), as ``np.clip`` without its overhead."""
    return np.float64(min(max(probability, 0.0), 1.0))


def _normal_laplace_tail_at(s: np.float64, b: np.float64, h: np.float64) -> np.float64:
    """`_normal_laplace_tail` of one (s, b, h), in numpy scalars (see `_two_laplace_tail_at`)."""
    from scipy.special import log_ndtr

    if b == 0.0 and s > 0.0:
        return _clipped(2.0 * np.exp(log_ndtr(-h / s)))
    if s == 0.0 and b > 0.0:
        return _clipped(np.exp(-h / b))
    if not (s > 0.0 and b > 0.0):
        return np.float64(0.0 if h > 0.0 else 1.0)
    shift = s * s / (2.0 * b * b)
    upper = (
        np.exp(log_ndtr(-h / s))
        + 0.5 * np.exp(shift - h / b + log_ndtr(h / s - s / b))
        - 0.5 * np.exp(shift + h / b + log_ndtr(-h / s - s / b))
    )
    return _clipped(2.0 * upper)


def _released_row(
    context: _Released, forms: Mapping[str, _Form], names: Sequence[str], core: Row, final: Row
) -> Row:
    """One released row estimated: keys and expressions as released, COUNT, SUM and AVG not.

    Each COUNT, SUM and AVG gets its estimate, standard error and interval (a COUNT's lower
    end clipped at 0); an AVG also says why its interval is withheld, or None.
    """
    printed: Row = {}
    for name in names:
        form = forms.get(name, _Form("other"))
        if form.kind in ("key", "other"):
            printed[name] = final[name]
            continue
        low_name, high_name = interval_names(name)
        if form.kind == "avg":
            total, count = form.columns
            average = _avg_estimate(context, total, count, core)
            printed[estimate_name(name)] = average.value
            printed[standard_error_name(name)] = average.error
            printed[low_name], printed[high_name] = average.low, average.high
            printed[no_interval_name(name)] = average.reason
            continue
        if form.kind == "centred_sum":
            total, count = form.columns
            centred, spread, reach = _centred_sum_estimate(context, total, count, core)
            printed[estimate_name(name)] = centred
            printed[standard_error_name(name)] = spread
            printed[low_name], printed[high_name] = centred - reach, centred + reach
            continue
        value, error, width = _value_estimate(context, form.columns[0], core)
        low = high = None
        if width is not None:
            low, high = value - width, value + width
            if context.functions[form.columns[0]] != "sum":
                low = max(low, 0.0)
        printed[estimate_name(name)] = value
        printed[standard_error_name(name)] = error
        printed[low_name], printed[high_name] = low, high
    return printed


def _released_columns(
    names: Sequence[str],
    types: Sequence[str],
    estimated: Sequence[str],
    averages: Sequence[str],
    *,
    several: bool,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The estimated release's column names and DuckDB types (estimates and errors DOUBLE).

    An AVG (of ``averages``) has a fifth column, VARCHAR: why its interval is withheld.
    """
    columns: list[str] = []
    kinds: list[str] = []
    for name, sql_type in zip(names, types, strict=True):
        if name in estimated:
            columns.extend((estimate_name(name), standard_error_name(name), *interval_names(name)))
            kinds.extend(["DOUBLE"] * 4)
            if name in averages:
                columns.append(no_interval_name(name))
                kinds.append("VARCHAR")
        else:
            columns.append(name)
            kinds.append(sql_type)
    if several:
        columns.append(GROUPING_SET_COLUMN)
        kinds.append("VARCHAR")
    return tuple(columns), tuple(kinds)


def _released_without_interval(
    rows: Sequence[Row],
    estimated: Sequence[str],
    averages: Sequence[str],
    forms: Mapping[str, _Form],
    functions: Mapping[str, str],
) -> dict[str, str]:
    """Why some released estimates have no interval, by estimate column (none: omitted)."""
    no_interval = {
        estimate_name(name): "a SUM of a measure that takes both signs, without a released "
        "COUNT to bound its values' squares"
        for name in estimated
        if forms[name].kind == "value"
        and functions[forms[name].columns[0]] == "sum"
        and any(row[standard_error_name(name)] is None for row in rows)
    }
    for name in averages:
        reasons = [r for r in AVG_REASONS if any(row[no_interval_name(name)] == r for row in rows)]
        if reasons:
            withheld = sum(row[no_interval_name(name)] is not None for row in rows)
            no_interval[estimate_name(name)] = (
                f"withheld in {withheld:,} of {len(rows):,} rows, as {no_interval_name(name)!r} "
                "says: " + "; ".join(f"{r}: {AVG_REASONS[r]}" for r in reasons)
            )
    return no_interval


def released_estimate(program: AggregateProgram, run: Run) -> UnbiasedEstimate:
    """A noisy release's values estimated over every tuple, intervals covering both errors.

    The intervals cover the sampling's and the noise's errors. Every number comes from the
    released (noisy) rows and public parameters, never from the table: estimates and
    intervals are post-processing of the release, as private as it. COUNT and SUM are ṽ/P
    (Horvitz–Thompson on the noisy values: unbiased, the noise having mean 0), AVG the
    released S̃/C̃ (P cancels); their errors in ``_value_estimate`` and
    ``_avg_estimate``. Other expressions over aggregates are the released values (not
    estimated). The rows are the released rows (the public domain's keys, or those a
    threshold selected: a selected key's count is conditioned on passing the threshold, and
    biased upward when it is small).
    """
    release = program.release
    post = program.query.post
    if release is None or post is None:
        from dpcomm.errors import InvalidParameterError

        raise InvalidParameterError("program", "a program with a noisy release", None)
    forms = _release_forms(program)
    probabilities = delivery_probabilities(program, run)
    # The raw released values (drawn once): unbiased, before counts are clamped at 0.
    released = program.raw_core_result(run.state)
    final_rows = program.raw_result(run.state)
    if len(final_rows) != sum(len(rows) for rows in released):
        raise RuntimeError("the released result and its core rows differ in length")
    outputs = {o.name: o for o in program.query.outputs}
    clamps = {name: (low, high) for name, _, low, high in program.query.clamps}
    centres = dict(program.query.centres)
    noises = {n.output: n for n in release.noises}
    functions = {n: outputs[n].function or "" for n in noises}
    measures = {n: outputs[n].column for n in noises}
    several = program.query.num_grouping_sets > 1
    rows: list[Row] = []
    per_set: list[list[Row]] = []
    position = 0
    for index, flow in enumerate(program.flow_names):
        context = _Released(probabilities[flow], noises, functions, clamps, measures, centres)
        compared_rows = []
        for core in released[index]:
            final = final_rows[position]
            position += 1
            printed = _released_row(context, forms, post.names, core, final)
            if several:
                printed[GROUPING_SET_COLUMN] = final[GROUPING_SET_COLUMN]
            rows.append(printed)
            compared = dict(core)
            for column in noises:
                compared[column] = float(core[column]) / context.p
            compared_rows.append(compared)
        per_set.append(compared_rows)
    estimated = [
        n
        for n in post.names
        if forms.get(n, _Form("other")).kind in ("value", "avg", "centred_sum")
    ]
    others = tuple(n for n in post.names if forms.get(n, _Form("other")).kind == "other")
    averages = [n for n in estimated if forms[n].kind == "avg"]
    columns, types = _released_columns(post.names, post.types, estimated, averages, several=several)
    no_interval = _released_without_interval(rows, estimated, averages, forms, functions)
    report = EstimateReport(
        method="horvitz-thompson with release noise",
        delivery_probability=probabilities,
        confidence=CONFIDENCE,
        columns={name: estimate_name(name) for name in estimated},
        delivered_columns=others,
        key_domain="the released keys",
        groups_estimated_empty={},
        no_interval=no_interval,
        noise=RELEASE_ESTIMATE_NOTE,
    )
    error_names = {c: estimate_name(program.query.output_label(c)) for c in noises}
    return UnbiasedEstimate(rows, tuple(columns), tuple(types), tuple(per_set), report, error_names)
