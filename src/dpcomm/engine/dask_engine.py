"""The Dask engine: the roles of every partition of sources run as tasks on a Dask cluster.

The sources are cut into partitions of consecutive rows that hold whole scramblers
(`dpcomm.engine.partition.partition_cuts`); per stage, one task per partition reads its
rows (from the program's table, or from a
[`RowSource`][dpcomm.data.partitioned.RowSource] such as Parquet files or synthetic rows
generated on the worker), routes them, runs the source and scrambler steps under the nodes'
global indices and the targets' partial outputs (`dpcomm.engine.partition.run_stage_part`).
The client combines the partials into the targets' outputs
([`combine_partials`][dpcomm.protocol.roles.ProgramHooks.combine_partials]), merges the
state, and sums what the observer sees. With the same seed the run is the in-memory engine's:
the same result, delivered tuples, traffic per flow and privacy report, whatever the number of
partitions or workers.

A small run (``collect_traffic``, by default up to a million sources) also gathers every
partition's messages and records the traffic edge by edge as the in-memory engine does; a
larger one keeps the edges on the workers and reports each flow's messages, dummies, edges and
an order-free digest of its edges (`dpcomm.engine.traffic.FlowSummary`), and the
channels per node reduced across partitions (`dpcomm.engine.partition.reduce_efficiency`).
"""

from __future__ import annotations

import asyncio
import logging
import operator
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from dpcomm.errors import DpcommError, InvalidParameterError
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
#: Seconds a scheduler given by its address has to answer before the run fails.
CONNECT_TIMEOUT = 10.0
#: How many times a partition's task is sent again after workers holding its inputs were lost.
MAX_RESUBMISSIONS = 3


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


_SCHEMES = ("tcp", "tls")
_HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")
_SCHEDULER_ALLOWED = "a Dask scheduler's address, tcp://HOST:PORT (or tls://HOST:PORT)"


def scheduler_address(address: object, name: str = "scheduler") -> str:
    """``address`` as ``tcp://HOST:PORT`` (a bare ``HOST:PORT`` is TCP), or a one-line error.

    Only the form is checked here (no connection): a scheme of ``tcp`` or ``tls``, a host, and
    a port in 1..65535. ``name`` is what the error names (the parameter, or the environment
    variable the address came from).

    Examples:
        >>> scheduler_address("10.0.0.5:8786")
        'tcp://10.0.0.5:8786'
        >>> try:
        ...     scheduler_address("http://x")
        ... except InvalidParameterError as error:
        ...     print(error.name, "|", error.given)
        scheduler | http://x
    """
    if not isinstance(address, str):
        raise InvalidParameterError(name, _SCHEDULER_ALLOWED, address)
    scheme, separator, location = address.partition("://")
    if not separator:
        scheme, location = "tcp", address
    host, colon, port = location.rpartition(":")
    if (
        scheme not in _SCHEMES
        or not colon
        or _HOST.fullmatch(host) is None
        or not (port.isascii() and port.isdigit())
        or not 1 <= int(port) <= 65535
    ):
        raise InvalidParameterError(name, _SCHEDULER_ALLOWED, address)
    return f"{scheme}://{host}:{int(port)}"


async def _identity(address: str, timeout: float) -> object:
    """What the process at ``address`` says it is (a Dask server's ``identity``), or an error.

    A Dask server speaks first (its handshake); a process that accepts the connection and says
    nothing, or not in Dask's framing, never answers: every wait is bounded by ``timeout``
    here, where ``distributed.Client`` would wait for ever for the handshake.
    """
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address
    from distributed.security import Security

    scheme, location = parse_address(address)
    connector = registry.get_backend(scheme).get_connector()
    arguments = Security().get_connection_args("client")
    comm = await asyncio.wait_for(
        connector.connect(location, deserialize=False, **arguments), timeout
    )
    try:
        greeting = await asyncio.wait_for(comm.read(), timeout)
        if not isinstance(greeting, dict):
            return greeting
        await asyncio.wait_for(comm.write(comm.handshake_info()), timeout)
        await asyncio.wait_for(comm.write({"op": "identity", "reply": True}), timeout)
        return await asyncio.wait_for(comm.read(), timeout)
    finally:
        comm.abort()


