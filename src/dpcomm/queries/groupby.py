"""The computation of the Aggregate query's compute nodes, vectorized with numpy.

Section 2.1 of the paper: the dataset is split vertically by grouping set ``q`` and horizontally
by the values of the grouping attributes ``G_q``; the compute node ``c_q^i`` computes the
aggregates of its partition ``D_q^i`` and the result is the union of the compute nodes' outputs.
Since every group lies in exactly one partition, the union over the compute nodes of one grouping
set equals the group-by over the tuples that reached them, which is what
:func:`evaluate_grouping_set` computes (one sort by group id, then ``reduceat``).

Semantics are DuckDB's: NULL is a grouping value of its own; COUNT(*) counts rows and COUNT(col)
non-NULL values; SUM, AVG, MIN and MAX ignore NULLs and are NULL for a group without a non-NULL
value; integer SUM, MIN and MAX are exact; the empty grouping set ``()`` yields one row even over
no rows. :func:`reference_result` computes the same thing with DuckDB for testing.
"""

from __future__ import annotations

import decimal
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import Column, Table
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.query import BoundAggregate

Row = dict[str, object]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Above this many radix slots, combined group codes are compressed by sorting.
_DENSE_LIMIT = 1 << 22
#: Combined codes are kept below this bound (int64 without overflow).
_CODE_LIMIT = 1 << 62
#: Digits of the context DECIMAL sums run in (38-digit values, any realistic number of rows).
_DECIMAL_DIGITS = 200


@dataclass(frozen=True, eq=False)
class _Codes:
    """A column factorized over all rows of a table.

    ``codes[r]`` is the rank of row r's value among the distinct non-NULL values (so the order of
    codes is the order of values), and ``cardinality - 1`` for NULL.
    """

    codes: IntArray
    cardinality: int


def _factorize(column: Column) -> _Codes:
    """Rank every value of ``column``; NULL gets the largest code (NULLs sort last)."""
    values, is_null = column.values, column.is_null
    present = values[~is_null]
    codes = np.zeros(len(values), dtype=np.int64)
    if present.dtype.kind in "iu" and len(present):
        low, high = int(present.min()), int(present.max())
        if high - low < 4 * len(present) + 1024:
            offsets = (present - low).astype(np.int64)
            seen = np.bincount(offsets, minlength=high - low + 1) > 0
            rank = np.cumsum(seen, dtype=np.int64) - 1
            codes[~is_null] = rank[offsets]
            count = int(rank[-1]) + 1
        else:
            _, inverse = np.unique(present, return_inverse=True)
            codes[~is_null] = inverse.reshape(-1)
            count = int(inverse.max()) + 1
    elif present.dtype.kind == "O" and len(present):
        listed = present.tolist()
        distinct = sorted(set(listed))
        index = {value: i for i, value in enumerate(distinct)}
        codes[~is_null] = np.fromiter(map(index.__getitem__, listed), np.int64, len(listed))
        count = len(distinct)
    elif len(present):
        _, inverse = np.unique(present, return_inverse=True)
        codes[~is_null] = inverse.reshape(-1)
        count = int(inverse.max()) + 1
    else:
        count = 0
    codes[is_null] = count
    return _Codes(codes, count + 1)


@dataclass(frozen=True, eq=False)
class _Groups:
    """Selected rows grouped: rows sorted by group, group boundaries, a row of each group."""

    rows: IntArray  # indices of the selected rows, sorted by group (stable)
    group_of_sorted: IntArray  # group id of each entry of ``rows``
    starts: IntArray  # first position in ``rows`` of each group
    sizes: IntArray  # rows per group
    representatives: IntArray  # one table row index per group

    @property
    def num_groups(self) -> int:
        return len(self.sizes)


def _combine(codes: Sequence[_Codes], selected: IntArray) -> tuple[IntArray, int]:
    """Mixed-radix code of each selected row's key (first column most significant)."""
    combined = np.zeros(len(selected), dtype=np.int64)
    slots = 1
    for column in codes:
        if slots * column.cardinality >= _CODE_LIMIT:
            _, inverse = np.unique(combined, return_inverse=True)
            combined = inverse.reshape(-1).astype(np.int64)
            slots = int(combined.max()) + 1 if len(combined) else 1
        combined = combined * column.cardinality + column.codes[selected]
        slots *= column.cardinality
    return combined, slots


