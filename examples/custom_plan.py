"""Worked example 2: a decentralized computation of your own, not SQL.

Each of 2,000 phones knows which of 40 bus lines its owner takes most. Line ℓ is counted by
compute node ℓ mod 8 (8 compute nodes), which sends its counts to a result node. Which node a
phone talks to depends on its line: an observer of the traffic learns the line. This example
writes the computation as an execution plan and a query program (the ten hooks of
``dpcomm.protocol.roles.ProgramHooks``, its rows and its codec), runs it with and without
scramblers in the in-memory engine and in the network engine (nodes exchanging sealed
messages), and reads the guarantee of the plan.

Run: python examples/custom_plan.py
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcomm.engine.memory import simulate
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup
from dpcomm.protocol.roles import TargetStep
from dpcomm.queries.codec import ArrayCodec, ArrayOutputCodec, UniformCodec
from dpcomm.queries.program import ArrayRows, register_program, spec_header

LINES = 40
COMPUTE_NODES = 8


@register_program("bus-lines")
@dataclass(frozen=True, eq=False)
class BusLines:
    """Count the phones per bus line: one data-dependent flow, one fixed flow to the result."""

    lines: np.ndarray | None  # each phone's line (the sources' data; None on a node)
    phones: int
    name = "bus lines per phone"
    stages = (("lines",),)  # one stage sends the only data-dependent flow
    codec = UniformCodec(  # a line travels as one int64, a counter's output as 40
        ArrayCodec((), "int64"),
        ArrayOutputCodec(ArrayCodec((LINES,), "int64")),
        ArrayCodec((), "int64"),
    )

    @property
    def plan(self) -> ExecutionPlan:
        """Who may talk to whom: phones -> counters (data-dependent), counters -> result."""
        return ExecutionPlan(
            (
                NodeGroup("phones", "source", self.phones, holds_data=True),
                NodeGroup("counters", "compute", COMPUTE_NODES),
                NodeGroup("result", "result", 1),
            ),
            (
                Flow("lines", "phones", "counters", "data", message_bytes=8),
                Flow("counts", "counters", "result", "fixed", message_bytes=8 * LINES),
            ),
        )

    @property
    def rows(self) -> ArrayRows | None:
        """Every phone's line (only the driver holds them all)."""
        return None if self.lines is None else ArrayRows(self.lines)

    def to_spec(self) -> dict[str, Any]:
        """What every node may know: the number of phones."""
        return {**spec_header("bus-lines", BusLines), "phones": self.phones}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> BusLines:
        """The public program (no lines)."""
        return cls(None, int(spec["phones"]))

    def check_countermeasures(self, countermeasures: Any) -> None:
        """Any countermeasure protects the counts (nothing is released but the result)."""

    def check_config(self) -> None:
        """Nothing a node runs is derived from its config (no SQL): nothing to check."""

    def published(self, state: np.ndarray) -> None:
        """The result node publishes the counts as they are."""
        return None

    def initial_state(self) -> np.ndarray:
        """Nothing counted yet."""
        return np.zeros(LINES, dtype=np.int64)

    def route(self, state: Any, flow: str, rows: np.ndarray) -> np.ndarray:
        """Source step: line ℓ goes to counter ℓ mod 8 (what the observer would learn)."""
        return np.asarray(rows, dtype=np.int64) % COMPUTE_NODES

    def carried(self, flow: str, rows: np.ndarray) -> np.ndarray:
        """A phone's message carries its line."""
        return rows

    def target_partials(self, step: TargetStep, tuples: Any, owners: Any) -> dict[int, Any]:
        """Target step, on some of the tuples: counts per line at each counter."""
        lines = np.asarray(tuples, dtype=np.int64)
        return {t: np.bincount(lines[owners == t], minlength=LINES) for t in step.targets}

    def combine_partials(self, step: TargetStep, partials: Any) -> dict[int, Any]:
        """Counts of disjoint subsets of the tuples add up."""
        return {t: sum((p[t] for p in partials), np.zeros(LINES, np.int64)) for t in step.targets}

    def merge(self, state: np.ndarray, stage: int, outputs: Mapping[Any, np.ndarray]) -> Any:
        """Result step: the counters' outputs added into one histogram."""
        return state + sum(outputs.values(), np.zeros(LINES, np.int64))

    def result(self, state: np.ndarray) -> dict[int, int]:
        """The histogram: phones per line."""
        return {line: int(count) for line, count in enumerate(state)}


def main() -> None:
    """Run the example and check what it prints."""
    lines = np.random.default_rng(1).zipf(1.5, size=2000) % LINES
    program = BusLines(lines, len(lines))
    scramblers = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=20)
    truth = simulate(program, NoCountermeasure(), delta=1e-4, seed=1)
    private = simulate(program, scramblers, delta=1e-4, seed=1)
    guarantee = private.privacy.guarantee
    print(f"without countermeasure: ε = {truth.privacy.guarantee.epsilon}")
    print(f"with scramblers: ε = {guarantee.epsilon:.4f} at δ = {guarantee.delta:g}")
    print(f"messages: {private.efficiency.messages:,} (without: {truth.efficiency.messages:,})")
    busiest = sorted(truth.result, key=truth.result.get, reverse=True)[:3]
    for line in busiest:
        print(f"line {line}: {truth.result[line]} phones, {private.result[line]} counted privately")
    assert sum(truth.result.values()) == len(lines)
    assert sum(private.result.values()) == private.tuples_used()["lines"]
    # The same program, seed and countermeasure over the network engine (nodes exchanging
    # sealed messages through one event loop) give the same run.
    network = NetworkEngine(transport="memory").execute(program, scramblers, delta=1e-4, seed=1)
    assert network.result == private.result
    print(f"network engine: the same counts from {network.efficiency.messages:,} messages")


if __name__ == "__main__":
    main()