def _connect(address: str, timeout: float, name: str) -> Client:
    """A client of the scheduler at ``address``, or a one-line error within about ``timeout``.

    ``distributed.Client(address, timeout=...)`` bounds the TCP connection, not Dask's
    handshake: a process that accepts connections but does not speak Dask would hold it for
    ever. The address is first asked what it is (bounded), then the client connects.
    """
    from distributed import Client

    allowed = f"a running Dask scheduler at {address} (answering within {timeout:g} s)"
    with ThreadPoolExecutor(1) as pool:  # its own event loop, even under a running one
        try:
            identity = pool.submit(asyncio.run, _identity(address, timeout)).result()
        except Exception as error:  # whatever the peer did, the run cannot use it
            raise InvalidParameterError(name, f"{allowed}: {_reason(error)}", address) from None
    kind = identity.get("type") if isinstance(identity, dict) else None
    if kind != "Scheduler":
        found = f"a Dask {kind}" if isinstance(kind, str) else "it does not speak Dask"
        raise InvalidParameterError(name, f"{allowed}: {found}", address)
    try:
        return Client(address, timeout=timeout)
    except Exception as error:
        raise InvalidParameterError(name, f"{allowed}: {_reason(error)}", address) from None


def _reason(error: BaseException) -> str:
    """Why a connection failed, in a few words (the system's reason when there is one)."""
    if isinstance(error, TimeoutError):
        return "no answer"
    text = str(error)
    system = re.search(r"\[Errno -?\d+\] ([^\n]+)", text)
    if system is not None:
        return system.group(1)
    lines = text.strip().splitlines()
    return lines[0] if lines else type(error).__name__


@contextmanager
def _connected(
    client: Client | None,
    scheduler: str | None,
    workers: int | None,
    timeout: float,
    name: str = "scheduler",
) -> Iterator[Client]:
    """``client``, a client of ``scheduler``, or one of a LocalCluster closed on exit."""
    from distributed import Client, LocalCluster

    if client is not None:
        yield client
        return
    if scheduler is not None:
        with _connect(scheduler, timeout, name) as connected:
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
    """What a Dask run adds to its report: its partitions, workers and how traffic was kept.

    ``resubmitted``: the partitions' tasks sent again after the loss of a worker (the run is
    the same; 0 when no worker was lost, or when Dask recovered on its own).
    """

    partitions: int
    workers: int
    traffic: str
    resubmitted: int = 0

    def to_dict(self) -> dict[str, Any]:
        """``{"partitions", "workers", "traffic", "resubmitted"}``, merged into the report."""
        return {
            "partitions": self.partitions,
            "workers": self.workers,
            "traffic": self.traffic,
            "resubmitted": self.resubmitted,
        }

    def released(self) -> DaskDetails:
        """Itself: partitions, workers and the traffic's form are public."""
        return self


