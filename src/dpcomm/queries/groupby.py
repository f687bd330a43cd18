"""The computation of the Aggregate query's compute nodes, vectorized with numpy.

Section 2.1 of the paper: the dataset is split vertically by grouping set ``q`` and horizontally
by the values of the grouping attributes ``G_q``; the compute node ``c_q^i`` computes the
aggregates of its partition ``D_q^i`` and the result is the union of the compute nodes' outputs.
Since every group lies in exactly one partition, the union over the compute nodes of one grouping
set equals the group-by over the tuples that reached them, which is what
[`evaluate_grouping_set`][] computes (one sort by group id, then ``reduceat``).

Semantics are DuckDB's: NULL is a grouping value of its own; COUNT(*) counts rows and COUNT(col)
non-NULL values; SUM, AVG, MIN and MAX ignore NULLs and are NULL for a group without a non-NULL
value; integer SUM, MIN and MAX are exact (Python ints beyond int64), DECIMAL sums too; the empty
grouping set ``()`` yields one row even over no rows. [`reference_result`][] computes the same
thing with DuckDB for testing.

Floating-point SUM (and a SUM DuckDB types DOUBLE) is the **exact** sum of the group's values
rounded once to the nearest double (like `math.fsum`), AVG the exact sum divided by the
count rounded once (`dpcomm.queries.exactsum`): a NaN, or +inf and -inf, give NaN, infinities
of one sign that infinity, a finite exact sum beyond the double range ±inf. Unlike a float sum
in some order, this depends on the multiset of values only, so it is *mergeable*: a group-by is
computed as mergeable partials ([`grouping_set_partials`][]: per group its key, a
representative row and one partial state per output), the partials of disjoint sets of rows
merge exactly ([`merge_partials`][], associative and commutative) and finalize
([`finalize_partials`][]) to the rows of the whole, bit for bit, whatever the split of the rows
into partitions and the order of the partitions. Every engine evaluates a grouping set this way
([`evaluate`][] is the finalized partials of one part); the result is also more accurate than
a sequential float sum. Float MIN and MAX order NaN above every value (as DuckDB) and are
canonical too: the NaN is ``math.nan``, a zero is -0.0 for MIN (+0.0 for MAX) if the group has
one.
"""

from __future__ import annotations

import decimal
import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import Column, Table, decimal_scale, value_kind
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.exactsum import ExactSums, exact_sums, merge_exact_sums
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
    selected: IntArray  # indices of the selected rows, in table order
    group_of_selected: IntArray  # group id of each entry of ``selected``

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
            selected,
            np.zeros(0, dtype=np.int64),
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
    return _Groups(rows, group[order], starts, sizes, rows[starts], selected, group)


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


def partition_keys(key_table: Table, num_targets: int) -> IntArray:
    """Compute node (0..T-1, T = ``num_targets``) of each distinct key of ``key_table``.

    The key tuple, NULL encoded distinctly from every value, is hashed with BLAKE2b and reduced
    modulo T. The assignment is a public, deterministic function of the key alone: it is part of
    the execution plan, which the observer knows, and each source node must compute it locally
    from its own tuple (Section 2.1). Were it derived from the data (e.g. ranges balanced on the
    observed distribution), the plan itself would disclose information about the data outside
    what the differential-privacy accounting of the communication pattern covers.

    A key table without columns stands for the empty grouping set ``()``: its single key (the
    empty tuple) goes to compute node 0 and the result has length 1.
    """
    if isinstance(num_targets, bool) or not isinstance(num_targets, int | np.integer):
        raise InvalidParameterError("num_targets", "an integer >= 1", num_targets)
    if num_targets < 1:
        raise InvalidParameterError("num_targets", "an integer >= 1", num_targets)
    if not key_table.columns:
        return np.zeros(1, dtype=np.int64)
    listed = [_python_values(c) for c in key_table.columns]
    nodes = np.empty(key_table.num_rows, dtype=np.int64)
    for index, key in enumerate(zip(*listed, strict=True)):
        nodes[index] = node_of_key(key, int(num_targets))
    return nodes


