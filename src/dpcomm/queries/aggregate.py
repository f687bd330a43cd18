"""Aggregate (SQL GROUP BY over grouping sets) as a decentralized execution plan (Section 2.1).

Each grouping set is one vertical partition (one sub-query q = (G_q, V_q, F_q)); its grouping
domain is split among T compute nodes by a public, data-independent function of the key
(:func:`dpcomm.queries.groupby.partition_keys`). Every source holds one row and sends, for each
grouping set, the values it needs to the compute node of its key: one data-dependent message
per grouping set, so a source is split into G logical simple nodes. The compute nodes
aggregate the real tuples they receive and send their part of the result to the result node.
An empty grouping set (the grand total of ROLLUP/CUBE) has a single compute node: its
communication does not depend on the data.

:class:`AggregateProgram` supplies the hooks of :class:`dpcomm.protocol.roles.ProgramHooks`:
every engine runs it through the same role steps.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from dpcomm.accounting._validation import check_int
from dpcomm.data.table import Table, value_kind
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.builders import aggregate_plan
from dpcomm.plan.model import ExecutionPlan
from dpcomm.queries.codec import (
    MAX_STRING_BYTES,
    CodecError,
    ColumnSpec,
    TableCodec,
    dumps,
    from_hex,
    loads,
)
from dpcomm.queries.groupby import (
    GroupPartials,
    empty_partials,
    evaluate,
    finalize_partials,
    group_ids,
    grouping_set_partials,
    key_order,
    merge_partials,
    partition_keys,
)
from dpcomm.queries.program import IntArray, Row
from dpcomm.queries.query import BoundAggregate

#: Bytes of one value in a message, for the plan's message sizes (every value travels as 8).
VALUE_BYTES = 8
#: Default T, the compute nodes (targets) of every grouping set (Table 1 of the paper).
DEFAULT_NUM_TARGETS = 20
#: Default public bound on the UTF-8 bytes of one text value (``max_text_bytes``).
DEFAULT_TEXT_BYTES = 255
#: Largest accepted bound on the groups of one output (``max_groups``).
MAX_OUTPUT_GROUPS = 10_000_000
#: Bytes of a text field besides its value: the NULL flag and the 2-byte length.
TEXT_FIELD_OVERHEAD = 3
#: Length of one value of an output row (after its 1-byte tag).
_VALUE_HEADER = struct.Struct(">H")
_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")
#: Bytes of tagged JSON any non-text value of an output row takes at most.
_SCALAR_JSON_BYTES = 64
#: An output blob starts with: its groups, an overflow flag, its longest row (bytes).
_OUTPUT_HEADER = struct.Struct(">IBI")
_ROW_LENGTH = struct.Struct(">I")


def _value_bound(sql_type: str, width: int) -> int:
    """Bytes :func:`_encode_value` takes at most for a value of ``sql_type``.

    ``width`` is a text column's encoded width.
    """
    kind = value_kind(sql_type)
    if kind in ("int", "float"):
        return 1 + _INT64.size
    if kind == "text":
        return max(width, _VALUE_HEADER.size + 1)
    return 1 + _VALUE_HEADER.size + _SCALAR_JSON_BYTES


def _encode_value(value: object) -> bytes:
    """One value of an output row.

    ``N`` (NULL); ``I`` + int64 or ``F`` + float64 (8 bytes, exact); ``S`` + a 2-byte length +
    UTF-8 text; ``J`` + a 2-byte length + tagged JSON (:func:`dumps`) for anything else.
    """
    if value is None:
        return b"N"
    if isinstance(value, bool | np.bool_):
        data, tag = dumps(bool(value)), b"J"
    elif isinstance(value, int | np.integer) and -(2**63) <= int(value) < 2**63:
        return b"I" + _INT64.pack(int(value))
    elif isinstance(value, float | np.floating):
        return b"F" + _FLOAT64.pack(float(value))
    elif isinstance(value, str):
        data, tag = value.encode("utf-8"), b"S"
    else:
        data, tag = dumps(value), b"J"
    # A value longer than 65,535 bytes is longer than any bound: its row overflows (and the
    # output says so) before anything would read the clipped length.
    return tag + _VALUE_HEADER.pack(min(len(data), 0xFFFF)) + data


def _decode_values(data: bytes) -> list[object]:
    """Inverse of a row of :func:`_encode_value`; CodecError if malformed."""
    values: list[object] = []
    offset = 0
    while offset < len(data):
        tag = data[offset : offset + 1]
        if tag == b"N":
            values.append(None)
            offset += 1
            continue
        if tag in (b"I", b"F"):
            if offset + 1 + _INT64.size > len(data):
                raise CodecError("an output number cut short")
            codec = _INT64 if tag == b"I" else _FLOAT64
            values.append(codec.unpack_from(data, offset + 1)[0])
            offset += 1 + _INT64.size
            continue
        if tag not in (b"S", b"J") or offset + 1 + _VALUE_HEADER.size > len(data):
            raise CodecError(f"an output value with tag {tag!r}")
        (length,) = _VALUE_HEADER.unpack_from(data, offset + 1)
        start = offset + 1 + _VALUE_HEADER.size
        body = data[start : start + length]
        if len(body) != length:
            raise CodecError("an output value longer than its row")
        if tag == b"S":
            try:
                values.append(body.decode("utf-8"))
            except UnicodeDecodeError as error:
                raise CodecError(f"an output text value: {error}") from error
        else:
            values.append(loads(body))
        offset = start + length
    return values


def _public_width(spec: ColumnSpec, text_bytes: int) -> ColumnSpec:
    """``spec`` with a text field ``text_bytes`` wide (public), if every value fits."""
    if value_kind(spec.sql_type) != "text":
        return spec
    longest = spec.width - TEXT_FIELD_OVERHEAD
    if longest > text_bytes:
        raise InvalidParameterError(
            f"column {spec.name}",
            f"text values of at most {text_bytes:,} bytes of UTF-8 (raise max_text_bytes)",
            f"a value of {longest:,} bytes",
        )
    return replace(spec, width=TEXT_FIELD_OVERHEAD + text_bytes)


class OutputOverflowError(DpcommError):
    """A compute node held more groups (or a longer row) than the public output bound."""

    def __init__(self, flow: str, count: int, longest: int, *, groups: int, row: int) -> None:
        if count > groups:
            what = f"{count:,} groups, more than the public bound of {groups:,} (max_groups)"
        else:
            what = f"a result row of {longest:,} bytes, more than the bound of {row:,}"
        super().__init__(
            f"grouping set {flow}: a compute node had {what}; its output was withheld "
            "(outputs have one public size, so that their length does not depend on the data)"
        )


def grouping_set_label(columns: tuple[str, ...]) -> str:
    """``(A, B)`` for a grouping set, ``()`` for the empty one."""
    return "(" + ", ".join(columns) + ")"


@dataclass(frozen=True)
class AggregateOutput:
    """What one compute node sends to the result node: its groups' keys and result rows.

    Attributes:
        keys: each row's grouping key (the values of the grouping set's columns).
        rows: the result rows of the compute node's groups, in key order.
    """

    keys: tuple[tuple[object, ...], ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class AggregateState:
    """The compute nodes' outputs merged so far, by (flow, compute node)."""

    outputs: tuple[tuple[tuple[str, int], AggregateOutput], ...] = ()

    def as_dict(self) -> dict[tuple[str, int], AggregateOutput]:
        """The outputs by (flow, compute node)."""
        return dict(self.outputs)


