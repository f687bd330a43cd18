"""The Dask engine: the roles of every partition of sources run as tasks on a Dask cluster.

The sources are cut into partitions of consecutive rows that hold whole scramblers
(:func:`dpcomm.engine.partition.partition_cuts`); per stage, one task per partition reads its
rows (from the program's table, or from a :class:`~dpcomm.data.partitioned.RowSource` such as
Parquet files or synthetic rows generated on the worker), routes them, runs the source and
scrambler steps under the nodes' global indices and the targets' partial outputs
(:func:`dpcomm.engine.partition.run_stage_part`). The client combines the partials into the
targets' outputs (:meth:`~dpcomm.protocol.roles.ProgramHooks.combine_partials`), merges the
state, and sums what the observer sees. With the same seed the run is the in-memory engine's:
the same result, delivered tuples, traffic per flow and privacy report, whatever the number of
partitions or workers.

A small run (``collect_traffic``, by default up to a million sources) also gathers every
partition's messages and records the traffic edge by edge as the in-memory engine does; a
larger one keeps the edges on the workers and reports each flow's messages, dummies, edges and
an order-free digest of its edges (:class:`~dpcomm.engine.traffic.FlowSummary`), and the
channels per node reduced across partitions (:func:`dpcomm.engine.partition.reduce_efficiency`).
"""

from __future__ import annotations

import logging
import operator
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, Unpack

import numpy as np
import numpy.typing as npt