def node_of_key(key: Sequence[object], num_targets: int) -> int:
    """The compute node of one key tuple (Python values, None for NULL): see `partition_keys`."""
    digest = hashlib.blake2b(_encode_key(key), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_targets


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
            # −0.0 == 0.0 is one group (as DuckDB groups them), on one node.
            tag, payload = b"f", float.hex(value + 0.0).encode()
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


def assign_compute_nodes(table: Table, columns: Sequence[str], *, num_targets: int) -> IntArray:
    """Compute node of every row of ``table`` for the grouping set ``columns``.

    Equal to [`partition_keys`][] applied to the row's key; every row goes to node 0 for the
    empty grouping set.
    """
    mask = np.ones(table.num_rows, dtype=bool)
    ids, keys = group_ids(table, columns, mask)
    nodes = partition_keys(keys, num_targets=num_targets)
    if not columns:
        return np.zeros(table.num_rows, dtype=np.int64)
    return nodes[ids]


def _python_values(column: Column) -> list[object]:
    """The column's values as Python objects, ``None`` for NULL."""
    values: list[object] = column.values.tolist()
    for index in np.flatnonzero(column.is_null).tolist():
        values[index] = None
    return values


#: The partial state each aggregate function reads (SUM and AVG share a column's sums).
_MEASURES = {
    "count_star": "count_star", "count": "count", "sum": "sum", "avg": "sum", "list": "list",
}  # fmt: skip


@dataclass(frozen=True, eq=False)
class CountPartial:
    """COUNT(*) (rows of each group) or COUNT(column) (non-NULL values of each group)."""

    counts: IntArray

    def take(self, groups: IntArray) -> CountPartial:
        """The state of ``groups`` (indices), in that order."""
        return CountPartial(self.counts[groups])


@dataclass(frozen=True, eq=False)
class SumPartial:
    """SUM and AVG of an integer or DECIMAL column: exact sums (int64, Python ints, Decimals).

    ``sums[g]`` is meaningless where ``counts[g]`` (non-NULL values) is 0.
    """

    counts: IntArray
    sums: npt.NDArray[Any]

    def take(self, groups: IntArray) -> SumPartial:
        """The state of ``groups`` (indices), in that order."""
        return SumPartial(self.counts[groups], self.sums[groups])


@dataclass(frozen=True, eq=False)
class FloatSumPartial:
    """SUM and AVG of a floating-point column: the exact sums of `dpcomm.queries.exactsum`."""

    sums: ExactSums

    @property
    def counts(self) -> IntArray:
        """Non-NULL values of each group."""
        return self.sums.counts

    def take(self, groups: IntArray) -> FloatSumPartial:
        """The state of ``groups`` (indices), in that order."""
        return FloatSumPartial(self.sums.take(groups))


@dataclass(frozen=True, eq=False)
class ExtremePartial:
    """MIN or MAX (``function``) of a column: each group's extreme value.

    ``values[g]`` is meaningless where ``counts[g]`` (non-NULL values) is 0.
    """

    function: str
    counts: IntArray
    values: npt.NDArray[Any]

    def take(self, groups: IntArray) -> ExtremePartial:
        """The state of ``groups`` (indices), in that order."""
        return ExtremePartial(self.function, self.counts[groups], self.values[groups])


@dataclass(frozen=True, eq=False)
class ListPartial:
    """The core query's LIST of a column: each group's non-NULL values, in canonical order.

    ``values[g]`` is a tuple sorted by [`key_order`][] (so that it depends on the multiset of
    values only, whatever the order the rows reached the node); the result node orders them
    as the query says (an ordered STRING_AGG, `dpcomm.queries.analyst`).
    """

    counts: IntArray
    values: npt.NDArray[Any]

    def take(self, groups: IntArray) -> ListPartial:
        """The state of ``groups`` (indices), in that order."""
        return ListPartial(self.counts[groups], self.values[groups])


def _value_lists(values: Sequence[object], owners: IntArray, count: int) -> npt.NDArray[Any]:
    """Per group (0..count-1), the tuple of its ``values`` in canonical order.

    ``owners[i]`` is the group of value i.
    """
    grouped: list[list[object]] = [[] for _ in range(count)]
    for value, owner in zip(values, owners.tolist(), strict=True):
        grouped[owner].append(value)
    lists = np.empty(count, dtype=object)
    lists[:] = [tuple(sorted(g, key=lambda v: key_order((v,)))) for g in grouped]
    return lists


PartialState = CountPartial | SumPartial | FloatSumPartial | ExtremePartial | ListPartial


@dataclass(frozen=True, eq=False)
class GroupPartials:
    """The mergeable partial result of one grouping set over some rows: one entry per group.

    [`grouping_set_partials`][] computes it from rows, [`merge_partials`][] merges the
    partials of disjoint sets of rows (associative and commutative), [`finalize_partials`][]
    gives the result rows: the same rows, bit for bit, whatever the split of the rows into
    parts and the order of the parts. Picklable (numpy arrays, Python values).

    Attributes:
        set_index: the grouping set.
        keys: each group's key (Python values of the set's columns, NULL as None), in key
            order ([`key_order`][], NULLs last).
        representatives: int64, each group's smallest row index in the table its rows came
            from (over merged parts: the smallest of the parts'); −1 for the group of the empty
            grouping set over no rows. Its value gives the key (e.g. 0.0 or -0.0).
        states: per output of the query, its partial state (None for a grouping column);
            outputs reading the same column the same way share one state.
    """

    set_index: int
    keys: tuple[tuple[object, ...], ...]
    representatives: IntArray
    states: tuple[PartialState | None, ...]

    @property
    def num_groups(self) -> int:
        """Number of groups."""
        return len(self.keys)

    def take(self, groups: npt.ArrayLike) -> GroupPartials:
        """The partials of ``groups`` (indices), in that order (ascending keeps key order)."""
        indices = np.asarray(groups, dtype=np.int64).reshape(-1)
        taken: dict[int, PartialState] = {}
        states: list[PartialState | None] = []
        for state in self.states:
            if state is not None and id(state) not in taken:
                taken[id(state)] = state.take(indices)
            states.append(None if state is None else taken[id(state)])
        return GroupPartials(
            self.set_index,
            tuple(self.keys[i] for i in indices.tolist()),
            self.representatives[indices],
            tuple(states),
        )

    def split(self, owners: npt.ArrayLike, labels: Sequence[int]) -> dict[int, GroupPartials]:
        """The partials of the groups of each of ``labels``: those g with ``owners[g]`` = it."""
        owner_of = np.asarray(owners, dtype=np.int64).reshape(-1)
        if len(owner_of) != self.num_groups:
            raise InvalidParameterError("owners", f"one per group ({self.num_groups})", owners)
        order = np.argsort(owner_of, kind="stable")
        ordered = owner_of[order]
        result: dict[int, GroupPartials] = {}
        for label in labels:
            start = int(np.searchsorted(ordered, int(label), side="left"))
            stop = int(np.searchsorted(ordered, int(label), side="right"))
            result[int(label)] = self.take(order[start:stop])
        return result


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

    def partials(self, set_index: int, rows: npt.ArrayLike) -> GroupPartials:
        """The partials of grouping set ``set_index`` over the rows where ``rows`` is True."""
        bound = self.bound
        if not 0 <= set_index < bound.num_grouping_sets:
            raise InvalidParameterError("set_index", f"0..{bound.num_grouping_sets - 1}", set_index)
        columns = bound.grouping_sets[set_index]
        selected = _selected(rows, self.table.num_rows, f"mask of grouping set {set_index}")
        if bound.filter_column is not None:
            selected = selected[passes_filter(bound, self.table)[selected]]
        groups = _group([self.codes(c) for c in columns], selected, keep_empty=not columns)
        key_columns = [_key_values(self.table.column(c), groups) for c in columns]
        keys: tuple[tuple[object, ...], ...] = (
            tuple(zip(*key_columns, strict=True)) if columns else ((),) * groups.num_groups
        )
        cache: dict[tuple[str, str], PartialState] = {}
        gathered: dict[str, _Gathered] = {}
        states: list[PartialState | None] = []
        for output in bound.outputs:
            if output.kind == "group":
                states.append(None)
                continue
            function = output.function or ""
            key = ((output.column or "").lower(), _MEASURES.get(function, function))
            if key not in cache:
                cache[key] = self._state(key[1], output.column, groups, gathered)
            states.append(cache[key])
        return GroupPartials(set_index, keys, groups.representatives, tuple(states))

    def _state(
        self, measure: str, column: str | None, groups: _Groups, gathered: dict[str, _Gathered]
    ) -> PartialState:
        """The partial state of one measure (COUNT(*), COUNT, SUM/AVG, MIN, MAX) per group."""
        if measure == "count_star":
            return CountPartial(groups.sizes)
        if measure not in ("count", "sum", "min", "max", "list"):
            raise InvalidParameterError("function", "count, sum, avg, min, max or list", measure)
        data = self.table.column(column or "")
        if measure == "list":
            return _list_state(data, groups)
        if measure == "sum" and data.values.dtype.kind == "f":
            # Exact sums need neither the values sorted by group nor any order.
            values, nulls = data.values, data.is_null
            ids = groups.group_of_selected
            if len(groups.selected) != len(values):
                values, nulls = values[groups.selected], nulls[groups.selected]
            if nulls.any():
                values, ids = values[~nulls], ids[~nulls]
            return FloatSumPartial(exact_sums(values, ids, groups.num_groups))
        key = data.name.lower()
        if measure == "count" and key not in gathered:
            nulls = data.is_null[groups.selected]
            present = groups.group_of_selected[~nulls] if nulls.any() else groups.group_of_selected
            return CountPartial(np.bincount(present, minlength=groups.num_groups).astype(np.int64))
        if key not in gathered:
            gathered[key] = _gather(data, groups)
        counts, starts, values = gathered[key]
        if measure == "count":
            return CountPartial(counts)
        has = counts > 0
        if measure == "sum":
            return SumPartial(counts, _scatter(_sums(values, starts[has]), has))
        extremes = _extremes(values, starts[has], measure)
        return ExtremePartial(measure, counts, _scatter(extremes, has))


_Gathered = tuple[IntArray, IntArray, npt.NDArray[Any]]


def _list_state(data: Column, groups: _Groups) -> ListPartial:
    """Each group's non-NULL values of ``data`` (the core query's LIST)."""
    present = ~data.is_null[groups.selected]
    owners = groups.group_of_selected[present]
    found = _python_values(data.take(groups.selected[present]))
    return ListPartial(
        np.bincount(owners, minlength=groups.num_groups).astype(np.int64),
        _value_lists(found, owners, groups.num_groups),
    )


def _gather(data: Column, groups: _Groups) -> _Gathered:
    """Non-NULL count per group, segment starts and the non-NULL values sorted by group."""
    nonnull = ~data.is_null[groups.rows]
    group_of = groups.group_of_sorted[nonnull]
    counts = np.bincount(group_of, minlength=groups.num_groups)
    starts = np.zeros(groups.num_groups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    values = data.values[groups.rows[nonnull]]
    return counts.astype(np.int64), starts, values


def _scatter(reduced: npt.NDArray[Any], has: BoolArray) -> npt.NDArray[Any]:
    """``reduced`` (one value per True of ``has``) spread over every group (0 elsewhere)."""
    result = np.zeros(len(has), dtype=reduced.dtype)
    result[has] = reduced
    return result


def _sums(values: npt.NDArray[Any], starts: IntArray) -> npt.NDArray[Any]:
    """Exact per-segment sums of integers or DECIMALs (int64, or Python objects).

    Integers are summed in int64 unless that could overflow, then as Python ints. Object
    arrays (integers beyond int64, DECIMAL values) are summed exactly: Decimal sums in a
    context wide enough for any sum, which raises rather than round.
    """
    if len(starts) == 0:
        return np.zeros(0, dtype=values.dtype if values.dtype.kind == "O" else np.int64)
    if values.dtype.kind == "O":
        with decimal.localcontext() as context:
            context.prec = _DECIMAL_DIGITS
            context.Emax = decimal.MAX_EMAX
            context.Emin = decimal.MIN_EMIN
            context.traps[decimal.Inexact] = True
            summed: npt.NDArray[Any] = np.add.reduceat(values, starts)
            return summed
    if values.dtype.kind not in "iu":
        raise InvalidParameterError("values", "integers or DECIMAL values", values.dtype)
    largest = max(abs(int(values.min())), abs(int(values.max())))
    if largest * len(values) < (1 << 63) - 1:
        exact: npt.NDArray[Any] = np.add.reduceat(values.astype(np.int64), starts)
        return exact
    wide = np.empty(len(values), dtype=object)
    wide[:] = values.tolist()
    reduced: npt.NDArray[Any] = np.add.reduceat(wide, starts)
    return reduced


def _extremes(values: npt.NDArray[Any], starts: IntArray, function: str) -> npt.NDArray[Any]:
    """Per-segment MIN or MAX; floats in DuckDB's order, canonical whatever the values' order.

    NaN is above every value (DuckDB's order): MIN skips NaNs unless every value is NaN, MAX
    is NaN as soon as one value is; a NaN result is the canonical NaN; a zero result is -0.0
    for MIN (+0.0 for MAX) iff the segment has one.
    """
    if len(starts) == 0:
        return values[:0]
    floating = values.dtype.kind == "f"
    if function == "min":
        reduced: npt.NDArray[Any] = (np.fmin if floating else np.minimum).reduceat(values, starts)
    else:
        reduced = np.maximum.reduceat(values, starts)
    if floating:
        reduced[np.isnan(reduced)] = np.nan
        zero = reduced == 0
        if zero.any():
            wanted = values == 0
            wanted &= np.signbit(values) if function == "min" else ~np.signbit(values)
            found = np.logical_or.reduceat(wanted, starts)
            preferred, other = (-0.0, 0.0) if function == "min" else (0.0, -0.0)
            reduced[zero] = np.where(found[zero], preferred, other)
    return reduced


def passes_filter(bound: BoundAggregate, table: Table) -> BoolArray:
    """Which rows pass the query's WHERE (every row without one); NULL does not pass."""
    if bound.filter_column is None:
        return np.ones(table.num_rows, dtype=bool)
    column = table.column(bound.filter_column)
    passed: BoolArray = column.values.astype(bool) & ~column.is_null
    return passed


def _key_values(column: Column, groups: _Groups) -> list[object]:
    if groups.num_groups == 0:
        return []
    return _python_values(column.take(groups.representatives))


class _NanKey:
    """Stands for a NaN key value when merging groups (NaN is one group, as in DuckDB)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


_NAN_KEY = _NanKey()


def _canonical_key(key: tuple[object, ...]) -> tuple[object, ...]:
    """``key`` with NaN values replaced by one marker (NaN != NaN, but is one group)."""
    return tuple(_NAN_KEY if isinstance(v, float) and math.isnan(v) else v for v in key)


def merge_partials(parts: Sequence[GroupPartials]) -> GroupPartials:
    """The partials of the union of the rows of ``parts`` (disjoint sets of rows).

    Groups with equal keys (NULL equal to NULL, NaN to NaN, 0.0 to -0.0) become one; its key
    and representative are those of the part with the smallest representative. Associative
    and commutative: [`finalize_partials`][] of the result does not depend on how the rows
    were split nor on the order of ``parts``.
    """
    if not parts:
        raise InvalidParameterError("parts", "at least one GroupPartials", parts)
    first = parts[0]
    for part in parts[1:]:
        if part.set_index != first.set_index or len(part.states) != len(first.states):
            raise InvalidParameterError(
                "parts", f"partials of grouping set {first.set_index}", part.set_index
            )
    if len(parts) == 1:
        return first
    index: dict[tuple[object, ...], int] = {}
    maps: list[IntArray] = []
    for part in parts:
        maps.append(
            np.fromiter(
                (index.setdefault(_canonical_key(k), len(index)) for k in part.keys),
                dtype=np.int64,
                count=part.num_groups,
            )
        )
    count = len(index)
    every_key = [key for part in parts for key in part.keys]
    ids = np.concatenate(maps)
    representatives = np.concatenate([p.representatives for p in parts])
    ranked = np.where(representatives < 0, np.iinfo(np.int64).max, representatives)
    order = np.lexsort((ranked, ids))
    chosen = order[np.r_[True, ids[order][1:] != ids[order][:-1]]] if len(order) else order
    keys = [every_key[i] for i in chosen.tolist()]
    ranking = sorted(range(count), key=lambda g: key_order(keys[g]))
    position = np.empty(count, dtype=np.int64)
    position[ranking] = np.arange(count, dtype=np.int64)
    maps = [position[m] for m in maps]
    merged: dict[int, PartialState] = {}
    states: list[PartialState | None] = []
    for number, state in enumerate(first.states):
        if state is None:
            states.append(None)
            continue
        if id(state) not in merged:
            merged[id(state)] = _merge_states([p.states[number] for p in parts], maps, count)
        states.append(merged[id(state)])
    return GroupPartials(
        first.set_index,
        tuple(keys[g] for g in ranking),
        representatives[chosen][ranking],
        tuple(states),
    )


def _merge_states(
    states: Sequence[PartialState | None], maps: Sequence[IntArray], count: int
) -> PartialState:
    """One output's states of the parts merged (groups of part i mapped by ``maps[i]``)."""
    kinds = {type(s) for s in states}
    if len(kinds) != 1 or None in kinds:
        raise InvalidParameterError("parts", "partials of the same query", kinds)
    if isinstance(states[0], FloatSumPartial):
        float_states = [s for s in states if isinstance(s, FloatSumPartial)]
        return FloatSumPartial(merge_exact_sums([s.sums for s in float_states], maps, count))
    counts = np.zeros(count, dtype=np.int64)
    for state, mapping in zip(states, maps, strict=True):
        assert state is not None
        np.add.at(counts, mapping, state.counts)
    if isinstance(states[0], CountPartial):
        return CountPartial(counts)
    if isinstance(states[0], ListPartial):
        lists = [s for s in states if isinstance(s, ListPartial)]
        owners = np.concatenate(
            [np.repeat(m, [len(v) for v in s.values]) for s, m in zip(lists, maps, strict=True)]
        ).astype(np.int64)
        every = [value for s in lists for group in s.values for value in group]
        return ListPartial(counts, _value_lists(every, owners, count))
    # Sums and extremes: the parts' values of each merged group, reduced like rows.
    ids: list[IntArray] = []
    values: list[npt.NDArray[Any]] = []
    for state, mapping in zip(states, maps, strict=True):
        assert isinstance(state, SumPartial | ExtremePartial)
        has = state.counts > 0
        if has.any():
            ids.append(mapping[has])
            values.append(state.sums[has] if isinstance(state, SumPartial) else state.values[has])
    has = counts > 0
    first = states[0]
    if not ids:
        empty = first.sums if isinstance(first, SumPartial) else first.values  # type: ignore[union-attr]
        reduced = empty[:0]
    else:
        owners = np.concatenate(ids)
        order = np.argsort(owners, kind="stable")
        ordered = owners[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]).astype(np.int64)
        joined = np.concatenate(values)[order]
        if isinstance(first, SumPartial):
            reduced = _sums(joined, starts)
        else:
            assert isinstance(first, ExtremePartial)
            reduced = _extremes(joined, starts, first.function)
    if isinstance(first, SumPartial):
        return SumPartial(counts, _scatter(reduced, has))
    assert isinstance(first, ExtremePartial)
    return ExtremePartial(first.function, counts, _scatter(reduced, has))


def finalize_partials(
    bound: BoundAggregate, partials: GroupPartials
) -> tuple[list[Row], list[tuple[object, ...]]]:
    """The result rows of the partials' groups (key order) and each row's key.

    Keys of the set carry their value, the other selected grouping columns are ``None`` (NULL),
    aggregates are Python ``int``/``float``/``Decimal``/``None``.
    """
    columns = bound.grouping_sets[partials.set_index]
    position = {c.lower(): i for i, c in enumerate(columns)}
    count = partials.num_groups
    cache: dict[tuple[int, str, bool], list[object]] = {}
    output_values: list[list[object]] = []
    for output, output_type, state in zip(
        bound.outputs, bound.output_types, partials.states, strict=True
    ):
        if state is None:
            where = position.get((output.column or "").lower())
            output_values.append(
                [None] * count if where is None else [k[where] for k in partials.keys]
            )
            continue
        function = output.function or ""
        key = (id(state), function, output_type == "DOUBLE")
        if key not in cache:
            cache[key] = _final_values(state, function, double=key[2])
        output_values.append(cache[key])
    names = bound.output_names
    rows = [dict(zip(names, row, strict=True)) for row in zip(*output_values, strict=True)]
    return rows, list(partials.keys)


def _final_values(state: PartialState, function: str, *, double: bool) -> list[object]:
    """One aggregate per group from its state; ``double`` when DuckDB's result is a DOUBLE.

    A float SUM is the exact sum rounded once, AVG the exact sum over the count rounded once
    (`dpcomm.queries.exactsum`); a SUM of integers whose DuckDB type is DOUBLE (UHUGEINT)
    is the exact integer sum rounded once.
    """
    if isinstance(state, CountPartial):
        return list(state.counts.tolist())
    if isinstance(state, FloatSumPartial):
        return list(state.sums.means() if function == "avg" else state.sums.sums())
    counts = state.counts.tolist()
    listed: list[Any]
    if isinstance(state, ListPartial):
        listed = [list(values) for values in state.values]
    elif isinstance(state, ExtremePartial):
        listed = state.values.tolist()
    else:
        totals = state.sums.tolist()
        if function == "avg":
            listed = [_mean(s, c) if c else None for s, c in zip(totals, counts, strict=True)]
        elif double:
            listed = [_double(s) if c else None for s, c in zip(totals, counts, strict=True)]
        else:
            listed = totals
    return [v if c else None for v, c in zip(listed, counts, strict=True)]


#: The integers each SQL integer type holds (the types a SUM of integers can have).
_INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
}