def _group(codes: Sequence[_Codes], selected: IntArray, *, keep_empty: bool) -> _Groups:
    """Group the ``selected`` rows by their key codes; groups numbered in key order."""
    combined, slots = _combine(codes, selected)
    if len(selected) == 0:
        size = 1 if keep_empty else 0
        return _Groups(
            selected,
            np.zeros(0, dtype=np.int64),
            np.zeros(size, dtype=np.int64),
            np.zeros(size, dtype=np.int64),
            np.full(size, -1, dtype=np.int64),
        )
    if slots <= max(_DENSE_LIMIT, 2 * len(selected)):
        seen = np.bincount(combined, minlength=slots) > 0
        dense = np.cumsum(seen, dtype=np.int64) - 1
        group = dense[combined]
        num_groups = int(dense[-1]) + 1
    else:
        _, inverse = np.unique(combined, return_inverse=True)
        group = inverse.reshape(-1).astype(np.int64)
        num_groups = int(group.max()) + 1
    if num_groups == 1:
        order = np.arange(len(group), dtype=np.int64)
    elif num_groups <= 1 << 16:
        order = np.argsort(group.astype(np.uint16), kind="stable").astype(np.int64)
    else:
        order = np.argsort(group, kind="stable").astype(np.int64)
    sizes = np.bincount(group, minlength=num_groups).astype(np.int64)
    starts = np.zeros(num_groups, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    rows = selected[order]
    return _Groups(rows, group[order], starts, sizes, rows[starts])


def _selected(rows: npt.ArrayLike, num_rows: int, name: str) -> IntArray:
    mask = np.asarray(rows)
    if mask.dtype != np.bool_ or mask.shape != (num_rows,):
        raise InvalidParameterError(
            name, f"a boolean mask of shape ({num_rows},)", f"{mask.dtype} {mask.shape}"
        )
    return np.flatnonzero(mask).astype(np.int64)


def group_ids(
    table: Table, columns: Sequence[str], rows_mask: npt.ArrayLike
) -> tuple[IntArray, Table]:
    """Factorize the key ``columns`` over the rows where ``rows_mask`` is True.

    NULL is a key value of its own and sorts after every other value.

    Returns:
        The group id of each selected row (in row order), and the table of distinct keys in key
        order (row ``i`` is group ``i``). With no ``columns`` every row is in group 0 and the key
        table has no columns.
    """
    selected = _selected(rows_mask, table.num_rows, "rows_mask")
    data = [table.column(name) for name in columns]
    groups = _group([_factorize(c) for c in data], selected, keep_empty=False)
    ids = np.empty(len(selected), dtype=np.int64)
    ids[np.searchsorted(selected, groups.rows)] = groups.group_of_sorted
    keys = tuple(c.take(groups.representatives) for c in data)
    return ids, Table(table.name, keys)


def partition_keys(key_table: Table, num_compute_nodes: int) -> IntArray:
    """Compute node (0..C-1, C = ``num_compute_nodes``) of each distinct key of ``key_table``.

    The key tuple, NULL encoded distinctly from every value, is hashed with BLAKE2b and reduced
    modulo C. The assignment is a public, deterministic function of the key alone: it is part of
    the execution plan, which the observer knows, and each source node must compute it locally
    from its own tuple (Section 2.1). Were it derived from the data (e.g. ranges balanced on the
    observed distribution), the plan itself would disclose information about the data outside
    what the differential-privacy accounting of the communication pattern covers.

    A key table without columns stands for the empty grouping set ``()``: its single key (the
    empty tuple) goes to compute node 0 and the result has length 1.
    """
    if isinstance(num_compute_nodes, bool) or not isinstance(num_compute_nodes, int | np.integer):
        raise InvalidParameterError("num_compute_nodes", "an integer >= 1", num_compute_nodes)
    if num_compute_nodes < 1:
        raise InvalidParameterError("num_compute_nodes", "an integer >= 1", num_compute_nodes)
    if not key_table.columns:
        return np.zeros(1, dtype=np.int64)
    listed = [_python_values(c) for c in key_table.columns]
    nodes = np.empty(key_table.num_rows, dtype=np.int64)
    for index, key in enumerate(zip(*listed, strict=True)):
        digest = hashlib.blake2b(_encode_key(key), digest_size=8).digest()
        nodes[index] = int.from_bytes(digest, "big") % int(num_compute_nodes)
    return nodes


def _encode_key(key: Sequence[object]) -> bytes:
    """Canonical bytes of a key tuple: per value a type tag, a length and the payload."""
    parts = []
    for value in key:
        if value is None:
            tag, payload = b"N", b""
        elif isinstance(value, bool):
            tag, payload = b"b", b"1" if value else b"0"
        elif isinstance(value, int):
            tag, payload = b"i", str(value).encode()
        elif isinstance(value, float):
            tag, payload = b"f", float.hex(value).encode()
        elif isinstance(value, str):
            tag, payload = b"s", value.encode("utf-8")
        elif isinstance(value, Decimal) and value.is_finite():
            # By value (12.3 and 12.30 are one group), exactly (no context rounding).
            numerator, denominator = value.as_integer_ratio()
            tag, payload = b"d", f"{numerator}/{denominator}".encode()
        else:
            tag, payload = b"o", repr(value).encode("utf-8")
        parts.append(tag + len(payload).to_bytes(4, "big") + payload)
    return b"".join(parts)


def assign_compute_nodes(
    table: Table, columns: Sequence[str], *, num_compute_nodes: int
) -> IntArray:
    """Compute node of every row of ``table`` for the grouping set ``columns``.

    Equal to :func:`partition_keys` applied to the row's key; every row goes to node 0 for the
    empty grouping set.
    """
    mask = np.ones(table.num_rows, dtype=bool)
    ids, keys = group_ids(table, columns, mask)
    nodes = partition_keys(keys, num_compute_nodes=num_compute_nodes)
    if not columns:
        return np.zeros(table.num_rows, dtype=np.int64)
    return nodes[ids]


def _python_values(column: Column) -> list[object]:
    """The column's values as Python objects, ``None`` for NULL."""
    values: list[object] = column.values.tolist()
    for index in np.flatnonzero(column.is_null).tolist():
        values[index] = None
    return values


class _Evaluator:
    """Evaluates grouping sets of a bound query over one table, factorizing each column once."""

    def __init__(self, bound: BoundAggregate, table: Table, *, check: bool = True) -> None:
        if check:
            bound.check_table(table)
        self.bound = bound
        self.table = table
        self._codes: dict[str, _Codes] = {}

    def codes(self, name: str) -> _Codes:
        key = name.lower()
        if key not in self._codes:
            self._codes[key] = _factorize(self.table.column(name))
        return self._codes[key]

    def grouping_set(self, set_index: int, rows: npt.ArrayLike) -> list[Row]:
        return self.grouping_set_groups(set_index, rows)[0]

    def grouping_set_groups(
        self, set_index: int, rows: npt.ArrayLike
    ) -> tuple[list[Row], list[tuple[object, ...]], IntArray]:
        """The rows of a grouping set, each group's key values and a table row of each group."""
        bound = self.bound
        if not 0 <= set_index < bound.num_grouping_sets:
            raise InvalidParameterError("set_index", f"0..{bound.num_grouping_sets - 1}", set_index)
        columns = bound.grouping_sets[set_index]
        selected = _selected(rows, self.table.num_rows, f"mask of grouping set {set_index}")
        groups = _group([self.codes(c) for c in columns], selected, keep_empty=not columns)
        in_set = {c.lower() for c in columns}
        output_values: list[list[object]] = []
        cache: dict[tuple[str | None, str | None], list[object]] = {}
        gathered: dict[str, _Gathered] = {}
        for output, output_type in zip(bound.outputs, bound.output_types, strict=True):
            key = (output.column, output.function)
            if key not in cache:
                if output.kind == "group":
                    if (output.column or "").lower() in in_set:
                        cache[key] = _key_values(self.table.column(output.column or ""), groups)
                    else:
                        cache[key] = [None] * groups.num_groups
                else:
                    cache[key] = self._aggregate(
                        output.function or "",
                        output.column,
                        groups,
                        gathered,
                        double=output_type == "DOUBLE",
                    )
            output_values.append(cache[key])
        names = bound.output_names
        result = [dict(zip(names, row, strict=True)) for row in zip(*output_values, strict=True)]
        key_columns = [_key_values(self.table.column(c), groups) for c in columns]
        keys: list[tuple[object, ...]] = (
            list(zip(*key_columns, strict=True)) if columns else [() for _ in range(len(result))]
        )
        return result, keys, groups.representatives

    def _aggregate(
        self,
        function: str,
        column: str | None,
        groups: _Groups,
        gathered: dict[str, _Gathered],
        *,
        double: bool = False,
    ) -> list[object]:
        """One aggregate per group; ``double`` when DuckDB's result is a DOUBLE.

        DuckDB sums UHUGEINT values as DOUBLEs: so does a SUM whose DuckDB type is DOUBLE.
        """
        if function == "count_star":
            return list(groups.sizes.tolist())
        if groups.num_groups == 0:
            return []
        data = self.table.column(column or "")
        key = data.name.lower()
        if key not in gathered:
            gathered[key] = _gather(data, groups)
        counts, starts, values = gathered[key]
        if function == "count":
            return list(counts.tolist())
        result: list[object] = [None] * groups.num_groups
        if len(values) == 0:
            return result
        if function == "sum" and double and values.dtype.kind != "f":
            values = _sorted_within(values.astype(np.float64), counts, starts)
        has = counts > 0
        starts = starts[has]
        integer = values.dtype.kind in "iu"
        exact = integer or values.dtype.kind == "O"  # Python ints beyond int64, or Decimals
        if function in ("sum", "avg"):
            reduced = _sums(values, starts, integer=integer)
            if function == "avg":
                reduced = [_mean(s, c) for s, c in zip(reduced, counts[has].tolist(), strict=True)]
        elif function == "min":
            reduce = np.minimum if exact else np.fmin
            reduced = reduce.reduceat(values, starts).tolist()
        elif function == "max":
            reduced = np.maximum.reduceat(values, starts).tolist()
        else:
            raise InvalidParameterError("function", "count, sum, avg, min or max", function)
        for index, value in zip(np.flatnonzero(has).tolist(), reduced, strict=True):
            result[index] = value
        return result


_Gathered = tuple[IntArray, IntArray, npt.NDArray[Any]]


def _gather(data: Column, groups: _Groups) -> _Gathered:
    """Non-NULL count per group, segment starts and the non-NULL values sorted by group.

    Floating-point values are also sorted within each group (by their bits), so that a group's
    sum is the same whatever the order the rows came in: a compute node of the networked runtime
    and the simulator, given the same tuples in another order, compute the same bits.
    """
    nonnull = ~data.is_null[groups.rows]
    group_of = groups.group_of_sorted[nonnull]
    counts = np.bincount(group_of, minlength=groups.num_groups)
    starts = np.zeros(groups.num_groups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    values = data.values[groups.rows[nonnull]]
    if values.dtype.kind == "f" and len(values) > 1:
        values = _sorted_within(values, counts, starts)
    return counts.astype(np.int64), starts, values


#: Above this many groups, floats are ordered by two stable sorts rather than group by group.
_SEGMENT_SORT_LIMIT = 4096


def _sorted_within(values: npt.NDArray[Any], counts: IntArray, starts: IntArray) -> Any:
    """``values`` (grouped, in segments) sorted by value within each group.

    Sums of floats then do not depend on the order the rows came in (NaNs last; ±0 compare
    equal but their order never changes a sum).
    """
    several = np.flatnonzero(counts > 1)
    if len(several) <= _SEGMENT_SORT_LIMIT:
        result = values.copy()
        for group in several.tolist():
            start, stop = int(starts[group]), int(starts[group] + counts[group])
            result[start:stop] = np.sort(result[start:stop])
        return result
    group_of = np.repeat(np.arange(len(counts)), counts)
    order = np.argsort(values, kind="stable")
    order = order[np.argsort(group_of[order], kind="stable")]
    return values[order]


def _sums(values: npt.NDArray[Any], starts: IntArray, *, integer: bool) -> list[Any]:
    """Per-segment sums; exact (Python ints when int64 could overflow) for integers.

    Object arrays (integers beyond int64, DECIMAL values) are summed exactly: Decimal sums
    in a context wide enough for any sum, which raises rather than round.
    """
    if values.dtype.kind == "O":
        with decimal.localcontext() as context:
            context.prec = _DECIMAL_DIGITS
            context.Emax = decimal.MAX_EMAX
            context.Emin = decimal.MIN_EMIN
            context.traps[decimal.Inexact] = True
            return list(np.add.reduceat(values, starts).tolist())
    if not integer:
        return list(np.add.reduceat(values.astype(np.float64), starts).tolist())
    largest = max(abs(int(values.min())), abs(int(values.max())))
    if largest * len(values) < (1 << 63) - 1:
        return list(np.add.reduceat(values.astype(np.int64), starts).tolist())
    return list(np.add.reduceat(np.array(values.tolist(), dtype=object), starts).tolist())


def _mean(total: Any, count: int) -> float:
    """``total / count`` as the float nearest the exact quotient (AVG is DOUBLE in DuckDB)."""
    if isinstance(total, Decimal):
        return float(Fraction(total) / count)
    return float(total / count)


def _key_values(column: Column, groups: _Groups) -> list[object]:
    if groups.num_groups == 0:
        return []
    return _python_values(column.take(groups.representatives))


def evaluate_grouping_set(
    bound: BoundAggregate, table: Table, set_index: int, rows: npt.ArrayLike
) -> list[Row]:
    """The result rows of grouping set ``set_index`` over the rows where ``rows`` is True.

    Keys of the set carry their value, the other selected grouping columns are ``None`` (NULL),
    aggregates are Python ``int``/``float``/``None``. Rows are in key order, NULLs last.
    """
    return _Evaluator(bound, table).grouping_set(set_index, rows)


def grouping_set_groups(
    bound: BoundAggregate, table: Table, set_index: int, rows: npt.ArrayLike
) -> tuple[list[Row], list[tuple[object, ...]], IntArray]:
    """:func:`evaluate_grouping_set`, with each row's key values and a table row of its group.

    ``table`` needs only the columns grouping set ``set_index`` reads (its grouping columns and
    the aggregated ones): what a compute node receives. The representative of the empty group
    of the empty grouping set over no rows is −1.
    """
    needed = {c.lower() for c in bound.carried_columns(set_index)}
    bound.check_table(table, columns=needed)
    return _Evaluator(bound, table, check=False).grouping_set_groups(set_index, rows)


def key_order(key: Sequence[object]) -> tuple[tuple[bool, bool, object], ...]:
    """A sort key giving grouping keys the order of :func:`evaluate` (NULLs last, NaN before)."""
    return tuple(
        (
            value is None,
            isinstance(value, float) and math.isnan(value),
            0 if value is None or (isinstance(value, float) and math.isnan(value)) else value,
        )
        for value in key
    )


def evaluate(bound: BoundAggregate, table: Table, masks: Sequence[npt.ArrayLike]) -> list[Row]:
    """The decentralized result: union over grouping sets of the compute nodes' outputs.

    ``masks[g]`` says which tuples reached their compute nodes for grouping set g. Rows come in
    grouping-set order, then key order with NULLs last.
    """
    _check_masks(bound, masks)
    evaluator = _Evaluator(bound, table)
    result: list[Row] = []
    for set_index, mask in enumerate(masks):
        result.extend(evaluator.grouping_set(set_index, mask))
    return result


def _check_masks(bound: BoundAggregate, masks: Sequence[npt.ArrayLike]) -> None:
    if len(masks) != bound.num_grouping_sets:
        raise InvalidParameterError(
            "masks", f"one mask per grouping set ({bound.num_grouping_sets})", len(masks)
        )


def grouping_set_sql(bound: BoundAggregate, set_index: int) -> str:
    """The user's SQL restricted to grouping set ``set_index``, rows in canonical order.

    GROUP BY becomes ``GROUPING SETS ((set), (all grouping columns))`` with a HAVING on
    GROUPING() keeping the first set, so DuckDB itself NULL-fills the selected grouping columns
    outside the set; ORDER BY the set's columns, NULLS LAST; every output aliased with its name.
    """
    import sqlglot
    from sqlglot import exp

    select = sqlglot.parse_one(bound.sql, read="duckdb")
    if not isinstance(select, exp.Select):
        raise InvalidParameterError("sql", "a SELECT", bound.sql)
    columns = bound.grouping_sets[set_index]
    everything = bound.grouping_columns

    def tuple_of(names: Sequence[str]) -> exp.Tuple:
        return exp.Tuple(expressions=[exp.column(name, quoted=True) for name in names])

    sets = [tuple_of(columns)]
    in_set = {c.lower() for c in columns}
    outside = [c for c in everything if c.lower() not in in_set]
    if outside:
        sets.append(tuple_of(everything))
    select.set("group", exp.Group(expressions=[exp.GroupingSets(expressions=sets)]))
    if outside:
        grouping = exp.Grouping(expressions=[exp.column(c, quoted=True) for c in outside])
        bits = (1 << len(outside)) - 1
        select.set(
            "having", exp.Having(this=exp.EQ(this=grouping, expression=exp.Literal.number(bits)))
        )
    if columns:
        select.set(
            "order",
            exp.Order(
                expressions=[
                    exp.Ordered(this=exp.column(c, quoted=True), desc=False, nulls_first=False)
                    for c in columns
                ]
            ),
        )
    items = []
    for item, name in zip(select.expressions, bound.output_names, strict=True):
        inner = item.this if isinstance(item, exp.Alias) else item
        items.append(exp.alias_(inner.copy(), name, quoted=True))
    select.set("expressions", items)
    return select.sql(dialect="duckdb")


def reference_result(
    bound: BoundAggregate, table: Table, masks: Sequence[npt.ArrayLike]
) -> list[Row]:
    """The result of :func:`evaluate`, computed by DuckDB (for tests and audits).

    For each grouping set g, the rows where ``masks[g]`` is True are registered under the FROM
    name and :func:`grouping_set_sql` is run on them; rows are concatenated in grouping-set order.
    """
    from dpcomm.queries.sql import scratch_connection

    _check_masks(bound, masks)
    bound.check_table(table)
    result: list[Row] = []
    names = bound.output_names
    with scratch_connection() as connection:
        for set_index, mask in enumerate(masks):
            selected = _selected(mask, table.num_rows, f"mask of grouping set {set_index}")
            table.take(selected).register(connection, bound.table_name)
            fetched = connection.execute(grouping_set_sql(bound, set_index)).fetchall()
            result.extend(dict(zip(names, row, strict=True)) for row in fetched)
    return result


def compare_results(
    a: Sequence[Row], b: Sequence[Row], *, rel_tol: float = 1e-9, abs_tol: float = 0.0
) -> list[str]:
    """Differences between two results, row by row (empty when they agree).

    Integers (and DECIMAL values against integers) must be equal, floats close within
    ``rel_tol``/``abs_tol`` (DuckDB's DECIMAL sums are exact, float64 here), NULL equals NULL only.
    """
    if not (rel_tol >= 0 and abs_tol >= 0):
        raise InvalidParameterError(
            "rel_tol/abs_tol", "non-negative tolerances", (rel_tol, abs_tol)
        )
    differences: list[str] = []
    if len(a) != len(b):
        differences.append(f"{len(a)} rows against {len(b)} rows")
    for index, (left, right) in enumerate(zip(a, b, strict=False)):
        if list(left) != list(right):
            differences.append(f"row {index}: columns {list(left)} against {list(right)}")
            continue
        for name in left:
            x, y = left[name], right[name]
            if not _same(x, y, rel_tol=rel_tol, abs_tol=abs_tol):
                differences.append(f"row {index}, column {name}: {x!r} against {y!r}")
    return differences


def _same(x: object, y: object, *, rel_tol: float, abs_tol: float) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, bool) or isinstance(y, bool):
        return isinstance(x, bool) and isinstance(y, bool) and x == y
    exact = (int, np.integer, Decimal)
    if isinstance(x, exact) and isinstance(y, exact):
        if isinstance(x, Decimal) or isinstance(y, Decimal):
            return Decimal(str(x)) == Decimal(str(y))
        return int(x) == int(y)
    inexact = (*exact, float, np.floating)
    if isinstance(x, inexact) and isinstance(y, inexact):
        fx, fy = float(x), float(y)
        if math.isnan(fx) or math.isnan(fy):
            return math.isnan(fx) and math.isnan(fy)
        return math.isclose(fx, fy, rel_tol=rel_tol, abs_tol=abs_tol)
    return x == y