from dpcomm.engine.memory import Simulation
from dpcomm.engine.partition import (
    Channels,
    FlowPart,
    Observed,
    Partition,
    RunContext,
    central_channels,
    partition_channels,
    partition_cuts,
    reduce_efficiency,
    run_stage_part,
)
from dpcomm.engine.run import (
    PackedMasks,
    Run,
    RunOptions,
    in_plan_order,
    prepare,
    run_efficiency,
)
from dpcomm.engine.steps import FlowSteps
from dpcomm.engine.traffic import FlowSummary, FlowTraffic
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import (
    Countermeasures,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.program import QueryProgram, SourceRows, num_sources, public_program

if TYPE_CHECKING:
    from distributed import Client, Future

#: Up to this many sources a run gathers its traffic edge by edge (``collect_traffic=None``).
COLLECT_LIMIT = 1_000_000
#: Sources per partition a run aims at when the number of partitions is not given.
PARTITION_ROWS = 500_000
#: The environment variable with a default scheduler address (as Dask's own tools read it).
SCHEDULER_VARIABLE = "DASK_SCHEDULER_ADDRESS"


def read_rows(rows: SourceRows) -> Any:
    """Every row of a partition's rows (runs on a worker; checked against the program)."""
    return rows.read(0, rows.num_rows)


def _stage_task(
    context: RunContext, partition: Partition, rows: Any, state: Any, stage: int
) -> tuple[list[FlowPart], list[Observed]]:
    """One partition's stage: the role steps over its rows."""
    return run_stage_part(context, partition, rows, state, stage)


def _channels_task(
    context: RunContext, partition: Partition, *observed: list[Observed]
) -> Channels:
    """One partition's channels over the whole run (what each of its stages kept)."""
    return partition_channels(context, partition, [item for items in observed for item in items])


@contextmanager
def _connected(
    client: Client | None, scheduler: str | None, workers: int | None
) -> Iterator[Client]:
    """``client``, a client of ``scheduler``, or one of a LocalCluster closed on exit."""
    from distributed import Client, LocalCluster

    if client is not None:
        yield client
        return
    if scheduler is not None:
        with Client(scheduler) as connected:
            yield connected
        return
    count = workers if workers is not None else max(1, os.cpu_count() or 1)
    # The workers' own logs stay quiet: a task's error reaches the client as itself (one
    # line from the CLI), not also as a worker's "Compute Failed" report on stderr.
    with (
        LocalCluster(
            n_workers=count,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as local,
    ):
        yield local


@dataclass(frozen=True)
class DaskDetails:
    """What a Dask run adds to its report: its partitions, workers and how traffic was kept."""

    partitions: int
    workers: int
    traffic: str

    def to_dict(self) -> dict[str, Any]:
        """``{"partitions", "workers", "traffic"}``, merged into the run's report."""
        return {"partitions": self.partitions, "workers": self.workers, "traffic": self.traffic}


class DaskEngine:
    """The roles on a Dask cluster; the same :class:`~dpcomm.engine.run.Run` as ``simulate``.

    Args:
        client: a connected ``distributed.Client`` (kept open).
        scheduler: the address of a running scheduler (``tcp://HOST:PORT``) when no client;
            default: the ``DASK_SCHEDULER_ADDRESS`` environment variable, else a LocalCluster.
        partitions: partitions of the sources (default: one per 500,000 sources, at least
            one per worker); the run does not depend on it.
        workers: workers of the LocalCluster started for a run without client or scheduler
            (default: one per core).
        collect_traffic: gather every edge (True), keep them on the workers and report
            summaries (False), or decide by size (None: up to 1,000,000 sources).
        progress_stream: where the progress bar and the dashboard address go (stderr).
    """

    name = "dask"
    reads_row_sources = True

    def __init__(
        self,
        client: Client | None = None,
        *,
        scheduler: str | None = None,
        partitions: int | None = None,
        workers: int | None = None,
        collect_traffic: bool | None = None,
        progress_stream: TextIO | None = None,
    ) -> None:
        if client is not None and scheduler is not None:
            raise InvalidParameterError("scheduler", "None when a client is given", scheduler)
        if partitions is not None and (
            isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
        ):
            raise InvalidParameterError("partitions", "an integer >= 1 or None", partitions)
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise InvalidParameterError("workers", "an integer >= 1 or None", workers)
        if scheduler is None and client is None:
            scheduler = os.environ.get(SCHEDULER_VARIABLE) or None
            if scheduler is not None and workers is not None:
                scheduler = None  # --workers asks for a LocalCluster
        self.client = client
        self.scheduler = scheduler
        self.partitions = partitions
        self.workers = workers
        self.collect_traffic = collect_traffic
        self.progress_stream = progress_stream

    def baseline(self, program: QueryProgram, *, seed: int | None = None) -> Run:
        """``program`` without countermeasures, not accounted, on this cluster.

        The non-private baseline of a report runs here too: the rows may not fit in memory.
        """
        return self.execute(program, NoCountermeasure(), delta=None, seed=seed)

    def execute(
        self, program: QueryProgram, countermeasures: Countermeasures, **options: Unpack[RunOptions]
    ) -> Run:
        """Run ``program`` with ``countermeasures`` (the options of ``simulate``)."""
        started = time.perf_counter()
        seed, progress = options.get("seed"), options.get("progress", False)
        prepared = prepare(
            program,
            countermeasures,
            delta=options["delta"],
            target_epsilon=options.get("target_epsilon"),
        )
        with _connected(self.client, self.scheduler, self.workers) as client:
            executor = _Execution(self, client, program, prepared.transformed, seed, progress)
            state, delivered, traffic, efficiency = executor.run()
            details = executor.details()
        return Run(
            engine=self.name,
            program=program,
            transformed=prepared.transformed,
            privacy=prepared.privacy,
            state=state,
            result=program.result(state),
            delivered=delivered,
            traffic=traffic,
            efficiency=efficiency,
            seed=seed,
            seconds=time.perf_counter() - started,
            details=details,
        )


class _Execution:
    """One run on one cluster (engine-internal)."""

    def __init__(
        self,
        engine: DaskEngine,
        client: Client,
        program: QueryProgram,
        transformed: Any,
        seed: int | None,
        progress: bool,
    ) -> None:
        self.engine = engine
        self.client = client
        self.program = program
        self.transformed = transformed
        self.progress = progress
        self.num_sources = num_sources(program)
        self.collect = (
            self.num_sources <= COLLECT_LIMIT
            if engine.collect_traffic is None
            else bool(engine.collect_traffic)
        )
        self.randomness = Randomness(seed)
        streams = []
        for name, chosen in transformed.countermeasures.items():
            targets = transformed.plan.group(transformed.plan.flow(name).receiver).count
            streams.append(roles.sample_stream(name))
            if isinstance(chosen, LocalFlooding) and chosen.num_dummies:
                streams.append(roles.flood_stream(name, targets))
            if isinstance(chosen, Scramblers):
                streams.append(roles.dummies_stream(name, chosen.num_dummies))
        # Without a seed, keys are drawn on first use: draw them here, once for every copy.
        self.randomness.derive(*streams)
        self.context = RunContext(
            public_program(program), transformed, self.randomness, self.collect
        )
        workers = max(1, len(client.scheduler_info()["workers"]))
        wanted = engine.partitions or max(workers, -(-self.num_sources // PARTITION_ROWS))
        self.partitions = partition_cuts(self.context.routes, self.num_sources, wanted)
        self.workers = workers

    def details(self) -> DaskDetails:
        """What the report says of this engine's run."""
        return DaskDetails(
            partitions=len(self.partitions),
            workers=self.workers,
            traffic="edges" if self.collect else "summaries (edges kept on the workers)",
        )

    def _rows(self) -> list[Future[Any]]:
        """Per partition, its rows read on a worker once (kept there for every stage)."""
        rows = self.program.rows
        if rows is None:
            raise InvalidParameterError("program", "a program with its sources' rows", None)
        parts = [rows.part(p.start, p.stop) for p in self.partitions]
        shipped = self.client.scatter(parts, hash=False)
        return [self.client.submit(read_rows, part, pure=False) for part in shipped]

    def _bar(self, total: int) -> Any:
        if not self.progress:
            return None
        from tqdm import tqdm

        stream = self.engine.progress_stream or sys.stderr
        link = getattr(self.client, "dashboard_link", None)
        if link:
            print(f"Dask dashboard: {link}", file=stream)
        return tqdm(total=total, desc=self.program.name, unit="partition", file=stream)

    def run(
        self,
    ) -> tuple[Any, PackedMasks, tuple[FlowTraffic | FlowSummary, ...], Any]:
        """Every stage, then the traffic and the channels."""
        from distributed import as_completed

        client, program, context = self.client, self.program, self.context
        [shared] = client.scatter([context], broadcast=True, hash=False)
        rows = self._rows()
        state = program.initial_state()
        delivered = PackedMasks()
        summaries: dict[str, FlowSummary] = {}
        steps: dict[str, list[FlowSteps]] = {}
        kept: list[list[Future[Any]]] = [[] for _ in self.partitions]
        bar = self._bar(len(program.stages) * len(self.partitions))
        try:
            for stage in range(len(program.stages)):
                futures = [
                    client.submit(
                        _stage_task, shared, partition, rows[index], state, stage, pure=False
                    )
                    for index, partition in enumerate(self.partitions)
                ]
                small = [client.submit(operator.getitem, f, 0, pure=False) for f in futures]
                for index, future in enumerate(futures):
                    kept[index].append(client.submit(operator.getitem, future, 1, pure=False))
                position = {future.key: index for index, future in enumerate(small)}
                parts: list[list[FlowPart]] = [[] for _ in self.partitions]
                for future in as_completed(small):
                    parts[position[future.key]] = future.result()
                    future.release()
                    if bar is not None:
                        bar.update(1)
                del futures
                outputs: dict[tuple[str, int], Any] = {}
                for flow_index, name in enumerate(program.stages[stage]):
                    flow_parts = [p[flow_index] for p in parts]
                    step = roles.TargetStep(
                        state, stage, name, range(context.routes.num_targets(name))
                    )
                    produced = program.combine_partials(step, [p.partials for p in flow_parts])
                    for output in produced.values():
                        program.codec.outputs(name).check(output)
                    outputs.update({(name, t): output for t, output in produced.items()})
                    delivered.add(name, self._join(flow_parts), self.num_sources)
                    for part in flow_parts:
                        for item in part.traffic:
                            previous = summaries.get(item.flow)
                            summaries[item.flow] = item if previous is None else previous + item
                    if self.collect:
                        steps[name] = [p.steps for p in flow_parts if p.steps is not None]
                state = program.merge(state, stage, outputs)
        finally:
            if bar is not None:
                bar.close()
        for future in rows:
            future.release()
        if self.collect:
            traffic, efficiency = self._collected(steps)
            return state, delivered, traffic, efficiency
        channels = client.gather(
            [
                client.submit(_channels_task, shared, partition, *kept[index], pure=False)
                for index, partition in enumerate(self.partitions)
            ]
        )
        _, _, central = central_channels(context)
        for item in [*central, *(s for part in channels for s in part.traffic)]:
            previous = summaries.get(item.flow)
            summaries[item.flow] = item if previous is None else previous + item
        ordered = in_plan_order(self.transformed, list(summaries.values()))
        efficiency = reduce_efficiency(context, channels, list(ordered))
        return state, delivered, ordered, efficiency

    def _join(self, parts: Sequence[FlowPart]) -> npt.NDArray[np.uint8]:
        """The packed delivered mask of a flow from its partitions' (in source order).

        Partitions need not start on a byte: the bits left over from one partition are
        carried into the next, so memory stays that of one partition.
        """
        joined = np.empty(-(-self.num_sources // 8), dtype=np.uint8)
        carry = np.zeros(0, dtype=np.uint8)
        written = 0
        for partition, part in zip(self.partitions, parts, strict=True):
            bits = np.concatenate([carry, np.unpackbits(part.delivered, count=partition.size)])
            whole = len(bits) // 8 * 8
            packed = np.packbits(bits[:whole])
            joined[written : written + len(packed)] = packed
            written += len(packed)
            carry = bits[whole:]
        if len(carry):
            joined[written] = np.packbits(carry)[0]
        return joined

    def _collected(
        self, steps: dict[str, list[FlowSteps]]
    ) -> tuple[tuple[FlowTraffic | FlowSummary, ...], Any]:
        """The traffic edge by edge, recorded as the in-memory engine records it."""
        simulation = Simulation(self.program, self.transformed, self.randomness)
        for name, pieces in steps.items():
            simulation.record(_joined_steps(name, pieces))
        simulation.send_fixed_flows()
        traffic = in_plan_order(self.transformed, simulation.log.flows)
        return tuple(traffic), run_efficiency(self.transformed, list(traffic))


def _joined_steps(flow: str, pieces: Sequence[FlowSteps]) -> FlowSteps:
    """The steps of ``flow`` for all sources, from its partitions' (in source order)."""

    def joined(arrays: Sequence[Any]) -> Any:
        return None if arrays[0] is None else np.concatenate(arrays)

    messages = roles.SourceMessages(
        sent=np.concatenate([p.messages.sent for p in pieces]),
        is_real=np.concatenate([p.messages.is_real for p in pieces]),
        flooding=np.concatenate([p.messages.flooding for p in pieces]),
    )
    return FlowSteps(
        flow,
        np.concatenate([p.sources for p in pieces]),
        messages,
        joined([p.scramblers for p in pieces]),
        joined([p.received for p in pieces]),
        joined([p.dummies for p in pieces]),
    )