def _fits(value: object, sql_type: str) -> bool:
    """Whether an exact integer or DECIMAL ``value`` is a value of ``sql_type``."""
    if value_kind(sql_type) == "decimal":
        precision, scale = decimal_scale(sql_type)
        return abs(Decimal(value)) < Decimal(f"1e{precision - scale}")  # type: ignore[arg-type]
    low, high = _INTEGER_RANGES.get(sql_type.strip().upper(), (-math.inf, math.inf))
    return low <= value <= high  # type: ignore[operator]


def check_sums_fit(bound: BoundAggregate, rows: Sequence[Row]) -> None:
    """InvalidParameterError naming ``sql`` if a SUM does not fit its SQL type.

    Sums are exact here, so a SUM of DECIMAL(38, s) or HUGEINT values can exceed its type
    (10^38, 2^127), where DuckDB refuses the query ("Overflow in HUGEINT addition"): the result
    could be neither a value of its column nor a DataFrame's. A SUM of a DOUBLE column is not
    bounded (its total is rounded; beyond the double range it is ±inf).
    """
    for name, sql_type, output in zip(
        bound.output_names, bound.output_types, bound.outputs, strict=True
    ):
        if output.function != "sum" or value_kind(sql_type) not in ("int", "wideint", "decimal"):
            continue
        if any(row[name] is not None and not _fits(row[name], sql_type) for row in rows):
            raise InvalidParameterError(
                "sql",
                f"sums that fit their type {sql_type}, as DuckDB requires (give column "
                f"{output.column} as DOUBLE for a larger total)",
                f"{name} of a group beyond {sql_type}",
            )


