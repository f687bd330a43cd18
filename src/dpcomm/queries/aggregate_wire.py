"""How an Aggregate run travels: tuples, the compute nodes' outputs and a source's row.

Every output of a grouping set has one public size (`AggregateOutputCodec.size`): the
compute → result traffic must not depend on the data. An output is its groups' rows, each its
key and result values (tagged, exact: integers and floats in 8 bytes, text in its public width,
anything else as tagged JSON), padded to a public bound on the groups of one compute node
(``max_groups``, default S) and on the bytes of one row (from the public schema). A node with
more groups, or a longer row, sends a blob of the same size that says so
(`OutputOverflowError`): never a longer one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpcomm.data.table import Table, value_kind
from dpcomm.errors import DpcommError
from dpcomm.queries.codec import CodecError, ColumnSpec, TableCodec, dumps, loads
from dpcomm.queries.program import Row
from dpcomm.queries.query import BoundAggregate

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
    """Bytes `_encode_value` takes at most for a value of ``sql_type``.

    ``width`` is a text column's encoded width.
    """
    kind = value_kind(sql_type)
    if kind in ("int", "float"):
        return 1 + _INT64.size
    if kind == "text":
        return max(width, _VALUE_HEADER.size + 1)
    return 1 + _VALUE_HEADER.size + _SCALAR_JSON_BYTES


def _list_bound(sql_type: str, width: int, num_sources: int) -> int:
    """Bytes `_encode_value` takes at most for a LIST of S values of ``sql_type``.

    Tagged JSON: each value in at most 64 bytes, a text value in six per byte of its
    width (JSON's escapes) plus its quotes, S values (one group can hold every source's),
    at most 65,535 bytes (a longer value overflows: `OutputOverflowError`).
    """
    each = 6 * width + 3 if value_kind(sql_type) == "text" else _SCALAR_JSON_BYTES
    return 1 + _VALUE_HEADER.size + min(0xFFFF, 8 + num_sources * each)


def _encode_value(value: object) -> bytes:
    """One value of an output row.

    ``N`` (NULL); ``I`` + int64 or ``F`` + float64 (8 bytes, exact); ``S`` + a 2-byte length +
    UTF-8 text; ``J`` + a 2-byte length + tagged JSON (`dumps`) for anything else.
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
    """Inverse of a row of `_encode_value`; CodecError if malformed."""
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


class OutputOverflowError(DpcommError):
    """A compute node held more groups (or a longer row) than the public output bound.

    ``released`` (a noisy release): the message says which bound was exceeded, not by how
    much: the count of a node's groups is what a release (its key selection) hides.
    """

    def __init__(
        self,
        flow: str,
        count: int,
        longest: int,
        *,
        groups: int,
        row: int,
        released: bool = False,
    ) -> None:
        if count > groups and released:
            what = f"more groups than the public bound of {groups:,} (max_groups)"
        elif count > groups:
            what = f"{count:,} groups, more than the public bound of {groups:,} (max_groups)"
        elif released:
            what = f"a result row longer than the bound of {row:,} bytes"
        else:
            what = f"a result row of {longest:,} bytes, more than the bound of {row:,}"
        super().__init__(
            f"grouping set {flow}: a compute node had {what}; its output was withheld "
            "(outputs have one public size, so that their length does not depend on the data)"
        )


@dataclass(frozen=True)
class AggregateOutput:
    """What one compute node sends to the result node: its groups' keys and result rows.

    Attributes:
        keys: each row's grouping key (the values of the grouping set's columns).
        rows: the result rows of the compute node's groups, in key order.
    """

    keys: tuple[tuple[object, ...], ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True, eq=False)
