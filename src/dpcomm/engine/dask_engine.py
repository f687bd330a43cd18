"""The Dask engine: the source and scrambler steps of every flow run on a Dask cluster.

The roles are those of :mod:`dpcomm.protocol.roles`, called with the nodes' global indices, so
that every node draws what it draws in the in-memory engine
(:class:`~dpcomm.protocol.randomness.Randomness`): with the same seed the run is the memory
engine's run, message for message, whatever the number of partitions.

A *partition* of a flow protected by scramblers is a contiguous range of whole scramblers and
the sources the coordinator assigned to them (the assignment is data-independent and drawn
first, on the client); a partition of any other flow is a contiguous range of sources. One task
per partition runs the source step and, under scramblers, counts what each of its scramblers
received and runs the scrambler step. The client gathers the partitions' messages, dummies and
counts in plan order and records what the observer sees exactly as the memory engine does.

First milestone (docs/dask-engine.md): routing (the program's ``route``) and the targets'
outputs run on the client, over all the rows, as in :func:`dpcomm.engine.memory.simulate`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcomm.engine.memory import FlowSteps, Simulation, run_stages
from dpcomm.engine.run import Run, prepare
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, LocalFlooding, Scramblers
from dpcomm.plan.transform import TransformedPlan
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.program import IntArray, QueryProgram

if TYPE_CHECKING:
    from distributed import Client


@dataclass(frozen=True, eq=False)
class PartitionTask:
    """What one partition of one flow gets: its nodes' global indices and true targets.

    Attributes:
        flow: the data-dependent flow.
        countermeasure: the flow's countermeasure.
        num_targets: T, the flow's receivers.
        sources: global indices (in the flow's sender group) of the partition's sources, sorted.
        truth: the true target of each of ``sources``.
        scramblers: under scramblers, global indices of the partition's scramblers (a range).
        scrambler_of_source: under scramblers, each source's scrambler, as a position in
            ``scramblers``.
        batch_sizes: under scramblers, the batch size of each of ``scramblers``.
    """

    flow: str
    countermeasure: Countermeasure
    num_targets: int
    sources: IntArray
    truth: IntArray
    scramblers: IntArray | None = None
    scrambler_of_source: IntArray | None = None
    batch_sizes: IntArray | None = None


def partition_steps(task: PartitionTask, randomness: Randomness) -> FlowSteps:
    """The source and scrambler steps of one partition (runs on a worker).

    The same role calls as :meth:`dpcomm.engine.memory.Simulation.flow_steps`, for the
    partition's nodes only, under their global indices.
    """
    messages = roles.source_messages(
        task.truth,
        countermeasure=task.countermeasure,
        num_targets=task.num_targets,
        randomness=randomness,
        flow=task.flow,
        sources=task.sources,
    )
    if not isinstance(task.countermeasure, Scramblers):
        return FlowSteps(messages)
    assert task.scramblers is not None and task.scrambler_of_source is not None
    assert task.batch_sizes is not None
    targets = task.num_targets
    count = len(task.scramblers)
    keys = task.scrambler_of_source * targets + messages.sent
    received = np.bincount(keys, minlength=count * targets).reshape(-1, targets)
    dummies = roles.scrambler_dummies(
        received,
        task.batch_sizes,
        countermeasure=task.countermeasure,
        randomness=randomness,
        flow=task.flow,
        scramblers=task.scramblers,
    )
    return FlowSteps(messages, received, dummies)


def partition_tasks(
    name: str,
    truth: IntArray,
    *,
    countermeasure: Countermeasure,
    num_targets: int,
    scrambler_of_source: IntArray | None,
    batch_sizes: IntArray | None,
    partitions: int,
) -> list[PartitionTask]:
    """The partitions of one flow: ranges of whole scramblers, or of sources without them."""
    count = len(truth)
    if not isinstance(countermeasure, Scramblers):
        ranges = np.array_split(np.arange(count, dtype=np.int64), min(partitions, count))
        return [
            PartitionTask(name, countermeasure, num_targets, part, truth[part])
            for part in ranges
            if part.size
        ]
    assert scrambler_of_source is not None and batch_sizes is not None
    scramblers = len(batch_sizes)
    tasks = []
    for part in np.array_split(np.arange(scramblers, dtype=np.int64), min(partitions, scramblers)):
        if not part.size:
            continue
        low, high = int(part[0]), int(part[-1]) + 1
        sources = np.flatnonzero(
            (scrambler_of_source >= low) & (scrambler_of_source < high)
        ).astype(np.int64)
        tasks.append(
            PartitionTask(
                name,
                countermeasure,
                num_targets,
                sources,
                truth[sources],
                scramblers=part,
                scrambler_of_source=scrambler_of_source[sources] - low,
                batch_sizes=batch_sizes[low:high],
            )
        )
    return tasks


def gather_steps(tasks: list[PartitionTask], results: list[FlowSteps], count: int) -> FlowSteps:
    """The partitions' steps as the steps of the whole flow (sources in index order)."""
    sent = np.empty(count, dtype=np.int64)
    real = np.empty(count, dtype=bool)
    width = results[0].messages.flooding.shape[1]
    flooding = np.empty((count, width), dtype=np.int64)
    for task, steps in zip(tasks, results, strict=True):
        sent[task.sources] = steps.messages.sent
        real[task.sources] = steps.messages.is_real
        flooding[task.sources] = steps.messages.flooding
    messages = roles.SourceMessages(sent=sent, is_real=real, flooding=flooding)
    if results[0].received is None:
        return FlowSteps(messages)
    # Partitions are consecutive ranges of scramblers: their rows, in order.
    received = np.concatenate([steps.received for steps in results if steps.received is not None])
    dummies = np.concatenate([steps.dummies for steps in results if steps.dummies is not None])
    return FlowSteps(messages, received, dummies)


class DaskSimulation(Simulation):
    """A run whose source and scrambler steps are Dask tasks, one per partition."""

    def __init__(
        self,
        program: QueryProgram,
        transformed: TransformedPlan,
        randomness: Randomness,
        *,
        client: Client,
        partitions: int,
    ) -> None:
        super().__init__(program, transformed, randomness)
        self.client = client
        self.partitions = partitions

    def flow_steps(self, name: str, truth: IntArray) -> FlowSteps:
        """The source and scrambler steps of one flow, partition by partition, on the cluster."""
        flow = self.plan.flow(name)
        targets = self.plan.group(flow.receiver).count
        chosen: Countermeasure = self.transformed.countermeasures[name]
        assignment = self.assignments.get(name)
        tasks = partition_tasks(
            name,
            truth,
            countermeasure=chosen,
            num_targets=targets,
            scrambler_of_source=None if assignment is None else assignment.scrambler_of_source,
            batch_sizes=None if assignment is None else assignment.batch_sizes,
            partitions=self.partitions,
        )
        # Without a seed, keys are drawn on first use: draw them here, once for every copy.
        streams = [roles.sample_stream(name)]
        if isinstance(chosen, LocalFlooding) and chosen.num_dummies:
            streams.append(roles.flood_stream(name, targets))
        if isinstance(chosen, Scramblers):
            streams.append(roles.dummies_stream(name, chosen.num_dummies))
        self.randomness.derive(*streams)
        scattered = self.client.scatter(tasks)
        futures = [
            self.client.submit(partition_steps, task, self.randomness, pure=False)
            for task in scattered
        ]
        results: list[FlowSteps] = self.client.gather(futures)
        return gather_steps(tasks, results, len(truth))


@contextmanager
def _connected(client: Client | None, scheduler: str | None, workers: int) -> Iterator[Client]:
    """``client``, a client of ``scheduler``, or one of a LocalCluster closed on exit."""
    from distributed import Client, LocalCluster

    if client is not None:
        yield client
        return
    if scheduler is not None:
        with Client(scheduler) as connected:
            yield connected
        return
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as local,
    ):
        yield local