def _double(total: Any) -> float:
    """An exact sum (int or Decimal) rounded once to the nearest double; overflow: ±inf."""
    exact = Fraction(total)
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _mean(total: Any, count: int) -> float:
    """``total / count`` as the float nearest the exact quotient (AVG is DOUBLE in DuckDB)."""
    if isinstance(total, Decimal):
        return float(Fraction(total) / count)
    return float(total / count)


def empty_partials(bound: BoundAggregate, set_index: int) -> GroupPartials:
    """The partials of grouping set ``set_index`` over no rows.

    What [`grouping_set_partials`][] gives for a table without rows: no group, except the
    one group of the empty grouping set (representative −1).
    """
    columns = []
    for name, sql_type in bound.schema:
        dtype = _EMPTY_DTYPES.get(value_kind(sql_type) or "", object)
        columns.append(Column(name, sql_type, np.zeros(0, dtype=dtype), np.zeros(0, dtype=bool)))
    table = Table(bound.table_name, tuple(columns))
    return _Evaluator(bound, table, check=False).partials(set_index, np.zeros(0, dtype=bool))


#: How `empty_partials` holds the values of each kind of column (as tables do).
_EMPTY_DTYPES: dict[str, Any] = {
    "int": np.int64,
    "wideint": np.int64,
    "float": np.float64,
    "bool": np.bool_,
    "date": "datetime64[D]",
    "timestamp": "datetime64[us]",
}


