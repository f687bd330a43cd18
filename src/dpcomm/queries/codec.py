"""How a query program's data travels in a networked run: fixed-size tuples, exact values.

Every message payload of a round has one size (sealed payloads of one length), so a source's
tuple is encoded at a fixed width per column, from the public schema:

* one byte NULL flag, then the value: int64 and float64 in 8 bytes (big-endian, the float's
  exact bits), booleans in 1 byte, dates, timestamps and times as their int64 count of units,
  strings as a 2-byte length and their UTF-8 bytes padded to the column's width; UBIGINT,
  HUGEINT and UHUGEINT in 17 bytes (two's complement), DECIMAL(p,s) as its integer of units of
  10^-s in 8 bytes (p <= 18) or 17;
* K-means points as float32 coordinates (`VectorCodec`).

A decoded tuple is exactly the value the simulator reads from the table (a property test checks
``decode(encode(x)) == x`` on real data sets), so the two engines compute on the same values.

Outputs of compute nodes (partial results, centroids) are variable-size control messages:
`dumps` / `loads` write them as JSON with tagged values (floats by their exact
hexadecimal form, dates in ISO form, integers of any size), never pickle: a peer's bytes are
parsed, not executed. Integers outside int64 travel in hexadecimal (exact at any size).
"""

from __future__ import annotations

import datetime
import decimal
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import (
    Column,
    Table,
    check_carried,
    decimal_of,
    decimal_scale,
    exact_integers,
    value_kind,
)
from dpcomm.errors import DpcommError, InvalidParameterError

_INT = struct.Struct(">q")
_FLOAT = struct.Struct(">d")
_LENGTH = struct.Struct(">H")
#: Bytes of a wide integer (UHUGEINT's maximum needs 129 bits with the sign).
_WIDE = 17
#: Microseconds in a day, for TIME values.
_MICROS_PER_SECOND = 1_000_000
#: Integers in [-2^63, 2^63) travel as JSON numbers, the others tagged (see `to_wire`).
_JSON_INT_LIMIT = 1 << 63
#: Longest string value a tuple may carry (bytes of UTF-8).
MAX_STRING_BYTES = 65_535


class CodecError(DpcommError):
    """Bytes that do not decode (a malformed payload or control message)."""


def from_hex(encoded: Sequence[str], what: str) -> list[bytes]:
    """The payloads written as hexadecimal text; CodecError naming ``what`` if one is not."""
    try:
        return [bytes.fromhex(text) for text in encoded]
    except (TypeError, ValueError) as error:
        raise CodecError(f"malformed {what}: {error}") from error


@dataclass(frozen=True)
class ColumnSpec:
    """A column as it travels: name, SQL type, numpy dtype and encoded width.

    Attributes:
        name: the column's name.
        sql_type: DuckDB's type.
        dtype: the numpy dtype string of its values (``<i8``, ``<f8``, ``|b1``, ``|O``,
            ``<M8[us]``, ...).
        width: bytes of an encoded value, its NULL flag included.
    """

    name: str
    sql_type: str
    dtype: str
    width: int

    @classmethod
    def of(cls, column: Column) -> ColumnSpec:
        """The spec of ``column``; a string column is as wide as its longest value.

        The width of a number depends on its SQL type only, not on the values.
        """
        check_carried(column)
        kind = value_kind(column.sql_type)
        if kind == "wideint":
            width = 1 + _WIDE
        elif kind == "decimal":
            precision, _ = decimal_scale(column.sql_type)
            width = 1 + (_INT.size if precision <= 18 else _WIDE)
        elif kind in ("int", "date", "time", "timestamp"):
            width = 1 + _INT.size
        elif kind == "float":
            width = 1 + _FLOAT.size
        elif kind == "bool":
            width = 2
        else:
            present = column.values[~column.is_null].tolist()
            longest = max((len(str(v).encode("utf-8")) for v in present), default=0)
            if longest > MAX_STRING_BYTES:
                raise InvalidParameterError(
                    f"column {column.name}",
                    f"string values of at most {MAX_STRING_BYTES} bytes",
                    f"a value of {longest} bytes",
                )
            width = 1 + _LENGTH.size + longest
        return cls(column.name, column.sql_type, column.values.dtype.str, width)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "sql_type": self.sql_type,
            "dtype": self.dtype,
            "width": self.width,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ColumnSpec:
        """Inverse of `to_dict`."""
        return cls(str(data["name"]), str(data["sql_type"]), str(data["dtype"]), int(data["width"]))


