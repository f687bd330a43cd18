"""What a compiled query gives an engine: the hooks of the roles, its rows, how it travels.

An engine runs a program stage by stage through the role steps of `dpcomm.protocol.roles`:
in each stage every data-dependent flow of the stage sends one message per source to the target
its data chooses (`dpcomm.protocol.roles.ProgramHooks.route`); the countermeasures decide
what is actually sent; the targets compute their outputs from the real tuples that reached them
(in parts, `dpcomm.protocol.roles.ProgramHooks.target_partials`, combined by
`dpcomm.protocol.roles.ProgramHooks.combine_partials`); the outputs are merged into the
next state (`dpcomm.protocol.roles.ProgramHooks.merge`). Programs are immutable: the
evolving state is passed in and returned.

A `QueryProgram` adds three members to those ten hooks: its ``rows`` (the sources' data,
where the program holds it), its ``codec`` (how tuples, outputs and a source's row travel in a
networked run) and ``to_spec()`` (its public description). Programs join a registry
(`register_program`) from which every node rebuilds the public program
(`program_from_spec`): a new kind of computation needs no change to any engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasures
from dpcomm.protocol.roles import ProgramHooks

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Row = dict[str, Any]


class TupleCodec(Protocol):
    """How the tuples of one flow (or the rows of sources) travel: one fixed-size payload each."""

    @property
    def size(self) -> int:
        """Bytes of one encoded tuple."""
        ...

    def encode(self, tuples: Any) -> list[bytes]:
        """One payload per tuple."""
        ...

    def decode(self, payloads: list[bytes]) -> Any:
        """The tuples of the payloads (CodecError if malformed)."""
        ...


class OutputCodec(Protocol):
    """How a target's output of one flow travels: bytes of one public size, whatever the data."""

    @property
    def size(self) -> int:
        """Bytes of every output of the flow."""
        ...

    def encode(self, output: Any) -> bytes:
        """``output`` in `size` bytes."""
        ...

    def decode(self, data: bytes) -> Any:
        """Inverse of `encode` (CodecError if malformed)."""
        ...

    def check(self, output: Any) -> None:
        """Raise (a DpcommError) if ``output`` cannot travel at the public size."""
        ...


class ProgramCodec(Protocol):
    """How a program's tuples, outputs and sources' rows travel in a networked run."""

    def tuples(self, flow: str) -> TupleCodec:
        """The tuples of data flow ``flow``."""
        ...

    def outputs(self, flow: str) -> OutputCodec:
        """The targets' outputs of data flow ``flow``."""
        ...

    @property
    def rows(self) -> TupleCodec:
        """A source's row (what its config carries)."""
        ...


class SourceRows(Protocol):
    """The sources' data, one row per source, read by ranges (a table, points, files)."""

    @property
    def num_rows(self) -> int:
        """S."""
        ...

    def read(self, start: int, stop: int) -> Any:
        """Rows [start, stop), checked against the program (what route and carried take)."""
        ...

    def part(self, start: int, stop: int) -> SourceRows:
        """Rows [start, stop) as rows of their own, cheap to ship to another process."""
        ...


class QueryProgram(ProgramHooks, Protocol):
    """A compiled query: the ten hooks of the roles, its rows, its codec, its description."""

    @property
    def rows(self) -> SourceRows | None:
        """The sources' rows, where the program holds them (None on a node: it has its own)."""
        ...

    @property
    def codec(self) -> ProgramCodec:
        """How its tuples, outputs and rows travel."""
        ...

    def to_spec(self) -> dict[str, Any]:
        """The public description, JSON-ready, with its ``kind`` (see `register_program`)."""
        ...

    def check_countermeasures(self, countermeasures: Countermeasures) -> None:
        """Refuse ``countermeasures`` the program cannot run with (every engine asks).

        An Aggregate's noisy release refuses traffic its noise was not calibrated for.
        """
        ...

    def check_config(self) -> None:
        """Refuse a program rebuilt from a config whose derived code is not its own.

        A node that runs SQL derived from the user's query (an Aggregate's result node) asks
        first: the SQL is derived again from the user's SQL and the schema, through the
        checks of ``run``, and must come out the same.
        """
        ...

    def published(self, state: Any) -> dict[str, Any] | None:
        """What a deployment's result node publishes of the final ``state``, JSON-ready.

        None: the exact result, which ``dpcomm node run`` prints; a noisy release's rows and
        its guarantee otherwise (the noise drawn at the result node).
        """
        ...