def grouping_set_partials(
    bound: BoundAggregate, table: Table, set_index: int, selected: npt.ArrayLike
) -> GroupPartials:
    """The mergeable partials of grouping set ``set_index`` over the rows where ``selected``.

    ``table`` needs only the columns the grouping set reads (what a compute node receives).
    Partials of disjoint masks (or of the partitions of a table), merged in any order with
    [`merge_partials`][], finalize to exactly the rows of the whole.
    """
    needed = {c.lower() for c in bound.carried_columns(set_index)}
    bound.check_table(table, columns=needed)
    return _Evaluator(bound, table, check=False).partials(set_index, selected)


def evaluate_grouping_set(
    bound: BoundAggregate, table: Table, set_index: int, rows: npt.ArrayLike
) -> list[Row]:
    """The result rows of grouping set ``set_index`` over the rows where ``rows`` is True.

    Keys of the set carry their value, the other selected grouping columns are ``None`` (NULL),
    aggregates are Python ``int``/``float``/``None``. Rows are in key order, NULLs last.
    """
    return finalize_partials(bound, _Evaluator(bound, table).partials(set_index, rows))[0]


def key_order(key: Sequence[object]) -> tuple[tuple[bool, bool, object], ...]:
    """A sort key giving grouping keys the order of [`evaluate`][] (NULLs last, NaN before)."""
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
    grouping-set order, then key order with NULLs last. Float SUM and AVG are exact sums
    rounded once (`dpcomm.queries.exactsum`): the same bits however the rows are split.
    """
    from dpcomm.queries.postprocess import finish

    _check_masks(bound, masks)
    evaluator = _Evaluator(bound, table)
    per_set = [
        finalize_partials(bound, evaluator.partials(set_index, mask))[0]
        for set_index, mask in enumerate(masks)
    ]
    check_sums_fit(bound, [row for rows in per_set for row in rows])
    return finish(bound, per_set)


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
    Kept for the last queries asked (rewriting the SQL takes milliseconds; a reference result
    asks for each grouping set, and is asked again for each set of masks).
    """
    return _grouping_set_sql(
        bound.sql, bound.grouping_sets[set_index], bound.grouping_columns, bound.output_names
    )