@dataclass(frozen=True)
class TableCodec:
    """Rows of some columns as fixed-size byte strings (one per row).

    Attributes:
        columns: the columns carried, in order.
    """

    columns: tuple[ColumnSpec, ...]

    @property
    def size(self) -> int:
        """Bytes of one encoded row."""
        return sum(c.width for c in self.columns)

    def encode(self, table: Table) -> list[bytes]:
        """One payload per row of ``table`` (which holds at least the codec's columns)."""
        parts = []
        for spec in self.columns:
            column = table.column(spec.name)
            fixed = value_kind(spec.sql_type) not in ("wideint", "decimal", "text", "time")
            if fixed and column.values.dtype.str != spec.dtype:
                raise InvalidParameterError(
                    f"column {spec.name}", f"values of dtype {spec.dtype}", column.values.dtype.str
                )
            parts.append(_encode_column(spec, column))
        return (
            [b"".join(row) for row in zip(*parts, strict=True)]
            if parts
            else [b"" for _ in range(table.num_rows)]
        )

    def decode(self, payloads: Sequence[bytes], *, name: str = "tuples") -> Table:
        """The table of the decoded rows; CodecError if a payload is malformed."""
        size = self.size
        for payload in payloads:
            if len(payload) < size:
                raise CodecError(f"a tuple of {len(payload)} bytes, expected {size}")
        columns = []
        offset = 0
        for spec in self.columns:
            columns.append(
                _decode_column(spec, [p[offset : offset + spec.width] for p in payloads])
            )
            offset += spec.width
        # Without columns (COUNT(*) over the empty grouping set) every payload is still a row.
        return Table(name, tuple(columns), rows=None if columns else len(payloads))


def _encode_column(spec: ColumnSpec, column: Column) -> list[bytes]:
    kind = value_kind(spec.sql_type)
    values = column.values
    nulls = column.is_null.tolist()
    if kind in ("wideint", "decimal"):
        scale = decimal_scale(spec.sql_type)[1] if kind == "decimal" else 0
        size = spec.width - 1
        return [
            b"\x00" * spec.width
            if n
            else b"\x01" + _units(v, scale).to_bytes(size, "big", signed=True)
            for v, n in zip(values.tolist(), nulls, strict=True)
        ]
    if kind == "time":
        return [
            b"\x00" * spec.width if n else b"\x01" + _INT.pack(_time_micros(v))
            for v, n in zip(values.tolist(), nulls, strict=True)
        ]
    if kind in ("int", "date", "timestamp"):
        numbers = values.view(np.int64).tolist() if values.dtype.kind in "Mm" else values.tolist()
        return [
            b"\x00" * spec.width if n else b"\x01" + _INT.pack(int(v))
            for v, n in zip(numbers, nulls, strict=True)
        ]
    if kind == "float":
        return [
            b"\x00" * spec.width if n else b"\x01" + _FLOAT.pack(float(v))
            for v, n in zip(values.tolist(), nulls, strict=True)
        ]
    if kind == "bool":
        return [
            b"\x00\x00" if n else b"\x01" + (b"\x01" if v else b"\x00")
            for v, n in zip(values.tolist(), nulls, strict=True)
        ]
    encoded = []
    room = spec.width - 1 - _LENGTH.size
    for value, null in zip(values.tolist(), nulls, strict=True):
        if null:
            encoded.append(b"\x00" * spec.width)
            continue
        data = str(value).encode("utf-8")
        if len(data) > room:
            raise InvalidParameterError(
                f"value of column {spec.name}", f"at most {room} bytes of UTF-8", len(data)
            )
        encoded.append(b"\x01" + _LENGTH.pack(len(data)) + data + b"\x00" * (room - len(data)))
    return encoded


def _units(value: Any, scale: int) -> int:
    """An integer, or a DECIMAL value as its integer count of 10^-``scale``."""
    if not isinstance(value, decimal.Decimal):
        return int(value)
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int) or exponent < -scale:
        raise InvalidParameterError(
            "DECIMAL value", f"a number with at most {scale} decimals", value
        )
    units: int = int("".join(map(str, digits)) or "0") * 10 ** (exponent + scale)
    return -units if sign else units


def _time_micros(value: datetime.time) -> int:
    return (
        (value.hour * 60 + value.minute) * 60 + value.second
    ) * _MICROS_PER_SECOND + value.microsecond


