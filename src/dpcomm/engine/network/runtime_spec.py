"""What every node of a deployed round is told: the round's public parameters and node configs.

A :class:`RoundSpec` is public (the plan is public, Section 2.1): the query, the schema, the
flows with their countermeasure and number of targets, the payload and frame sizes, the
deadlines. A :class:`NodeConfig` adds the node's name and role, where the coordinator listens
and, for a source, its own row. Both round-trip through JSON (``dpcomm node run --config``).

Node names: ``coordinator``, ``result``, ``source-<i>``, ``scrambler-<g>-<k>`` (scrambler k of
grouping set g) and ``compute-<g>-<c>`` (compute node c of grouping set g).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpcomm.data.table import Column, Table
from dpcomm.engine.network.frames import frame_size_for
from dpcomm.engine.network.runtime_wire import BLOB_HEADER, DATA_HEADER, MIN_BODY_SIZE
from dpcomm.engine.network.sealing import payload_size_for, sealed_size
from dpcomm.errors import DpcommError, InvalidParameterError

COORDINATOR = "coordinator"
RESULT = "result"
ROLES = ("coordinator", "result", "source", "scrambler", "compute")
#: Modes of a flow: through scramblers, local sampling + flooding, or straight to the target.
MODES = ("scrambler", "local", "direct")
_TUPLE_HEADER = struct.Struct(">IB")


class DeploymentError(DpcommError):
    """A deployed round could not run (a node missing, a process dead, a deadline passed)."""


def source_name(index: int) -> str:
    """Name of source ``index``."""
    return f"source-{index}"


def scrambler_name(flow: int, index: int) -> str:
    """Name of scrambler ``index`` of flow ``flow``."""
    return f"scrambler-{flow}-{index}"


def compute_name(flow: int, index: int) -> str:
    """Name of compute node ``index`` of flow ``flow``."""
    return f"compute-{flow}-{index}"


def parse_name(name: str) -> tuple[str, tuple[int, ...]]:
    """Role and numbers of a node name (``('source', (3,))``); DeploymentError if unknown."""
    if name in (COORDINATOR, RESULT):
        return name, ()
    role, _, rest = name.partition("-")
    try:
        numbers = tuple(int(part) for part in rest.split("-"))
    except ValueError:
        numbers = ()
    expected = {"source": 1, "scrambler": 2, "compute": 2}
    if role not in expected or len(numbers) != expected[role]:
        raise DeploymentError(f"unknown node name {name!r}")
    return role, numbers


@dataclass(frozen=True, kw_only=True)
class ColumnSpec:
    """A table column as the nodes encode it.

    Attributes:
        name: column name.
        sql_type: DuckDB type.
        kind: ``i`` (integer), ``f`` (float), ``b`` (boolean) or ``s`` (string).
        width: bytes of an encoded value, its NULL flag included.
    """

    name: str
    sql_type: str
    kind: str
    width: int


@dataclass(frozen=True, kw_only=True)
class FlowSpec:
    """One data-dependent flow (one grouping set) of the round.

    Attributes:
        name: the flow's name in the plan (``(g1)``, ...).
        columns: the grouping set.
        carried: the columns a source sends (grouping set, then measured columns).
        num_targets: T = compute nodes of the set.
        mode: ``scrambler``, ``local`` or ``direct`` (no countermeasure).
        sampling_rate: σ.
        batch_size: n (scramblers).
        num_dummies: d (per scrambler, or flooding dummies per source).
        capped: S̄_d instead of S_d.
        num_scramblers: ⌈S/n⌉ (scramblers).
    """

    name: str
    columns: tuple[str, ...]
    carried: tuple[str, ...]
    num_targets: int
    mode: str
    sampling_rate: float = 0.0
    batch_size: int = 0
    num_dummies: int = 0
    capped: bool = False
    num_scramblers: int = 0


@dataclass(frozen=True, kw_only=True)
class RoundSpec:
    """The public parameters of one deployed Aggregate round.

    Attributes:
        round_id: the round id every frame carries.
        num_sources: S.
        sql: the query; ``table_name`` its FROM name, ``schema`` the table's columns.
        flows: one per grouping set.
        payload_size: padded plaintext size of every sealed payload.
        frame_size: the length of every frame on the wire.
        seed: seed of every random draw (None: fresh operating-system entropy).
        collect_seconds: how long scramblers (and targets) wait for their inputs.
        round_seconds: hard deadline of the whole round.
        kind: ``aggregate`` (one round of an Aggregate query) or ``kmeans`` (one flow per
            K-means iteration: sources carry points, compute nodes return sums and counts).
        dimension: coordinates of a point (K-means only; they travel as float32).
    """

    round_id: int
    num_sources: int
    sql: str
    table_name: str
    schema: tuple[ColumnSpec, ...]
    flows: tuple[FlowSpec, ...]
    payload_size: int
    frame_size: int
    seed: int | None
    collect_seconds: float
    round_seconds: float
    kind: str = "aggregate"
    dimension: int = 0

    def column(self, name: str) -> ColumnSpec:
        """The column called ``name`` (case-insensitive)."""
        for column in self.schema:
            if column.name.lower() == name.lower():
                return column
        raise InvalidParameterError("column", "a column of the schema", name)

    def node_names(self) -> list[tuple[str, str]]:
        """Every (name, role) of the round."""
        nodes = [(COORDINATOR, "coordinator"), (RESULT, "result")]
        for index, flow in enumerate(self.flows):
            nodes += [(compute_name(index, c), "compute") for c in range(flow.num_targets)]
            nodes += [(scrambler_name(index, k), "scrambler") for k in range(flow.num_scramblers)]
        nodes += [(source_name(i), "source") for i in range(self.num_sources)]
        return nodes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundSpec:
        """Inverse of :meth:`to_dict`."""
        values = dict(data)
        values["schema"] = tuple(ColumnSpec(**c) for c in values["schema"])
        values["flows"] = tuple(
            FlowSpec(**{**f, "columns": tuple(f["columns"]), "carried": tuple(f["carried"])})
            for f in values["flows"]
        )
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class NodeFaults:
    """Faults a node injects, for tests and demonstrations.

    Attributes:
        late: a source sends only after the collection deadline (it is left out).
        replay: a source sends its data frame a second time, byte for byte.
        malformed: a source sends a frame of random bytes after its data frame.
        unauthenticated: a source also tries a TLS connection without a certificate.
        crash_mid_forward: a scrambler dies (``os._exit``) in the middle of forwarding.
    """

    late: bool = False
    replay: bool = False
    malformed: bool = False
    unauthenticated: bool = False
    crash_mid_forward: bool = False


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """Everything one node needs to start.

    Attributes:
        name: the node's name (its certificate's common name).
        role: one of :data:`ROLES`.
        round: the round's public parameters.
        coordinator_host, coordinator_port: where the coordinator listens.
        listen_host, listen_port: where this node listens (port 0: any free port).
        advertise_host: the address other nodes reach it at (default ``listen_host``).
        row: a source's own row (column name -> value, None for NULL).
        faults: injected faults.
    """

    name: str
    role: str
    round: RoundSpec
    coordinator_host: str = "127.0.0.1"
    coordinator_port: int = 0
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    advertise_host: str | None = None
    row: dict[str, Any] | None = None
    faults: NodeFaults = field(default_factory=NodeFaults)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidParameterError("role", f"one of {', '.join(ROLES)}", self.role)
        role, _ = parse_name(self.name)
        if role != self.role:
            raise InvalidParameterError("name", f"a {self.role} node name", self.name)

    def to_json(self) -> str:
        """The config as a JSON document."""
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> NodeConfig:
        """Inverse of :meth:`to_json`."""
        try:
            data = json.loads(text)
            data["round"] = RoundSpec.from_dict(data["round"])
            data["faults"] = NodeFaults(**data.get("faults", {}))
            return cls(**data)
        except (ValueError, KeyError, TypeError) as error:
            raise DeploymentError(f"invalid node config: {error}") from error

    @classmethod
    def load(cls, path: str | Path) -> NodeConfig:
        """Read a config file written with :meth:`to_json`."""
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise DeploymentError(f"cannot read node config {path}: {error}") from error
        return cls.from_json(text)


def column_kind(column: Column) -> str:
    """The encoding kind of a column: ``i``, ``f``, ``b`` or ``s``."""
    kind = column.values.dtype.kind
    if kind in "iu":
        return "i"
    if kind == "f":
        return "f"
    if kind == "b":
        return "b"
    if kind == "O":
        return "s"
    raise InvalidParameterError(
        f"column {column.name}", "integer, float, boolean or string values", column.sql_type
    )


def column_spec(column: Column) -> ColumnSpec:
    """The column's encoding; a string column's width is its longest value (its declared size)."""
    kind = column_kind(column)
    if kind == "s":
        longest = max((len(str(v).encode()) for v in column.values.tolist()), default=0)
        width = 3 + longest
    else:
        width = 2 if kind == "b" else 9
    return ColumnSpec(name=column.name, sql_type=column.sql_type, kind=kind, width=width)


def sizes_for(schema: tuple[ColumnSpec, ...], flows: tuple[FlowSpec, ...]) -> tuple[int, int]:
    """(payload_size, frame_size) for the widest flow's tuple."""
    widths = {c.name.lower(): c.width for c in schema}
    widest = max(sum(widths[c.lower()] for c in flow.carried) for flow in flows)
    payload = payload_size_for(_TUPLE_HEADER.size + widest)
    body = max(DATA_HEADER.size + sealed_size(payload), MIN_BODY_SIZE, BLOB_HEADER.size + 16)
    return payload, frame_size_for(body)


