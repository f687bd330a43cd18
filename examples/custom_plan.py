"""Worked example 2: a decentralized computation of your own, not SQL.

Each of 5,000 phones knows which of 40 bus lines its owner takes most. Line ℓ is counted by
compute node ℓ mod 8 (8 compute nodes), which sends its counts to a result node. Which node a
phone talks to depends on its line: an observer of the traffic learns the line. This example
writes the computation as an execution plan and a query program (the hooks of
``dpcomm.protocol.roles.ProgramHooks``), runs it in the in-memory engine with and without
scramblers, and reads the guarantee of the plan.

Run: python examples/custom_plan.py
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcomm.engine.memory import simulate
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup

LINES = 40
COMPUTE_NODES = 8


@dataclass(frozen=True, eq=False)
class BusLines:
    """Count the phones per bus line: one data-dependent flow, one fixed flow to the result."""

    lines: np.ndarray  # each phone's line, 0..LINES-1 (the sources' data)
    name: str = "bus lines per phone"
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # The plan: who may talk to whom (Section 2 of the paper).
    @property
    def plan(self) -> ExecutionPlan:
        """The plan: phones -> counters (data-dependent), counters -> result (fixed)."""
        if "plan" not in self._cache:
            self._cache["plan"] = ExecutionPlan(
                (
                    NodeGroup("phones", "source", len(self.lines), holds_data=True),
                    NodeGroup("counters", "compute", COMPUTE_NODES),
                    NodeGroup("result", "result", 1),
                ),
                (
                    Flow("lines", "phones", "counters", "data", 1, message_bytes=8),
                    Flow("counts", "counters", "result", "fixed", message_bytes=8 * LINES),
                ),
            )
        return self._cache["plan"]

    @property
    def num_sources(self) -> int:
        """S, one phone per source node."""
        return len(self.lines)

    num_stages = 1

    def stage_flows(self, stage: int) -> tuple[str, ...]:
        """The only data-dependent flow."""
        return ("lines",)

    def initial_state(self) -> dict[int, int]:
        """Nothing counted yet."""
        return {}

    def source_rows(self) -> np.ndarray:
        """Every phone's line (the data; only the simulator holds all of it)."""
        return self.lines

    def public(self) -> BusLines:
        """No private part to strip: the lines are only read through the hooks."""
        return self

    # Source step: the target a phone's data chooses, and what its message carries.
    def route(self, state: Any, flow: str, rows: np.ndarray) -> np.ndarray:
        """Source step: line ℓ goes to counter ℓ mod 8 (what the observer would learn)."""
        return np.asarray(rows, dtype=np.int64) % COMPUTE_NODES

    def carried(self, flow: str, rows: np.ndarray) -> np.ndarray:
        """A phone's message carries its line."""
        return rows

    # Target step: counts of the real tuples a counter received (partials add up).
    def target_partials(
        self,
        state: Any,
        stage: int,
        flow: str,
        tuples: np.ndarray,
        owners: np.ndarray,
        targets: Sequence[int],
    ) -> dict[int, np.ndarray]:
        """Target step, on a subset of the tuples: counts per line at each counter."""
        return {
            t: np.bincount(tuples[owners == t], minlength=LINES).astype(np.int64) for t in targets
        }

    def combine_partials(
        self,
        state: Any,
        stage: int,
        flow: str,
        partials: Sequence[Mapping[int, np.ndarray]],
        targets: Sequence[int],
    ) -> dict[int, np.ndarray]:
        """Counts of disjoint subsets add up (what a partitioned engine needs)."""
        return {t: sum((p[t] for p in partials), np.zeros(LINES, np.int64)) for t in targets}

    def target_outputs(
        self,
        state: Any,
        stage: int,
        flow: str,
        tuples: np.ndarray,
        owners: np.ndarray,
        targets: Sequence[int],
    ) -> dict[int, np.ndarray]:
        """Each counter's counts over every real tuple it received."""
        partial = self.target_partials(state, stage, flow, tuples, owners, targets)
        return self.combine_partials(state, stage, flow, [partial], targets)

    def check_output(self, flow: str, output: np.ndarray) -> None:
        """Every output has the same size (LINES counts): nothing to refuse."""

    # Result step: the counters' outputs merged into one histogram.
    def merge(self, state: Any, stage: int, outputs: Mapping[tuple[str, int], Any]) -> Any:
        """Result step: the counters' outputs merged into one histogram."""
        totals = np.zeros(LINES, dtype=np.int64)
        for counts in outputs.values():
            totals += counts
        return {line: int(totals[line]) for line in range(LINES)}

    def result(self, state: dict[int, int]) -> dict[int, int]:
        """The histogram: phones per line."""
        return state


def main() -> None:
    """Run the example and check what it prints."""
    rng = np.random.default_rng(1)
    program = BusLines(rng.zipf(1.5, size=5000) % LINES)
    truth = simulate(program, NoCountermeasure(), delta=1e-4, seed=1)
    private = simulate(
        program,
        Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=20),
        delta=1e-4,
        seed=1,
    )
    guarantee = private.privacy.guarantee
    print(f"without countermeasure: ε = {truth.privacy.guarantee.epsilon}")
    print(f"with scramblers: ε = {guarantee.epsilon:.4f} at δ = {guarantee.delta:g}")
    print(f"messages: {private.efficiency.messages:,} (without: {truth.efficiency.messages:,})")
    busiest = sorted(truth.result, key=truth.result.get, reverse=True)[:3]
    for line in busiest:
        print(f"line {line}: {truth.result[line]} phones, {private.result[line]} counted privately")
    assert sum(truth.result.values()) == len(program.lines)
    assert sum(private.result.values()) == private.tuples_used()["lines"]


if __name__ == "__main__":
    main()