def _decode_column(spec: ColumnSpec, fields: list[bytes]) -> Column:
    dtype = np.dtype(spec.dtype)
    kind = value_kind(spec.sql_type)
    count = len(fields)
    is_null = np.array([f[0] == 0 for f in fields], dtype=bool)
    if any(f[0] not in (0, 1) for f in fields):
        raise CodecError(f"column {spec.name}: a NULL flag that is neither 0 nor 1")
    values: npt.NDArray[Any]
    if kind in ("wideint", "decimal"):
        numbers = [
            0 if n else int.from_bytes(f[1 : spec.width], "big", signed=True)
            for f, n in zip(fields, is_null.tolist(), strict=True)
        ]
        if kind == "wideint":
            values = exact_integers(numbers)
        else:
            scale = decimal_scale(spec.sql_type)[1]
            values = np.empty(count, dtype=object)
            values[:] = [decimal_of(n, scale) for n in numbers]
    elif kind == "time":
        values = np.empty(count, dtype=object)
        values[:] = [
            datetime.time() if n else _time_of(_INT.unpack_from(f, 1)[0], spec.name)
            for f, n in zip(fields, is_null.tolist(), strict=True)
        ]
    elif kind in ("int", "date", "timestamp"):
        raw = np.array(
            [0 if n else _INT.unpack_from(f, 1)[0] for f, n in zip(fields, is_null, strict=True)],
            dtype=np.int64,
        )
        values = raw.view(dtype) if dtype.kind in "Mm" else raw.astype(dtype)
    elif kind == "float":
        values = np.array(
            [
                0.0 if n else _FLOAT.unpack_from(f, 1)[0]
                for f, n in zip(fields, is_null, strict=True)
            ],
            dtype=dtype,
        )
    elif kind == "bool":
        values = np.array([bool(f[1]) for f in fields], dtype=bool)
    elif kind == "text":
        decoded: list[str] = []
        for field, null in zip(fields, is_null.tolist(), strict=True):
            if null:
                decoded.append("")
                continue
            (length,) = _LENGTH.unpack_from(field, 1)
            if 1 + _LENGTH.size + length > len(field):
                raise CodecError(f"column {spec.name}: a string longer than its field")
            try:
                decoded.append(field[3 : 3 + length].decode("utf-8"))
            except UnicodeDecodeError as error:
                raise CodecError(f"column {spec.name}: {error}") from error
        values = np.empty(count, dtype=object)
        values[:] = decoded
    else:
        raise CodecError(f"column {spec.name}: type {spec.sql_type} does not travel")
    return Column(spec.name, spec.sql_type, values, is_null)


