"""The in-memory engine (the vectorized simulator): every role's step for all its nodes at once.

No Python object is created per node or per message: each data-dependent flow is one call to
each role step of [`dpcomm.protocol.roles`][] over all its nodes, with the draws every node
would make on its own ([`Randomness`][]). The run records what
the observer sees (messages per sender -> receiver edge, node ids of the transformed plan),
which tuples were counted, and the program's final state and result. With a seed, the run is
the networked runtime's run with the same seed, message for message.

Clusters with a single potential target (an empty grouping set, K = 1) send straight to it: any
countermeasure would cost utility or traffic for no privacy (their pattern is data-independent).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from dpcomm.data.table import select_rows
from dpcomm.engine.run import Prepared, Run, in_plan_order, prepare, run_efficiency
from dpcomm.engine.steps import FlowSteps, flow_steps, record_data_flow
from dpcomm.engine.traffic import TrafficLog
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.plan.routes import Routes
from dpcomm.plan.transform import TransformedPlan
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.program import BoolArray, IntArray, QueryProgram, source_rows


def _stages(program: QueryProgram, progress: bool) -> Iterator[int]:
    stages = range(len(program.stages))
    if not progress:
        yield from stages
        return
    from tqdm import tqdm

    yield from tqdm(stages, desc=program.name, unit="stage", leave=False)


class Simulation:
    """The state of one simulated run (engine-internal; the Dask engine extends it)."""

    def __init__(
        self, program: QueryProgram, transformed: TransformedPlan, randomness: Randomness
    ) -> None:
        self.program = program
        self.transformed = transformed
        self.routes = Routes(transformed)
        self.randomness = randomness
        self.log = TrafficLog()

    def flow_steps(self, name: str, truth: IntArray) -> FlowSteps:
        """The source and scrambler steps of one data-dependent flow, for all its nodes at once."""
        sources = np.arange(len(truth), dtype=np.int64)
        return flow_steps(self.routes, self.randomness, name, truth, sources)

    def send_data_flow(self, name: str, truth: IntArray) -> BoolArray:
        """One data-dependent flow through the source and scrambler steps; the real messages."""
        return self.record(self.flow_steps(name, truth))

    def record(self, steps: FlowSteps) -> BoolArray:
        """Log what the observer sees of one data-dependent flow; its real messages."""
        record_data_flow(self.log, self.routes, steps)
        return steps.real

    def send_fixed_flows(self) -> None:
        """The data-independent flows (fixed, broadcasts), as the plan routes them."""
        for flow in self.routes.static_flows:
            edges = self.routes.edges(flow)
            self.log.add(flow.name, edges.senders, edges.receivers, edges.counts)


def simulate(
    program: QueryProgram,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float | None,
    seed: int | None = None,
    progress: bool = False,
    target_epsilon: float | None = None,
    prepared: Prepared | None = None,
) -> Run:
    """Run ``program`` with ``countermeasures`` in memory (the simulator).

    Args:
        program: a compiled query holding its sources' rows.
        countermeasures: one countermeasure for every data-dependent cluster, or one per
            cluster (or flow) name.
        delta: the whole plan's δ for the privacy report (`dpcomm.plan.account_plan`);
            None: the plan is not accounted (``run.privacy`` is None, as for the non-private
            baseline of a report).
        seed: the same seed gives the same run, in this engine and every other; None draws
            fresh operating-system entropy.
        progress: show a progress bar over the stages.
        target_epsilon: refuse (before running) a plan whose ε exceeds it.
        prepared: the plan already prepared with these countermeasures (not prepared again).
    """
    started = time.perf_counter()
    if prepared is None:
        prepared = prepare(program, countermeasures, delta=delta, target_epsilon=target_epsilon)
    simulation = Simulation(program, prepared.transformed, Randomness(seed))
    return run_stages(
        program,
        prepared,
        simulation,
        engine="memory",
        seed=seed,
        progress=progress,
        started=started,
    )


def run_stages(
    program: QueryProgram,
    prepared: Prepared,
    simulation: Simulation,
    *,
    engine: str,
    seed: int | None,
    progress: bool,
    started: float,
) -> Run:
    """Every stage of ``program``: the flows through ``simulation``, then targets and merge.

    ``simulation.flow_steps`` (the source and scrambler steps) is what an engine may run
    elsewhere ([`dpcomm.engine.dask_engine`][]); the targets' outputs are computed here from
    all the delivered tuples, so every engine gets the same outputs, state and result.
    """
    transformed = prepared.transformed
    rows = source_rows(program)
    state = program.initial_state()
    delivered: dict[str, BoolArray] = {}
    routes: dict[str, IntArray] = {}
    for stage in _stages(program, progress):
        outputs: dict[tuple[str, int], Any] = {}
        for name in program.stages[stage]:
            truth = np.asarray(program.route(state, name, rows), dtype=np.int64)
            routes[name] = truth
            real = simulation.send_data_flow(name, truth)
            delivered[name] = real
            counted = np.flatnonzero(real)
            targets = program.plan.group(program.plan.flow(name).receiver).count
            tuples = select_rows(program.carried(name, rows), real)
            step = roles.TargetStep(state, stage, name, range(targets))
            produced = roles.target_outputs(program, step, tuples, truth[counted])
            for output in produced.values():
                program.codec.outputs(name).check(output)
            outputs.update({(name, target): output for target, output in produced.items()})
        state = program.merge(state, stage, outputs)
    simulation.send_fixed_flows()
    traffic = in_plan_order(transformed, simulation.log.flows)
    return Run(
        engine=engine,
        program=program,
        transformed=transformed,
        privacy=prepared.privacy,
        state=state,
        result=program.result(state),
        delivered=delivered,
        traffic=traffic,
        efficiency=run_efficiency(transformed, list(traffic)),
        seed=seed,
        seconds=time.perf_counter() - started,
        true_targets=routes,
    )
