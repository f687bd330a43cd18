"""What a compiled query gives an engine: a plan, the data-chosen targets, the node computations.

An engine (the simulator, or the networked runtime) runs a program stage by stage. In each
stage every data-dependent flow of the stage sends one message per source to the target its
data chooses (:meth:`QueryProgram.true_targets`); the countermeasures of the protocol layer
decide what is actually sent; the compute nodes then receive the real messages that reached
them (:meth:`QueryProgram.compute`). Programs are immutable: the evolving state (K-means
centroids, the delivered tuples of an Aggregate) is passed in and returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpcomm.plan.model import ExecutionPlan

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class QueryProgram(Protocol):
    """A compiled query, ready to be executed by an engine."""

    @property
    def plan(self) -> ExecutionPlan:
        """The execution plan (without countermeasure nodes)."""
        ...

    @property
    def name(self) -> str:
        """Short description for reports."""
        ...

    @property
    def num_stages(self) -> int:
        """Number of stages (1 for Aggregate, I for K-means)."""
        ...

    def stage_flows(self, stage: int) -> tuple[str, ...]:
        """Names of the data-dependent flows sent in ``stage`` (0-based)."""
        ...

    def initial_state(self) -> Any:
        """The state before the first stage."""
        ...

    def true_targets(self, state: Any, flow: str) -> IntArray:
        """For each sender of ``flow``, the index of the receiver its data chooses."""
        ...

    def compute(self, state: Any, stage: int, delivered: Mapping[str, BoolArray]) -> Any:
        """The compute nodes' work for ``stage``; returns the next state.

        ``delivered[flow]`` marks the senders whose real message reached its true target.
        """
        ...