def _time_of(micros: int, name: str) -> datetime.time:
    seconds, micro = divmod(micros, _MICROS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    if not 0 <= hour < 24:
        raise CodecError(f"column {name}: a TIME value of {micros} microseconds")
    return datetime.time(hour, minute, second, micro)


@dataclass(frozen=True)
class VectorCodec:
    """Points of ``dimension`` float32 coordinates (K-means)."""

    dimension: int

    @property
    def size(self) -> int:
        """Bytes of one encoded point."""
        return 4 * self.dimension

    def encode(self, points: npt.ArrayLike) -> list[bytes]:
        """One payload per row of ``points``."""
        array = np.asarray(points, dtype=">f4").reshape(-1, self.dimension)
        return [row.tobytes() for row in array]

    def decode(self, payloads: Sequence[bytes]) -> npt.NDArray[np.float32]:
        """The points; CodecError if a payload is malformed."""
        for payload in payloads:
            if len(payload) < self.size:
                raise CodecError(f"a point of {len(payload)} bytes, expected {self.size}")
        if not payloads:
            return np.zeros((0, self.dimension), dtype=np.float32)
        data = b"".join(p[: self.size] for p in payloads)
        return np.frombuffer(data, dtype=">f4").astype(np.float32).reshape(-1, self.dimension)


@dataclass(frozen=True)
class ArrayCodec:
    """Items of a fixed numpy ``shape`` and ``dtype`` (one per row): fixed-size payloads.

    The values travel big-endian, exactly; an array of rows encodes to one payload per row.
    """

    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        """Bytes of one encoded item."""
        return int(np.dtype(self.dtype).itemsize * int(np.prod(self.shape, dtype=np.int64)))

    def encode(self, items: npt.ArrayLike) -> list[bytes]:
        """One payload per item of ``items`` (an array of shape (rows, *shape))."""
        wire = np.dtype(self.dtype).newbyteorder(">")
        # Rows of the flattened items: a row is an array (a scalar would be native-endian).
        count = max(1, int(np.prod(self.shape, dtype=np.int64)))
        array = np.asarray(items, dtype=wire).reshape(-1, count)
        return [item.tobytes() for item in array]

    def decode(self, payloads: Sequence[bytes]) -> npt.NDArray[Any]:
        """The items, as an array of shape (len(payloads), *shape); CodecError if malformed."""
        for payload in payloads:
            if len(payload) != self.size:
                raise CodecError(f"an item of {len(payload)} bytes, expected {self.size}")
        wire = np.dtype(self.dtype).newbyteorder(">")
        data = np.frombuffer(b"".join(payloads), dtype=wire)
        return data.astype(self.dtype).reshape(len(payloads), *self.shape)


@dataclass(frozen=True)
class ArrayOutputCodec:
    """A target's output that is one array of a fixed shape: it always has the public size."""

    items: ArrayCodec

    @property
    def size(self) -> int:
        """Bytes of every output."""
        return self.items.size

    def encode(self, output: npt.ArrayLike) -> bytes:
        """``output`` in `size` bytes."""
        return self.items.encode(np.asarray(output).reshape(1, *self.items.shape))[0]

    def decode(self, data: bytes) -> npt.NDArray[Any]:
        """Inverse of `encode`; CodecError if malformed."""
        decoded: npt.NDArray[Any] = self.items.decode([data])[0]
        return decoded

    def check(self, output: npt.ArrayLike) -> None:
        """CodecError unless ``output`` has the public shape."""
        shape = np.shape(output)
        if shape != self.items.shape:
            raise CodecError(f"an output of shape {shape}, expected {self.items.shape}")


@dataclass(frozen=True)
class UniformCodec:
    """A program's codec when every flow's tuples and outputs travel the same way."""

    tuple_codec: ArrayCodec
    output_codec: ArrayOutputCodec
    row_codec: ArrayCodec

    def tuples(self, flow: str) -> ArrayCodec:
        """The tuples of any flow."""
        del flow
        return self.tuple_codec

    def outputs(self, flow: str) -> ArrayOutputCodec:
        """The outputs of any flow."""
        del flow
        return self.output_codec

    @property
    def rows(self) -> ArrayCodec:
        """A source's row."""
        return self.row_codec


# --------------------------------------------------------------------------- tagged JSON


def to_wire(value: Any) -> Any:
    """``value`` as JSON-ready data with exact, tagged scalars (inverse: `from_wire`)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.generic):
        return to_wire(value.item())
    if isinstance(value, int):
        if -_JSON_INT_LIMIT <= value < _JSON_INT_LIMIT:
            return value  # exact as a JSON number
        # Beyond int64, in hexadecimal: CPython refuses to write (and read) decimal integers
        # of more than 4,300 digits (sys.get_int_max_str_digits), and other JSON readers
        # lose integers beyond 2^53 anyway; base 16 has no such limit and stays exact.
        return {"i": hex(value)}
    if isinstance(value, float):
        return {"f": float.hex(value)}
    if isinstance(value, datetime.datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"d": value.isoformat()}
    if isinstance(value, datetime.time):
        return {"t": value.isoformat()}
    if isinstance(value, datetime.timedelta):
        return {"td": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, decimal.Decimal):
        return {"dec": str(value)}
    if isinstance(value, list | tuple):
        return {"l": [to_wire(v) for v in value]}
    if isinstance(value, dict):
        return {"m": [[to_wire(k), to_wire(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        return {"a": [value.dtype.str, list(value.shape), value.tobytes().hex()]}
    raise InvalidParameterError(
        "value", "a value that can travel (number, text, date, array)", type(value).__name__
    )


def from_wire(data: Any) -> Any:
    """Inverse of `to_wire`; CodecError on anything else."""
    if data is None or isinstance(data, bool | str | int):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise CodecError(f"unexpected value {data!r:.80}")
    ((tag, body),) = data.items()
    try:
        if tag == "f":
            return float.fromhex(body)
        if tag == "i":
            if not isinstance(body, str):
                raise TypeError(f"an integer in hexadecimal, got {type(body).__name__}")
            return int(body, 16)
        if tag == "dt":
            return datetime.datetime.fromisoformat(body)
        if tag == "d":
            return datetime.date.fromisoformat(body)
        if tag == "t":
            return datetime.time.fromisoformat(body)
        if tag == "td":
            days, seconds, micros = body
            return datetime.timedelta(days=days, seconds=seconds, microseconds=micros)
        if tag == "dec":
            return decimal.Decimal(body)
        if tag == "l":
            return [from_wire(v) for v in body]
        if tag == "m":
            return {_hashable(from_wire(k)): from_wire(v) for k, v in body}
        if tag == "a":
            dtype, shape, text = body
            if np.dtype(dtype).kind not in "iufb":
                raise CodecError(f"array of dtype {dtype}")
            return np.frombuffer(bytes.fromhex(text), dtype=dtype).reshape(shape).copy()
    except (TypeError, ValueError, decimal.InvalidOperation) as error:
        raise CodecError(f"malformed {tag!r} value: {error}") from error
    raise CodecError(f"unknown value tag {tag!r}")


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON bytes (`to_wire`)."""
    return json.dumps(to_wire(value), separators=(",", ":"), allow_nan=False).encode("utf-8")


def loads(data: bytes) -> Any:
    """Inverse of `dumps`; CodecError on malformed input."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CodecError(f"malformed message: {error}") from error
    return from_wire(parsed)