class DaskEngine:
    """The source and scrambler steps on a Dask cluster; the same :class:`Run` as ``simulate``.

    Args:
        client: a connected ``distributed.Client`` (kept open).
        scheduler: the address of a running scheduler (``tcp://HOST:PORT``), when no client.
        partitions: partitions per flow (default: the cluster's workers); the run does not
            depend on it.
        workers: workers of the ``LocalCluster`` started for each run when neither a client
            nor a scheduler is given.
    """

    name = "dask"

    def __init__(
        self,
        client: Client | None = None,
        *,
        scheduler: str | None = None,
        partitions: int | None = None,
        workers: int = 2,
    ) -> None:
        if client is not None and scheduler is not None:
            raise InvalidParameterError("scheduler", "None when a client is given", scheduler)
        if partitions is not None and (isinstance(partitions, bool) or partitions < 1):
            raise InvalidParameterError("partitions", "an integer >= 1 or None", partitions)
        if isinstance(workers, bool) or workers < 1:
            raise InvalidParameterError("workers", "an integer >= 1", workers)
        self.client = client
        self.scheduler = scheduler
        self.partitions = partitions
        self.workers = workers

    def execute(
        self,
        program: QueryProgram,
        countermeasures: Countermeasure | Mapping[str, Countermeasure],
        *,
        delta: float,
        seed: int | None = None,
        progress: bool = False,
        target_epsilon: float | None = None,
    ) -> Run:
        """Run ``program`` with ``countermeasures`` (arguments of :func:`simulate`)."""
        started = time.perf_counter()
        prepared = prepare(program, countermeasures, delta=delta, target_epsilon=target_epsilon)
        with _connected(self.client, self.scheduler, self.workers) as client:
            partitions = self.partitions or max(1, len(client.scheduler_info()["workers"]))
            simulation = DaskSimulation(
                program,
                prepared.transformed,
                Randomness(seed),
                client=client,
                partitions=partitions,
            )
            run = run_stages(
                program,
                prepared,
                simulation,
                engine=self.name,
                seed=seed,
                progress=progress,
                started=started,
            )
        details: dict[str, Any] = {"partitions": partitions}
        run.details.update(details)
        return run