@dataclass(frozen=True, eq=False)
class AggregateProgram:
    """An Aggregate query compiled to a plan, with the sources' rows (or none on a node).

    Attributes:
        query: the bound query.
        table: the sources' rows, one per source node; None where a node holds no data.
        num_targets: T, the targets (compute nodes) of every non-empty grouping set (the
            empty set has one).
        columns: how each column of the query travels (from the table's schema).
        num_sources: S (the table's rows when the table is given).
        max_groups: the public bound on the groups of one compute node's output (None: S,
            which no table can exceed); every output is padded to this many groups.
        max_text_bytes: the public bound on the UTF-8 bytes of a text value; every text
            field of a payload is this wide, whatever the table's longest value (a width
            taken from the data would tell neighbouring tables apart by the frame size).
    """

    query: BoundAggregate
    table: Table | None
    num_targets: int = DEFAULT_NUM_TARGETS
    columns: tuple[ColumnSpec, ...] = ()
    num_sources: int = 0
    max_groups: int | None = None
    max_text_bytes: int = DEFAULT_TEXT_BYTES
    _routes: dict[str, IntArray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_int("num_targets", self.num_targets, minimum=1)
        check_int("max_text_bytes", self.max_text_bytes, minimum=1, maximum=MAX_STRING_BYTES)
        if self.table is not None:
            if self.table.num_rows == 0:
                raise InvalidParameterError(
                    "data", "a table with at least one row", "an empty table"
                )
            self.query.check_table(self.table)
            object.__setattr__(self, "num_sources", self.table.num_rows)
            if not self.columns:
                needed = {c.lower() for c in self.query.grouping_columns} | {
                    o.column.lower() for o in self.query.outputs if o.column
                }
                check_int(
                    "max_text_bytes", self.max_text_bytes, minimum=1, maximum=MAX_STRING_BYTES
                )
                specs = tuple(
                    _public_width(ColumnSpec.of(c), self.max_text_bytes)
                    for c in self.table.columns
                    if c.name.lower() in needed
                )
                object.__setattr__(self, "columns", specs)
        check_int("num_sources", self.num_sources, minimum=1)
        if self.max_groups is not None:
            check_int("max_groups", self.max_groups, minimum=1, maximum=MAX_OUTPUT_GROUPS)

    @classmethod
    def from_sql(
        cls,
        sql: str,
        table: Table,
        *,
        num_targets: int = DEFAULT_NUM_TARGETS,
        max_groups: int | None = None,
        max_text_bytes: int = DEFAULT_TEXT_BYTES,
    ) -> AggregateProgram:
        """Parse ``sql``, bind it to ``table`` (renamed to the FROM table) and compile it."""
        from dpcomm.queries.sql import bind_sql

        bound = bind_sql(sql, table)
        return cls(
            bound,
            table.renamed(bound.table_name),
            num_targets,
            max_groups=max_groups,
            max_text_bytes=max_text_bytes,
        )

    @classmethod
    def from_row_source(
        cls,
        sql: str,
        source: Any,
        *,
        num_targets: int = DEFAULT_NUM_TARGETS,
        max_groups: int | None = None,
        max_text_bytes: int = DEFAULT_TEXT_BYTES,
    ) -> AggregateProgram:
        """The program of ``sql`` over a row source's rows, without reading them.

        ``source`` is a :class:`~dpcomm.data.partitioned.RowSource` (Parquet files, synthetic
        rows): the query is bound to its schema and S is its number of rows; an engine reads
        the rows partition by partition and checks each (:meth:`check_rows`).
        """
        schema = source.schema()
        with_schema = cls.from_sql(
            sql,
            schema,
            num_targets=num_targets,
            max_groups=max_groups,
            max_text_bytes=max_text_bytes,
        )
        return cls(
            with_schema.query,
            None,
            num_targets,
            with_schema.columns,
            int(source.num_rows),
            max_groups,
            max_text_bytes,
        )

    def check_rows(self, rows: Table) -> None:
        """InvalidParameterError unless ``rows`` (a part of the sources' rows) fit the program.

        What the constructor checks of a whole table: the bound schema, and text values of
        at most ``max_text_bytes`` bytes.
        """
        needed = {c.name.lower() for c in self.columns}
        self.query.check_table(rows, columns=needed)
        for column in rows.columns:
            if column.name.lower() in needed:
                _public_width(ColumnSpec.of(column), self.max_text_bytes)

    # ------------------------------------------------------------------ public description

    def public(self) -> AggregateProgram:
        """The same program without the rows (what every node may know)."""
        return AggregateProgram(
            self.query,
            None,
            self.num_targets,
            self.columns,
            self.num_sources,
            self.max_groups,
            self.max_text_bytes,
        )

    def to_spec(self) -> dict[str, Any]:
        """The public description, JSON-ready (a node rebuilds the program from it)."""
        return {
            "kind": "aggregate",
            "query": self.query.to_dict(),
            "num_targets": self.num_targets,
            "columns": [c.to_dict() for c in self.columns],
            "num_sources": self.num_sources,
            "max_groups": self.max_groups,
            "max_text_bytes": self.max_text_bytes,
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> AggregateProgram:
        """Inverse of :meth:`to_spec` (without rows)."""
        return cls(
            BoundAggregate.from_dict(spec["query"]),
            None,
            int(spec["num_targets"]),
            tuple(ColumnSpec.from_dict(c) for c in spec["columns"]),
            int(spec["num_sources"]),
            None if spec.get("max_groups") is None else int(spec["max_groups"]),
            int(spec.get("max_text_bytes", DEFAULT_TEXT_BYTES)),
        )

    @property
    def name(self) -> str:
        """Short description for reports."""
        sets = ", ".join(grouping_set_label(s) for s in self.query.grouping_sets)
        return f"Aggregate over grouping sets {sets}, T={self.num_targets}"

    @cached_property
    def flow_names(self) -> tuple[str, ...]:
        """One flow per grouping set, labelled by its columns (numbered if repeated)."""
        labels = [grouping_set_label(s) for s in self.query.grouping_sets]
        names = []
        for index, label in enumerate(labels):
            names.append(label if labels.count(label) == 1 else f"{label}#{index + 1}")
        return tuple(names)

    def set_index(self, flow: str) -> int:
        """The grouping set sent on ``flow``."""
        try:
            return self.flow_names.index(flow)
        except ValueError:
            raise InvalidParameterError(
                "flow", f"one of {', '.join(self.flow_names)}", flow
            ) from None

    def targets_of(self, index: int) -> int:
        """T of grouping set ``index``: its compute nodes (1 for the empty set)."""
        return self.num_targets if self.query.grouping_sets[index] else 1

    @cached_property
    def message_bytes(self) -> int:
        """Payload of a source message: the grouping values and the aggregated columns."""
        widest = max(
            len(self.query.carried_columns(i)) for i in range(self.query.num_grouping_sets)
        )
        return VALUE_BYTES * max(1, widest)

    @cached_property
    def plan(self) -> ExecutionPlan:
        """Sources, one group of compute nodes per grouping set, and the result node."""
        return aggregate_plan(
            num_sources=self.num_sources,
            flows=self.flow_names,
            compute_nodes=[self.targets_of(i) for i in range(len(self.flow_names))],
            message_bytes=self.message_bytes,
        )

    @property
    def num_stages(self) -> int:
        """A single stage: every grouping set is sent at once."""
        return 1

    def stage_flows(self, stage: int) -> tuple[str, ...]:
        """Every grouping set's flow."""
        return self.flow_names

    def initial_state(self) -> AggregateState:
        """Nothing merged yet."""
        return AggregateState()

    # ------------------------------------------------------------------ hooks

    def route(self, state: AggregateState, flow: str, rows: Table) -> IntArray:
        """The compute node of each row's key for the grouping set of ``flow``.

        The partition of keys is public and computed by each source from its own row
        (:func:`dpcomm.queries.groupby.partition_keys`).
        """
        if rows is self.table and flow in self._routes:
            return self._routes[flow]
        index = self.set_index(flow)
        columns = self.query.grouping_sets[index]
        if not columns:
            targets = np.zeros(rows.num_rows, dtype=np.int64)
        else:
            ids, keys = group_ids(rows, columns, np.ones(rows.num_rows, dtype=bool))
            nodes = partition_keys(keys, self.targets_of(index))
            targets = np.asarray(nodes, dtype=np.int64)[ids]
        if rows is self.table:
            self._routes[flow] = targets
        return targets

    def carried(self, flow: str, rows: Table) -> Table:
        """The grouping set's columns and the aggregated columns of ``rows``."""
        return rows.select(self.query.carried_columns(self.set_index(flow)))

    def target_outputs(
        self,
        state: AggregateState,
        stage: int,
        flow: str,
        tuples: Table,
        tuple_targets: IntArray,
        targets: Sequence[int],
    ) -> dict[int, AggregateOutput]:
        """Each compute node's groups and result rows over the real tuples it received.

        :meth:`combine_partials` of the one :meth:`target_partials` of every tuple.
        """
        partials = self.target_partials(state, stage, flow, tuples, tuple_targets, targets)
        return self.combine_partials(state, stage, flow, [partials], targets)

    def target_partials(
        self,
        state: AggregateState,
        stage: int,
        flow: str,
        tuples: Table,
        tuple_targets: IntArray,
        targets: Sequence[int],
    ) -> dict[int, GroupPartials]:
        """Each compute node's mergeable partials over some of its real tuples.

        Every group lies on one compute node (its key's, the target of any of its tuples),
        so one group-by over the tuples of all the ``targets``, split by node, gives each
        node's own partials. A node's partials are a
        :class:`~dpcomm.queries.groupby.GroupPartials` (picklable).
        """
        index = self.set_index(flow)
        selected = np.ones(tuples.num_rows, dtype=bool)
        partials = grouping_set_partials(self.query, tuples, index, selected)
        owners = np.asarray(tuple_targets, dtype=np.int64)
        representatives = partials.representatives
        # The empty grouping set's group over no tuples (representative −1) is node 0's.
        group_owners = np.zeros(partials.num_groups, dtype=np.int64)
        real = representatives >= 0
        group_owners[real] = owners[representatives[real]]
        return partials.split(group_owners, [int(t) for t in targets])

    def combine_partials(
        self,
        state: AggregateState,
        stage: int,
        flow: str,
        partials: Sequence[Mapping[int, Any]],
        targets: Sequence[int],
    ) -> dict[int, AggregateOutput]:
        """Each compute node's output from its partials over disjoint sets of its tuples.

        Equal to :meth:`target_outputs` over the union of the sets, whatever the split and
        the order of ``partials`` (:func:`~dpcomm.queries.groupby.merge_partials`).
        """
        index = self.set_index(flow)
        outputs: dict[int, AggregateOutput] = {}
        for target in targets:
            node = int(target)
            parts = [part[node] for part in partials if node in part]
            if parts:
                merged = merge_partials(parts)
            else:
                merged = empty_partials(self.query, index)
                if node != 0:
                    merged = merged.take([])
            rows, keys = finalize_partials(self.query, merged)
            outputs[node] = AggregateOutput(tuple(keys), tuple(rows))
        return outputs

    def merge(
        self,
        state: AggregateState,
        stage: int,
        outputs: Mapping[tuple[str, int], AggregateOutput],
    ) -> AggregateState:
        """The state with these compute nodes' outputs (replacing any earlier ones)."""
        merged = state.as_dict()
        merged.update(outputs)
        return AggregateState(tuple(sorted(merged.items(), key=lambda item: item[0])))

    def result(self, state: AggregateState) -> list[Row]:
        """The union of the compute nodes' results: grouping-set order, then key order.

        The order is :func:`dpcomm.queries.groupby.evaluate`'s (NULLs last), whichever node
        computed which group.
        """
        merged = state.as_dict()
        rows: list[Row] = []
        for flow in self.flow_names:
            pairs = [
                pair
                for (name, _), output in merged.items()
                if name == flow
                for pair in zip(output.keys, output.rows, strict=True)
            ]
            pairs.sort(key=lambda pair: key_order(pair[0]))
            rows.extend(dict(row) for _, row in pairs)
        return rows

    # ------------------------------------------------------------------ wire

    def tuple_codec(self, flow: str) -> TableCodec:
        """How a source's tuple of ``flow`` travels (fixed size, exact values)."""
        by_name = {c.name.lower(): c for c in self.columns}
        names = self.query.carried_columns(self.set_index(flow))
        return TableCodec(tuple(by_name[n.lower()] for n in names))

    def tuple_size(self) -> int:
        """The largest encoded tuple over the flows (every payload is padded to one size)."""
        return max(self.tuple_codec(flow).size for flow in self.flow_names)

    def groups_bound(self, flow: str) -> int:
        """Groups every output of ``flow`` is padded to.

        1 for the empty grouping set, else ``max_groups`` (default S: one compute node can
        hold at most every source's group).
        """
        if not self.query.grouping_sets[self.set_index(flow)]:
            return 1
        return self.max_groups if self.max_groups is not None else self.num_sources

    @cached_property
    def row_bound(self) -> int:
        """Bytes one output row may take, from the public schema.

        A row is its key and its result values, each written by :func:`_encode_value`: an
        integer of an int64 type or a float in 9 bytes, a text value of a column of encoded
        width w (``max_text_bytes`` + 3) in at most w, any other value (tagged JSON of an
        integer below 2^160, a decimal of 38 digits, a date, a time) in at most 3 + 64. The
        types are DuckDB's: the columns' for the keys, the query's output types for the rows.
        """
        by_name = {c.name.lower(): c for c in self.columns}

        def key_bound(column: str) -> int:
            spec = by_name.get(column.lower())
            return _value_bound(spec.sql_type if spec else "", spec.width if spec else 0)

        keys = sum(key_bound(c) for c in self.query.grouping_columns)
        values = 0
        for output, sql_type in zip(self.query.outputs, self.query.output_types, strict=True):
            spec = by_name.get(output.column.lower()) if output.column else None
            values += _value_bound(sql_type, spec.width if spec else 0)
        return keys + values

    def output_size(self, flow: str) -> int:
        """Bytes of every output blob of ``flow`` (a public function of the plan)."""
        return _OUTPUT_HEADER.size + self.groups_bound(flow) * (_ROW_LENGTH.size + self.row_bound)

    def encode_output(self, flow: str, output: AggregateOutput) -> bytes:
        """A compute node's output, padded to :meth:`output_size` whatever its groups.

        Its length is public, so the compute → result traffic does not depend on the data (the
        plan calls that flow data-independent). A node with more groups than the bound, or a
        row longer than :attr:`row_bound`, sends a blob of the same length that says so
        (:meth:`decode_output` raises :class:`OutputOverflowError`): never a longer one.
        """
        rows = self._encoded_rows(output)
        size = self.output_size(flow)
        longest = max((len(r) for r in rows), default=0)
        if self._overflow(flow, rows) is not None:
            header = _OUTPUT_HEADER.pack(len(rows), 1, longest)
            return header + bytes(size - len(header))
        width = self.row_bound
        parts = [_OUTPUT_HEADER.pack(len(rows), 0, longest)]
        for row in rows:
            parts.append(_ROW_LENGTH.pack(len(row)) + row + bytes(width - len(row)))
        blob = b"".join(parts)
        return blob + bytes(size - len(blob))

    def check_output(self, flow: str, output: AggregateOutput) -> None:
        """OutputOverflowError if ``output`` does not fit the public bound of ``flow``.

        That is what :meth:`encode_output` would withhold: every engine fails the same way.
        """
        error = self._overflow(flow, self._encoded_rows(output))
        if error is not None:
            raise error

    def _encoded_rows(self, output: AggregateOutput) -> list[bytes]:
        names = list(self.query.output_names)
        return [
            b"".join(_encode_value(v) for v in (*key, *(row[n] for n in names)))
            for key, row in zip(output.keys, output.rows, strict=True)
        ]

    def _overflow(self, flow: str, rows: list[bytes]) -> OutputOverflowError | None:
        longest = max((len(r) for r in rows), default=0)
        groups, width = self.groups_bound(flow), self.row_bound
        if len(rows) > groups or longest > width:
            return OutputOverflowError(flow, len(rows), longest, groups=groups, row=width)
        return None

    def decode_output(self, flow: str, data: bytes) -> AggregateOutput:
        """Inverse of :meth:`encode_output`.

        Raises:
            CodecError: malformed bytes.
            OutputOverflowError: the node's groups did not fit the public bound.
        """
        if len(data) != self.output_size(flow):
            raise CodecError(f"an output of {len(data)} bytes, expected {self.output_size(flow)}")
        count, overflow, longest = _OUTPUT_HEADER.unpack_from(data)
        if overflow:
            raise OutputOverflowError(
                flow, count, longest, groups=self.groups_bound(flow), row=self.row_bound
            )
        if count > self.groups_bound(flow):
            raise CodecError(f"an output of {count} groups, at most {self.groups_bound(flow)}")
        names = list(self.query.output_names)
        width = len(self.query.grouping_sets[self.set_index(flow)])
        keys, rows = [], []
        offset = _OUTPUT_HEADER.size
        step = _ROW_LENGTH.size + self.row_bound
        for _ in range(count):
            (length,) = _ROW_LENGTH.unpack_from(data, offset)
            if length > self.row_bound:
                raise CodecError(f"an output row of {length} bytes")
            start = offset + _ROW_LENGTH.size
            values = _decode_values(data[start : start + length])
            if len(values) != width + len(names):
                raise CodecError(f"an output row of {len(values)} values")
            keys.append(tuple(values[:width]))
            rows.append(dict(zip(names, values[width:], strict=True)))
            offset += step
        return AggregateOutput(tuple(keys), tuple(rows))

    def encode_rows(self, indices: Sequence[int]) -> list[str]:
        """Rows ``indices`` of the sources (every column the query reads), hexadecimal."""
        rows = self.source_rows().take(np.asarray(indices, dtype=np.int64))
        return [payload.hex() for payload in TableCodec(self.columns).encode(rows)]

    def decode_rows(self, encoded: Sequence[str]) -> Table:
        """Inverse of :meth:`encode_rows`: a source node's own rows."""
        payloads = from_hex(encoded, "row")
        return TableCodec(self.columns).decode(payloads, name=self.query.table_name)

    # ------------------------------------------------------------------ driver side

    def source_rows(self) -> Table:
        """The sources' rows (only where the program holds them)."""
        if self.table is None:
            raise InvalidParameterError("table", "a program with the sources' rows", None)
        return self.table

    def nonprivate_result(self) -> list[Row]:
        """The result over every tuple (what DuckDB returns for the SQL on the whole table)."""
        table = self.source_rows()
        everything = np.ones(table.num_rows, dtype=bool)
        return evaluate(self.query, table, [everything] * self.query.num_grouping_sets)
