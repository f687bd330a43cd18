"""What a compiled query gives an engine: the hooks of :class:`dpcomm.protocol.roles.ProgramHooks`.

An engine runs a program stage by stage through the role steps of :mod:`dpcomm.protocol.roles`:
in each stage every data-dependent flow of the stage sends one message per source to the target
its data chooses (:meth:`~dpcomm.protocol.roles.ProgramHooks.route`); the countermeasures decide
what is actually sent; the targets compute their outputs from the real tuples that reached them
(:meth:`~dpcomm.protocol.roles.ProgramHooks.target_outputs`, or in parts: picklable partials of
disjoint subsets of the tuples, :meth:`~dpcomm.protocol.roles.ProgramHooks.target_partials`,
combined into exactly the same outputs by
:meth:`~dpcomm.protocol.roles.ProgramHooks.combine_partials`); the outputs are merged into the
next state (:meth:`~dpcomm.protocol.roles.ProgramHooks.merge`). Programs are immutable: the
evolving state is passed in and returned. The Aggregate and K-means programs also say how their
tuples and outputs travel in a networked run (:mod:`dpcomm.queries.codec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpcomm.protocol.roles import ProgramHooks

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Row = dict[str, Any]


class TupleCodec(Protocol):
    """How the tuples of one flow travel: one fixed-size payload per tuple."""

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


class QueryProgram(ProgramHooks, Protocol):
    """A compiled query: the role hooks, its public description and its wire encodings."""

    @property
    def num_sources(self) -> int:
        """S, the number of source nodes."""
        ...

    def source_rows(self) -> Any:
        """The sources' rows (only on the side that holds the data: the driver)."""
        ...

    def public(self) -> QueryProgram:
        """The same program without the rows (what every node may know)."""
        ...

    def to_spec(self) -> dict[str, Any]:
        """The public description, JSON-ready (``program_from_spec`` rebuilds it)."""
        ...

    def tuple_codec(self, flow: str) -> TupleCodec:
        """How the tuples of ``flow`` travel."""
        ...

    def tuple_size(self) -> int:
        """The largest encoded tuple over the flows."""
        ...

    def encode_rows(self, indices: Sequence[int]) -> list[str]:
        """Source rows ``indices`` as text (a source node's config carries its own)."""
        ...

    def decode_rows(self, encoded: Sequence[str]) -> Any:
        """Inverse of :meth:`encode_rows`."""
        ...

    def encode_output(self, flow: str, output: Any) -> bytes:
        """A target's output of ``flow`` as bytes of a length that depends on ``flow`` only."""
        ...

    def output_size(self, flow: str) -> int:
        """Bytes of every output of ``flow``: one public size, whatever the data."""
        ...

    def check_output(self, flow: str, output: Any) -> None:
        """Raise (a DpcommError) if ``output`` cannot travel at the public size of ``flow``."""
        ...

    def decode_output(self, flow: str, data: bytes) -> Any:
        """Inverse of :meth:`encode_output` (CodecError if malformed)."""
        ...


def program_from_spec(spec: dict[str, Any]) -> QueryProgram:
    """The public program described by ``spec`` (from :meth:`QueryProgram.to_spec`)."""
    kind = spec.get("kind")
    if kind == "aggregate":
        from dpcomm.queries.aggregate import AggregateProgram

        return AggregateProgram.from_spec(spec)
    if kind == "kmeans":
        from dpcomm.queries.kmeans import KMeansProgram

        return KMeansProgram.from_spec(spec)
    from dpcomm.errors import InvalidParameterError

    raise InvalidParameterError("program kind", "aggregate or kmeans", kind)


__all__ = ["BoolArray", "IntArray", "QueryProgram", "Row", "TupleCodec", "program_from_spec"]