@dataclass(frozen=True, eq=False)
class ArrayRows:
    """Sources' rows held as one array (a row per source): points, or any fixed-size values."""

    values: npt.NDArray[Any]

    @property
    def num_rows(self) -> int:
        """S."""
        return int(self.values.shape[0])

    def read(self, start: int, stop: int) -> npt.NDArray[Any]:
        """Rows [start, stop) (the array itself when read whole)."""
        if start == 0 and stop == self.num_rows:
            return self.values
        return self.values[start:stop]

    def part(self, start: int, stop: int) -> ArrayRows:
        """Rows [start, stop) as rows of their own (only they are shipped)."""
        return ArrayRows(self.values[start:stop])


def num_sources(program: ProgramHooks) -> int:
    """S, the sources of ``program`` (the nodes of the group that holds the data)."""
    holders = program.plan.data_holders
    return holders[0].count if holders else 0


def largest_tuple(program: QueryProgram) -> int:
    """Bytes of the largest encoded tuple over the flows (every payload is padded to it)."""
    return max(program.codec.tuples(flow).size for flows in program.stages for flow in flows)


def source_rows(program: QueryProgram) -> Any:
    """Every source's row (only where the program holds them: the driver)."""
    if program.rows is None:
        raise InvalidParameterError("rows", "a program with the sources' rows", None)
    return program.rows.read(0, program.rows.num_rows)


# --------------------------------------------------------------------------- the registry

ProgramClass = TypeVar("ProgramClass", bound=type)
_REGISTRY: dict[str, Callable[[Mapping[str, Any]], QueryProgram]] = {}
#: The module that registered each kind (a spec must name it).
_MODULES: dict[str, str] = {}


#: dpcomm's own programs: each kind and the module that registers it. A spec of one of these
#: kinds names that module, and a process that has not registered the kind yet imports it.
PROGRAM_MODULES: Mapping[str, str] = MappingProxyType(
    {"aggregate": "dpcomm.queries.aggregate", "kmeans": "dpcomm.queries.kmeans"}
)


def register_program(kind: str) -> Callable[[ProgramClass], ProgramClass]:
    """Class decorator: programs of ``kind`` are rebuilt by the class's ``from_spec``.

    One of dpcomm's own kinds (`PROGRAM_MODULES`) only from its own module; another kind (a
    program of the user's, e.g. ``examples/custom_plan.py``) from the module that defines
    it, in the processes that import that module: a spec never makes a process import
    anything but dpcomm's own programs (`program_from_spec`).
    """

    def register(cls: ProgramClass) -> ProgramClass:
        own = PROGRAM_MODULES.get(kind)
        if own is not None and own != cls.__module__:
            raise InvalidParameterError(
                "program kind", f"a kind other than dpcomm's own {kind!r} ({own})", kind
            )
        _REGISTRY[kind] = cls.from_spec  # type: ignore[attr-defined]
        _MODULES[kind] = cls.__module__
        return cls

    return register


def spec_header(kind: str, cls: type) -> dict[str, Any]:
    """The first entries of a program's spec: its ``kind`` and the module that registers it."""
    return {"kind": kind, "module": cls.__module__}


def program_from_spec(spec: Mapping[str, Any]) -> QueryProgram:
    """The public program described by ``spec`` (from `QueryProgram.to_spec`).

    Only a registered kind: one of dpcomm's own (`PROGRAM_MODULES`: its module imported if this
    process has not registered it yet), or one this process registered itself. The module a
    spec names must be the registered one; it is never imported otherwise.
    """
    kind = spec.get("kind")
    module = spec.get("module")
    if isinstance(kind, str) and kind not in _REGISTRY and kind in PROGRAM_MODULES:
        importlib.import_module(PROGRAM_MODULES[kind])
    if not isinstance(kind, str) or kind not in _REGISTRY:
        known = ", ".join(sorted(set(PROGRAM_MODULES) | set(_REGISTRY)))
        raise InvalidParameterError("program kind", f"a registered program ({known})", kind)
    if module is not None and module != _MODULES[kind]:
        raise InvalidParameterError(
            "program module", f"{_MODULES[kind]} (the {kind} program's own)", module
        )
    return _REGISTRY[kind](spec)


def public_program(program: QueryProgram) -> QueryProgram:
    """``program`` without its rows: what every node may know (rebuilt from its spec)."""
    return program_from_spec(program.to_spec())


__all__ = [
    "PROGRAM_MODULES",
    "ArrayRows",
    "BoolArray",
    "IntArray",
    "OutputCodec",
    "ProgramCodec",
    "QueryProgram",
    "Row",
    "SourceRows",
    "TupleCodec",
    "largest_tuple",
    "num_sources",
    "program_from_spec",
    "public_program",
    "register_program",
    "source_rows",
    "spec_header",
]