@functools.lru_cache(maxsize=256)
def _grouping_set_sql(
    sql: str, columns: tuple[str, ...], everything: tuple[str, ...], output_names: tuple[str, ...]
) -> str:
    import sqlglot
    from sqlglot import exp

    select = sqlglot.parse_one(sql, read="duckdb")
    if not isinstance(select, exp.Select):
        raise InvalidParameterError("sql", "a SELECT", sql)

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
    for item, name in zip(select.expressions, output_names, strict=True):
        inner = item.this if isinstance(item, exp.Alias) else item
        items.append(exp.alias_(inner.copy(), name, quoted=True))
    select.set("expressions", items)
    return select.sql(dialect="duckdb")


def reference_result(
    bound: BoundAggregate, table: Table, masks: Sequence[npt.ArrayLike]
) -> list[Row]:
    """The result of [`evaluate`][], computed by DuckDB (for tests and audits).

    For each grouping set g, the rows where ``masks[g]`` is True are registered under the FROM
    name and [`grouping_set_sql`][] is run on them; rows are concatenated in grouping-set order.
    """
    from dpcomm.queries.postprocess import finish
    from dpcomm.queries.sql import scratch_connection

    _check_masks(bound, masks)
    bound.check_table(table)
    per_set: list[list[Row]] = []
    names = bound.output_names
    passes = passes_filter(bound, table)
    with scratch_connection() as connection:
        for set_index, mask in enumerate(masks):
            selected = _selected(mask, table.num_rows, f"mask of grouping set {set_index}")
            table.take(selected[passes[selected]]).register(connection, bound.table_name)
            fetched = connection.execute(grouping_set_sql(bound, set_index)).fetchall()
            per_set.append([dict(zip(names, row, strict=True)) for row in fetched])
    return finish(bound, per_set)


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