class AggregateCodec:
    """How the tuples, outputs and rows of an Aggregate program travel.

    Attributes:
        query: the bound query.
        columns: how each column the query reads travels (public widths).
        flow_names: the grouping sets' flows, in query order.
        num_sources: S (the default bound on the groups of one output).
        max_groups: the public bound on the groups of one compute node's output (None: S).
        released: whether the result is released with noise (an overflow's error then states
            no count of the data: `OutputOverflowError`).
    """

    query: BoundAggregate
    columns: tuple[ColumnSpec, ...]
    flow_names: tuple[str, ...]
    num_sources: int
    max_groups: int | None = None
    released: bool = False

    def tuples(self, flow: str) -> TableCodec:
        """How a source's tuple of ``flow`` travels (fixed size, exact values)."""
        by_name = {c.name.lower(): c for c in self.columns}
        names = self.query.carried_columns(self.flow_names.index(flow))
        return TableCodec(tuple(by_name[n.lower()] for n in names))

    def outputs(self, flow: str) -> AggregateOutputCodec:
        """How a compute node's output of ``flow`` travels."""
        return AggregateOutputCodec(self, flow)

    @property
    def rows(self) -> SourceRowCodec:
        """How a source's row travels (every column the query reads)."""
        return SourceRowCodec(TableCodec(self.columns), self.query.table_name)

    def groups_bound(self, flow: str) -> int:
        """Groups every output of ``flow`` is padded to.

        1 for the empty grouping set, else ``max_groups`` (default S: one compute node can
        hold at most every source's group).
        """
        if not self.query.grouping_sets[self.flow_names.index(flow)]:
            return 1
        return self.max_groups if self.max_groups is not None else self.num_sources

    @cached_property
    def row_bound(self) -> int:
        """Bytes one output row may take, from the public schema.

        A row is its key and its result values, each written by `_encode_value`: an
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
            width = spec.width if spec else 0
            if output.function == "list":
                values += _list_bound(spec.sql_type if spec else "", width, self.num_sources)
            else:
                values += _value_bound(sql_type, width)
        return keys + values


@dataclass(frozen=True, eq=False)
class AggregateOutputCodec:
    """How the outputs of one grouping set travel (one public size)."""

    codec: AggregateCodec
    flow: str

    @property
    def size(self) -> int:
        """Bytes of every output blob of the flow (a public function of the plan)."""
        groups = self.codec.groups_bound(self.flow)
        return _OUTPUT_HEADER.size + groups * (_ROW_LENGTH.size + self.codec.row_bound)

    def encode(self, output: AggregateOutput) -> bytes:
        """A compute node's output, padded to `size` whatever its groups.

        A node with more groups than the bound, or a row longer than the row bound, sends a
        blob of the same length that says so (`decode` raises
        `OutputOverflowError`): never a longer one.
        """
        rows = self._encoded_rows(output)
        size = self.size
        longest = max((len(r) for r in rows), default=0)
        if self._overflow(rows) is not None:
            header = _OUTPUT_HEADER.pack(len(rows), 1, longest)
            return header + bytes(size - len(header))
        width = self.codec.row_bound
        parts = [_OUTPUT_HEADER.pack(len(rows), 0, longest)]
        for row in rows:
            parts.append(_ROW_LENGTH.pack(len(row)) + row + bytes(width - len(row)))
        blob = b"".join(parts)
        return blob + bytes(size - len(blob))

    def check(self, output: AggregateOutput) -> None:
        """OutputOverflowError if ``output`` does not fit the public bound of the flow.

        That is what `encode` would withhold: every engine fails the same way.
        """
        error = self._overflow(self._encoded_rows(output))
        if error is not None:
            raise error

    def _encoded_rows(self, output: AggregateOutput) -> list[bytes]:
        names = list(self.codec.query.output_names)
        return [
            b"".join(_encode_value(v) for v in (*key, *(row[n] for n in names)))
            for key, row in zip(output.keys, output.rows, strict=True)
        ]

    def _overflow(self, rows: list[bytes]) -> OutputOverflowError | None:
        longest = max((len(r) for r in rows), default=0)
        groups, width = self.codec.groups_bound(self.flow), self.codec.row_bound
        if len(rows) > groups or longest > width:
            released = self.codec.released
            return OutputOverflowError(
                self.flow, len(rows), longest, groups=groups, row=width, released=released
            )
        return None

    def decode(self, data: bytes) -> AggregateOutput:
        """Inverse of `encode`.

        Raises:
            CodecError: malformed bytes.
            OutputOverflowError: the node's groups did not fit the public bound.
        """
        codec, flow = self.codec, self.flow
        if len(data) != self.size:
            raise CodecError(f"an output of {len(data)} bytes, expected {self.size}")
        count, overflow, longest = _OUTPUT_HEADER.unpack_from(data)
        groups = codec.groups_bound(flow)
        if overflow:
            raise OutputOverflowError(
                flow, count, longest, groups=groups, row=codec.row_bound, released=codec.released
            )
        if count > groups:
            raise CodecError(f"an output of {count} groups, at most {groups}")
        names = list(codec.query.output_names)
        width = len(codec.query.grouping_sets[codec.flow_names.index(flow)])
        keys, rows = [], []
        offset = _OUTPUT_HEADER.size
        step = _ROW_LENGTH.size + codec.row_bound
        for _ in range(count):
            (length,) = _ROW_LENGTH.unpack_from(data, offset)
            if length > codec.row_bound:
                raise CodecError(f"an output row of {length} bytes")
            start = offset + _ROW_LENGTH.size
            values = _decode_values(data[start : start + length])
            if len(values) != width + len(names):
                raise CodecError(f"an output row of {len(values)} values")
            keys.append(tuple(values[:width]))
            rows.append(dict(zip(names, values[width:], strict=True)))
            offset += step
        return AggregateOutput(tuple(keys), tuple(rows))


@dataclass(frozen=True, eq=False)
class SourceRowCodec:
    """How sources' rows travel: every column the query reads, in the table's name."""

    codec: TableCodec
    table_name: str

    @property
    def size(self) -> int:
        """Bytes of one encoded row."""
        return self.codec.size

    def encode(self, rows: Table) -> list[bytes]:
        """One payload per row."""
        return self.codec.encode(rows)

    def decode(self, payloads: list[bytes]) -> Table:
        """The rows of the payloads (CodecError if malformed)."""
        return self.codec.decode(payloads, name=self.table_name)
