"""Typed node names: the role, the group and the index of every node of a deployed round.

A node's name is its identity: the common name of its certificate, checked on every TLS
connection. Names are written ``coordinator``, ``result``, ``source-<i>``, ``scrambler-<f>-<k>``
(scrambler k of the round's f-th data flow) and ``compute-<g>-<k>`` (node k of the round's g-th
physical group of compute nodes); `NodeName.parse` is their only parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpcomm.errors import InvalidParameterError
from dpcomm.protocol.randomness import ROLES, Role

_PATTERN = re.compile(r"(coordinator|result)|(source)-(\d+)|(scrambler|compute)-(\d+)-(\d+)")


@dataclass(frozen=True, order=True)
class NodeName:
    """The name of one node.

    Attributes:
        role: what the node does.
        group: a scrambler's data flow, a compute node's group (0 for the other roles).
        index: the node's index in its group (0 for the coordinator and the result node).
    """

    role: Role
    group: int = 0
    index: int = 0

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidParameterError("role", f"one of {', '.join(ROLES)}", self.role)
        for label, value in (("group", self.group), ("index", self.index)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidParameterError(f"{label} of a node name", "an integer >= 0", value)

    def __str__(self) -> str:
        if self.role in ("coordinator", "result"):
            return self.role
        if self.role == "source":
            return f"source-{self.index}"
        return f"{self.role}-{self.group}-{self.index}"

    @classmethod
    def parse(cls, text: str) -> NodeName:
        """The name written ``text``; InvalidParameterError if it is not a node name."""
        match = _PATTERN.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidParameterError(
                "node name",
                "coordinator, result, source-<i>, scrambler-<f>-<k> or compute-<g>-<k>",
                text,
            )
        if match.group(1):
            return cls(match.group(1))  # type: ignore[arg-type]
        if match.group(2):
            return cls("source", 0, int(match.group(3)))
        return cls(match.group(4), int(match.group(5)), int(match.group(6)))  # type: ignore[arg-type]

    @classmethod
    def source(cls, index: int) -> NodeName:
        """Source ``index``."""
        return cls("source", 0, index)

    @classmethod
    def scrambler(cls, flow: int, index: int) -> NodeName:
        """Scrambler ``index`` of data flow ``flow``."""
        return cls("scrambler", flow, index)

    @classmethod
    def compute(cls, group: int, index: int) -> NodeName:
        """Compute node ``index`` of compute group ``group``."""
        return cls("compute", group, index)


COORDINATOR = NodeName("coordinator")
RESULT = NodeName("result")
