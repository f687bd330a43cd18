"""The in-memory engine (the vectorized simulator): every role's step for all its nodes at once.

No Python object is created per node or per message: each data-dependent flow is one call to
each role step of :mod:`dpcomm.protocol.roles` over all its nodes, with the draws every node
would make on its own (:class:`~dpcomm.protocol.randomness.Randomness`). The run records what
the observer sees (messages per sender -> receiver edge, node ids of the transformed plan),
which tuples were counted, and the program's final state and result. With a seed, the run is
the networked runtime's run with the same seed, message for message.

Clusters with a single potential target (an empty grouping set, K = 1) send straight to it: any
countermeasure would cost utility or traffic for no privacy (their pattern is data-independent).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcomm.engine.run import Prepared, Run, in_plan_order, prepare, run_efficiency
from dpcomm.engine.traffic import TrafficLog
from dpcomm.plan.countermeasures import Countermeasure, LocalFlooding, Scramblers
from dpcomm.plan.transform import (
    TransformedPlan,
    flooding_flow_name,
    scrambled_flow_name,
    scrambler_group_name,
    to_scramblers_flow_name,
)
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.protocol.scrambler import ScramblerAssignment
from dpcomm.queries.program import BoolArray, IntArray, QueryProgram


def take(tuples: Any, rows: IntArray, total: int) -> Any:
    """Rows ``rows`` of a program's ``total`` tuples (a table, or an array of points).

    When every row is taken (no sampling), the tuples themselves: no copy.
    """
    if len(rows) == total:
        return tuples
    if isinstance(tuples, np.ndarray):
        return tuples[rows]
    return tuples.take(rows)


def _stages(program: QueryProgram, progress: bool) -> Iterator[int]:
    stages = range(program.num_stages)
    if not progress:
        yield from stages
        return
    from tqdm import tqdm

    yield from tqdm(stages, desc=program.name, unit="stage", leave=False)


@dataclass(frozen=True, eq=False)
class FlowSteps:
    """What the source and scrambler steps of one data-dependent flow produced, for all nodes.

    Attributes:
        messages: the sources' messages (:func:`dpcomm.protocol.roles.source_messages`).
        received: under scramblers, (K, T) messages each scrambler received for each target.
        dummies: under scramblers, (K, T) dummies each scrambler added (Algorithm 1).
    """

    messages: roles.SourceMessages
    received: IntArray | None = None
    dummies: IntArray | None = None


class Simulation:
    """The state of one simulated run (engine-internal; the Dask engine extends it)."""

    def __init__(
        self, program: QueryProgram, transformed: TransformedPlan, randomness: Randomness
    ) -> None:
        self.program = program
        self.transformed = transformed
        self.plan = program.plan
        self.routed = transformed.routed
        self.randomness = randomness
        self.log = TrafficLog()
        self.assignments: dict[str, ScramblerAssignment] = {}
        for flow, sizes in transformed.batches.items():
            # The coordinator's decision, made before any data moves.
            item = transformed.countermeasures[flow]
            assert isinstance(item, Scramblers)
            senders = self.plan.group(self.plan.flow(flow).sender).count
            self.assignments[flow] = roles.assign_batches(senders, batch_size=item.batch_size)
            assert tuple(self.assignments[flow].batch_sizes.tolist()) == sizes

    def ids(self, group: str, count: int | None = None) -> IntArray:
        """Node ids of ``group`` (of the routed plan)."""
        size = self.routed.group(group).count if count is None else count
        return self.routed.node_id_offsets[group] + np.arange(size, dtype=np.int64)

    def flow_steps(self, name: str, truth: IntArray) -> FlowSteps:
        """The source and scrambler steps of one data-dependent flow, for all its nodes at once."""
        flow = self.plan.flow(name)
        targets = self.plan.group(flow.receiver).count
        chosen: Countermeasure = self.transformed.countermeasures[name]
        count = len(truth)
        messages = roles.source_messages(
            truth,
            countermeasure=chosen,
            num_targets=targets,
            randomness=self.randomness,
            flow=name,
            sources=np.arange(count, dtype=np.int64),
        )
        if not isinstance(chosen, Scramblers):
            return FlowSteps(messages)
        assignment = self.assignments[name]
        scramblers = assignment.num_scramblers
        keys = assignment.scrambler_of_source * targets + messages.sent
        received = np.bincount(keys, minlength=scramblers * targets).reshape(-1, targets)
        dummies = roles.scrambler_dummies(
            received,
            assignment.batch_sizes,
            countermeasure=chosen,
            randomness=self.randomness,
            flow=name,
            scramblers=np.arange(scramblers, dtype=np.int64),
        )
        return FlowSteps(messages, received, dummies)

    def send_data_flow(self, name: str, truth: IntArray) -> BoolArray:
        """One data-dependent flow through the source and scrambler steps; the real messages."""
        return self.record(name, self.flow_steps(name, truth))

    def record(self, name: str, steps: FlowSteps) -> BoolArray:
        """Log what the observer sees of one data-dependent flow; its real messages."""
        count = len(steps.messages.sent)
        assignment = self.assignments.get(name)
        record_data_flow(
            self.log,
            self.transformed,
            name,
            steps,
            sources=np.arange(count, dtype=np.int64),
            scramblers=None if assignment is None else np.arange(assignment.num_scramblers),
            scrambler_of_source=None if assignment is None else assignment.scrambler_of_source,
        )
        return np.asarray(steps.messages.is_real, dtype=bool)

    def send_fixed_flows(self) -> None:
        """The data-independent flows: fixed (one message each) and broadcasts."""
        for flow in self.transformed.flows:
            if flow.kind not in (
                "fixed",
                "broadcast",
                "broadcast_to_scramblers",
                "broadcast_from_scramblers",
            ):
                continue
            origin = self.plan.flow(flow.origin)
            senders = self.ids(flow.sender)
            receivers = self.ids(flow.receiver)
            if flow.kind == "fixed":
                self.log.add(
                    flow.name, senders, receivers[np.arange(len(senders)) % len(receivers)]
                )
            elif flow.kind in ("broadcast", "broadcast_to_scramblers"):
                self.log.add(
                    flow.name,
                    np.repeat(senders, len(receivers)),
                    np.tile(receivers, len(senders)),
                )
            else:
                via = next(f for f in self.assignments if scrambler_group_name(f) == flow.sender)
                origin_senders = self.plan.group(origin.sender).count
                self.log.add(
                    flow.name,
                    senders[self.assignments[via].scrambler_of_source],
                    receivers,
                    np.full(len(receivers), origin_senders, dtype=np.int64),
                )


def record_data_flow(
    log: TrafficLog,
    transformed: TransformedPlan,
    name: str,
    steps: FlowSteps,
    *,
    sources: IntArray,
    scramblers: IntArray | None,
    scrambler_of_source: IntArray | None,
) -> None:
    """What the observer sees of one data-dependent flow, for some of its nodes, into ``log``.

    ``sources`` are the global indices of the senders whose messages ``steps`` holds (in that
    order); under scramblers, ``scramblers`` the global indices of the scramblers whose counts
    it holds and ``scrambler_of_source`` each source's scrambler (a global index). The
    in-memory engine records all the nodes at once, the Dask engine a partition at a time.
    """
    plan = transformed.plan
    flow = plan.flow(name)
    offsets = transformed.routed.node_id_offsets
    targets = plan.group(flow.receiver).count
    chosen: Countermeasure = transformed.countermeasures[name]
    messages = steps.messages
    senders = offsets[flow.sender] + sources
    receiver = offsets[flow.receiver]
    sampled_out = int((~messages.is_real).sum())
    if not isinstance(chosen, Scramblers):
        log.add(name, senders, receiver + messages.sent, dummies=sampled_out)
        if isinstance(chosen, LocalFlooding) and chosen.num_dummies:
            flooding = messages.flooding
            log.add(
                flooding_flow_name(name),
                np.repeat(senders, flooding.shape[1]),
                receiver + flooding.ravel(),
                dummies=int(flooding.size),
            )
        return
    assert steps.received is not None and steps.dummies is not None
    assert scramblers is not None and scrambler_of_source is not None
    group = offsets[scrambler_group_name(name)]
    log.add(
        to_scramblers_flow_name(name), senders, group + scrambler_of_source, dummies=sampled_out
    )
    log.add(
        scrambled_flow_name(name),
        np.repeat(group + scramblers, targets),
        np.tile(receiver + np.arange(targets, dtype=np.int64), len(scramblers)),
        (steps.received + steps.dummies).ravel(),
        dummies=int(steps.dummies.sum()) + sampled_out,
    )


def simulate(
    program: QueryProgram,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float | None,
    seed: int | None = None,
    progress: bool = False,
    target_epsilon: float | None = None,
) -> Run:
    """Run ``program`` with ``countermeasures`` in memory (the simulator).

    Args:
        program: a compiled query holding its sources' rows.
        countermeasures: one countermeasure for every data-dependent cluster, or one per
            cluster (or flow) name.
        delta: the whole plan's δ for the privacy report (:func:`dpcomm.plan.account_plan`);
            None: the plan is not accounted (``run.privacy`` is None, as for the non-private
            baseline of a report).
        seed: the same seed gives the same run, in this engine and every other; None draws
            fresh operating-system entropy.
        progress: show a progress bar over the stages.
        target_epsilon: warn when the plan's ε exceeds it.
    """
    started = time.perf_counter()
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
    elsewhere (:mod:`dpcomm.engine.dask_engine`); the targets' outputs are computed here from
    all the delivered tuples, so every engine gets the same outputs, state and result.
    """
    transformed = prepared.transformed
    rows = program.source_rows()
    state = program.initial_state()
    delivered: dict[str, BoolArray] = {}
    routes: dict[str, IntArray] = {}
    for stage in _stages(program, progress):
        outputs: dict[tuple[str, int], Any] = {}
        for name in program.stage_flows(stage):
            truth = np.asarray(program.route(state, name, rows), dtype=np.int64)
            routes[name] = truth
            real = simulation.send_data_flow(name, truth)
            delivered[name] = real
            counted = np.flatnonzero(real)
            targets = program.plan.group(program.plan.flow(name).receiver).count
            tuples = take(program.carried(name, rows), counted, len(real))
            produced = program.target_outputs(
                state, stage, name, tuples, truth[counted], range(targets)
            )
            for output in produced.values():
                program.check_output(name, output)
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