class DaskEngine:
    """The roles on a Dask cluster; the same [`Run`][] as ``simulate``.

    Args:
        client: a connected ``distributed.Client`` (kept open).
        scheduler: the address of a running scheduler (``tcp://HOST:PORT``) when no client;
            default: the ``DASK_SCHEDULER_ADDRESS`` environment variable, else a LocalCluster.
            A malformed address is refused here; one where no Dask scheduler answers within
            ``connect_timeout`` fails the run (both [`InvalidParameterError`][]).
        partitions: partitions of the sources (default: one per 500,000 sources, at least
            one per worker); the run does not depend on it.
        workers: workers of the LocalCluster started for a run without client or scheduler
            (default: one per core).
        collect_traffic: gather every edge (True), keep them on the workers and report
            summaries (False), or decide by size (None: up to 1,000,000 sources).
        progress_stream: where the progress bar and the dashboard address go (stderr).
        connect_timeout: seconds to wait for ``scheduler`` to answer (default 10).
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
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        if client is not None and scheduler is not None:
            raise InvalidParameterError("scheduler", "None when a client is given", scheduler)
        if (
            isinstance(connect_timeout, bool)
            or not isinstance(connect_timeout, int | float)
            or not 0 < connect_timeout < float("inf")
        ):
            raise InvalidParameterError("connect_timeout", "seconds > 0", connect_timeout)
        if partitions is not None and (
            isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
        ):
            raise InvalidParameterError("partitions", "an integer >= 1 or None", partitions)
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise InvalidParameterError("workers", "an integer >= 1 or None", workers)
        #: What an error about the scheduler's address names: the parameter or the variable.
        self.scheduler_name = "scheduler"
        if scheduler is None and client is None:
            scheduler = os.environ.get(SCHEDULER_VARIABLE) or None
            if scheduler is not None and workers is not None:
                scheduler = None  # --workers asks for a LocalCluster
            self.scheduler_name = SCHEDULER_VARIABLE
        if scheduler is not None:
            scheduler = scheduler_address(scheduler, self.scheduler_name)
        self.client = client
        self.scheduler = scheduler
        self.connect_timeout = float(connect_timeout)
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
        prepared = options.get("prepared") or prepare(
            program,
            countermeasures,
            delta=options["delta"],
            target_epsilon=options.get("target_epsilon"),
        )
        with _connected(
            self.client, self.scheduler, self.workers, self.connect_timeout, self.scheduler_name
        ) as client:
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


class DaskRunError(DpcommError, RuntimeError):
    """A partition could not be run on the cluster: its workers kept being lost."""


class _Inputs:
    """What the tasks need and only this process has: the run's context, each partition's rows.

    Both are scattered from here (the context to every worker), so Dask cannot recompute them
    when the workers holding them are lost: `renew` sends them again.
    """

    def __init__(
        self, client: Client, context: RunContext, rows: SourceRows, partitions: list[Partition]
    ) -> None:
        self.client = client
        self._context = context
        self._source = rows
        self._partitions = partitions
        self.context = self._scatter_context()
        parts = [rows.part(p.start, p.stop) for p in partitions]
        shipped = client.scatter(parts, hash=False)
        self._rows: list[Future[Any] | None] = [
            client.submit(read_rows, part, pure=False) for part in shipped
        ]

    def _scatter_context(self) -> Future[Any]:
        shared: Future[Any] = self.client.scatter([self._context], broadcast=True, hash=False)[0]
        return shared

    def rows(self, index: int) -> Future[Any]:
        """Partition ``index``'s rows, read on a worker once (kept there for every stage)."""
        future = self._rows[index]
        if future is None:
            partition = self._partitions[index]
            [shipped] = self.client.scatter(
                [self._source.part(partition.start, partition.stop)], hash=False
            )
            future = self._rows[index] = self.client.submit(read_rows, shipped, pure=False)
        return future

    def renew(self, index: int) -> None:
        """Partition ``index``'s rows read again, and the context sent again if it was lost."""
        if self.context.status != "finished":
            self.context.release()
            self.context = self._scatter_context()
        future = self._rows[index]
        if future is not None:
            future.release()
        self._rows[index] = None

    def release_rows(self) -> None:
        """The workers may forget the rows (read again if a partition has to run again)."""
        for index, future in enumerate(self._rows):
            if future is not None:
                future.release()
            self._rows[index] = None

    def release(self) -> None:
        """The workers may forget everything sent."""
        self.release_rows()
        self.context.release()


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
        #: How many times each partition's task was sent again after a worker was lost.
        self.resubmitted = [0] * len(self.partitions)
        self.inputs: _Inputs

    def details(self) -> DaskDetails:
        """What the report says of this engine's run."""
        return DaskDetails(
            partitions=len(self.partitions),
            workers=self.workers,
            traffic="edges" if self.collect else "summaries (edges kept on the workers)",
            resubmitted=sum(self.resubmitted),
        )

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
        client, program, context = self.client, self.program, self.context
        rows = program.rows
        if rows is None:
            raise InvalidParameterError("program", "a program with its sources' rows", None)
        self.inputs = _Inputs(client, context, rows, self.partitions)
        state = program.initial_state()
        delivered = PackedMasks()
        summaries: dict[str, FlowSummary] = {}
        steps: dict[str, list[FlowSteps]] = {}
        states: list[Any] = []
        kept: list[dict[int, Future[Any]]] = [{} for _ in self.partitions]
        bar = self._bar(len(program.stages) * len(self.partitions))
        try:
            for stage in range(len(program.stages)):
                states.append(state)
                parts = self._stage(stage, state, kept, bar)
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
        if self.collect:
            self.inputs.release()
            traffic, efficiency = self._collected(steps)
            return state, delivered, traffic, efficiency
        self.inputs.release_rows()  # the channels need what the stages kept, not the rows
        channels = self._channels(kept, states)
        self.inputs.release()
        _, _, central = central_channels(context)
        for item in [*central, *(s for part in channels for s in part.traffic)]:
            previous = summaries.get(item.flow)
            summaries[item.flow] = item if previous is None else previous + item
        ordered = in_plan_order(self.transformed, list(summaries.values()))
        efficiency = reduce_efficiency(context, channels, list(ordered))
        return state, delivered, ordered, efficiency

    def _submit_stage(
        self, index: int, stage: int, state: Any, kept: list[dict[int, Future[Any]]]
    ) -> Future[Any]:
        """Partition ``index``'s task of ``stage``: the future of what returns to this process.

        What the channels need later (a run that keeps summaries) stays on the workers, in
        ``kept[index][stage]``.
        """
        client = self.client
        task = client.submit(
            _stage_task,
            self.inputs.context,
            self.partitions[index],
            self.inputs.rows(index),
            state,
            stage,
            pure=False,
        )
        if not self.collect:
            kept[index][stage] = client.submit(operator.getitem, task, 1, pure=False)
        return client.submit(operator.getitem, task, 0, pure=False)

    def _stage(
        self, stage: int, state: Any, kept: list[dict[int, Future[Any]]], bar: Any
    ) -> list[list[FlowPart]]:
        """Every partition's part of ``stage``; a partition whose worker was lost runs again."""
        from distributed import as_completed

        index_of: dict[Any, int] = {}

        def submit(index: int) -> Future[Any]:
            future = self._submit_stage(index, stage, state, kept)
            index_of[future.key] = index
            return future

        parts: list[list[FlowPart]] = [[] for _ in self.partitions]
        pending = as_completed([submit(index) for index in range(len(self.partitions))])
        for future in pending:
            index = index_of.pop(future.key)
            lost, parts[index] = self._result(index, future)
            if lost:
                pending.add(submit(index))
                continue
            future.release()
            if bar is not None:
                bar.update(1)
        return parts

    def _channels(self, kept: list[dict[int, Future[Any]]], states: list[Any]) -> list[Channels]:
        """Every partition's channels over the run, from what its stages kept on the workers.

        When a worker that held some of it was lost, the partition's stages run again (from
        the states they started from) before its channels.
        """
        from distributed import as_completed

        client = self.client
        index_of: dict[Any, int] = {}

        def submit(index: int) -> Future[Any]:
            kept_here = [kept[index][stage] for stage in range(len(states))]
            future = client.submit(
                _channels_task, self.inputs.context, self.partitions[index], *kept_here, pure=False
            )
            index_of[future.key] = index
            return future

        channels: list[Any] = [None] * len(self.partitions)
        pending = as_completed([submit(index) for index in range(len(self.partitions))])
        for future in pending:
            index = index_of.pop(future.key)
            lost, channels[index] = self._result(index, future)
            if lost:
                for stage, state in enumerate(states):
                    self._submit_stage(index, stage, state, kept).release()
                pending.add(submit(index))
                continue
            future.release()
        return channels

    def _result(self, index: int, future: Future[Any]) -> tuple[bool, Any]:
        """``(False, result)`` of ``future`` of partition ``index``, or ``(True, None)`` if lost.

        Dask itself runs a task again when the worker running it dies; what it cannot
        recompute is what this process scattered (the partition's rows, the run's context):
        the tasks that need them are cancelled. Their inputs are then sent again and the
        caller resubmits the partition's task, at most `MAX_RESUBMISSIONS` times (the
        partition is a pure function of the seed and its rows: the run is the same). An error
        raised by the task itself is raised here.
        """
        from concurrent.futures import CancelledError

        from distributed import KilledWorker
        from distributed.comm.core import CommClosedError

        try:
            return False, future.result()
        except (CancelledError, CommClosedError) as error:
            self.resubmitted[index] += 1
            if self.resubmitted[index] > MAX_RESUBMISSIONS:
                raise DaskRunError(
                    f"partition {index} of the sources was lost "
                    f"{self.resubmitted[index]} times (workers lost): {_reason(error)}"
                ) from None
            self.inputs.renew(index)
            return True, None
        except KilledWorker as error:
            raise DaskRunError(
                f"the task of partition {index} of the sources ended every worker that ran it "
                f"(out of memory?): {_reason(error)}"
            ) from None

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