def encode_tuple(spec: RoundSpec, flow: int, row_index: int, row: dict[str, Any]) -> bytes:
    """The plaintext a source seals: its index, the flow, and the carried values."""
    parts = [_TUPLE_HEADER.pack(row_index, flow)]
    lowered = {k.lower(): v for k, v in row.items()}
    for name in spec.flows[flow].carried:
        column = spec.column(name)
        value = lowered.get(name.lower())
        if value is None:
            parts.append(b"\x00")
            continue
        if column.kind == "i":
            parts.append(b"\x01" + struct.pack(">q", int(value)))
        elif column.kind == "f":
            parts.append(b"\x01" + struct.pack(">d", float(value)))
        elif column.kind == "b":
            parts.append(b"\x01" + struct.pack(">?", bool(value)))
        else:
            data = str(value).encode()
            if len(data) + 3 > column.width:
                raise InvalidParameterError(
                    f"value of {name}", f"at most {column.width - 3} bytes", len(data)
                )
            parts.append(b"\x01" + struct.pack(">H", len(data)) + data)
    return b"".join(parts)


def decode_tuple(spec: RoundSpec, payload: bytes) -> tuple[int, int, dict[str, Any]]:
    """Inverse of :func:`encode_tuple`: (row index, flow, values); DeploymentError if malformed."""
    try:
        row_index, flow = _TUPLE_HEADER.unpack_from(payload)
        offset = _TUPLE_HEADER.size
        values: dict[str, Any] = {}
        for name in spec.flows[flow].carried:
            column = spec.column(name)
            flag = payload[offset]
            offset += 1
            if flag == 0:
                values[column.name] = None
                continue
            if column.kind == "i":
                (values[column.name],) = struct.unpack_from(">q", payload, offset)
                offset += 8
            elif column.kind == "f":
                (values[column.name],) = struct.unpack_from(">d", payload, offset)
                offset += 8
            elif column.kind == "b":
                (values[column.name],) = struct.unpack_from(">?", payload, offset)
                offset += 1
            else:
                (length,) = struct.unpack_from(">H", payload, offset)
                values[column.name] = payload[offset + 2 : offset + 2 + length].decode()
                offset += 2 + length
        return row_index, flow, values
    except (struct.error, IndexError, UnicodeDecodeError) as error:
        raise DeploymentError(f"malformed tuple: {error}") from error


_DTYPES = {"i": np.int64, "f": np.float64, "b": np.bool_, "s": object}
_FILLERS: dict[str, Any] = {"i": 0, "f": 0.0, "b": False, "s": ""}


def rows_table(spec: RoundSpec, rows: list[dict[str, Any]]) -> Table:
    """A table with the round's full schema holding ``rows`` (missing columns are NULL)."""
    columns = []
    for column in spec.schema:
        values = [row.get(column.name) for row in rows]
        is_null = np.array([v is None for v in values], dtype=bool)
        filler = _FILLERS[column.kind]
        data: np.ndarray[Any, Any] = np.array(
            [filler if v is None else v for v in values], dtype=_DTYPES[column.kind]
        )
        columns.append(Column(column.name, column.sql_type, data, is_null))
    return Table(spec.table_name, tuple(columns))
