"""The coordinator of a deployed round: registration, the plans, the commit point.

It never sees data. It registers every node (its address; a compute node's public key), sends
each node its part of the plan (the routes of `dpcomm.plan.routes.Routes`, the
scrambler batches, the peers' addresses and keys), decides which batches commit
(`dpcomm.engine.network.commit.BatchCommit`), and finalizes each flow once every batch
sender committed or was lost. In a large round a source's plan (which names infrastructure
nodes only) and a scrambler's go out as soon as the infrastructure has registered, so that the
sources are batched while the others still register.

Its phases end on progress, not on the clock: registration ends when every node registered or
none did for the round's ``idle_seconds`` (T; an absent source is then left out, an absent
infrastructure node fails the round); a scrambler's collection window closes when its sources
are all in, or when the coordinator tells it to (WINDOW: nothing progressed anywhere in the
round for T: no registration, no window opened, no batch committed); a flow is finalized when
every batch sender committed or hung up; the round ends when the result node has every output
or every compute node said it is done. The round's ``round_seconds`` caps the whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import numpy as np

from dpcomm.engine.network.commit import BatchCommit
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.node import INFRASTRUCTURE_REGISTERED, NodeContext
from dpcomm.engine.network.records import (
    Commit,
    ComputePlan,
    CoordinatorOutcome,
    DeploymentError,
    Finalize,
    Hello,
    OutputRoute,
    Peer,
    ResultPlan,
    RoundSummary,
    ScramblerPlan,
    SourcePlan,
    SourceRoute,
    decode,
    encode,
)
from dpcomm.engine.network.wire import Channel, ChannelClosedError, Op
from dpcomm.queries.program import num_sources

#: Above this many sources a round overlaps its stages on two cores: sources get their plans
#: (and connect to their scramblers) while the others register, and the coordinator runs in a
#: process of its own (docs/benchmarks.md: 10,000 sources in 85 s against 103 s; below, both
#: lengthen a 1,000-source start-up by about 0.8 s for no shorter round).
LARGE_ROUND_SOURCES = 2_000

#: Why the coordinator refuses a HELLO whose round digest differs from its own.
ROUND_MISMATCH = (
    "its config's round (countermeasures, release, program or limits) differs from the "
    "coordinator's: every node of a round must run the configs `deploy configs` wrote for it"
)
#: Why a second registration under a registered node's name is refused (a node that retried
#: after its first link closed, or another holder of its certificate).
ALREADY_REGISTERED = "a node of this name already registered"
#: Why a registration after the window closed is refused (the node is left out).
REGISTRATION_CLOSED = "registration closed (nobody registered for the idle time): left out"

NodePlan = SourcePlan | ScramblerPlan | ComputePlan | ResultPlan


class Coordinator:
    """The coordinator node (see the module's docstring)."""

    def __init__(self, context: NodeContext) -> None:
        self.context = context
        spec = context.spec
        self.spec = spec
        self.routes = spec.routes
        self.expected = {str(n): n for n in spec.node_names() if n != COORDINATOR}
        self.infrastructure = {n for n, node in self.expected.items() if node.role != "source"}
        self.large = num_sources(context.program) > LARGE_ROUND_SOURCES
        self.registry: dict[str, Hello] = {}
        self.channels: dict[str, Channel] = {}
        self.registered = asyncio.Event()
        self.registration = asyncio.Event()
        self.registration_closed = False
        self.absent: frozenset[str] = frozenset()
        self.infrastructure_ready = asyncio.Event()
        self.result_done = asyncio.Event()
        self.computes = {n for n, node in self.expected.items() if node.role == "compute"}
        self.finished: set[str] = set()
        self.windowed: set[str] = set()
        self.last_progress = context.loop.time()
        self.changed = asyncio.Event()
        self.commits = {flow: BatchCommit(self._batch_senders(flow)) for flow in spec.data_flows}
        #: Per data flow, the sources each committed scrambler says its batch carries.
        self.batched: dict[str, dict[str, bytes]] = {f: {} for f in spec.data_flows}
        self.done: set[str] = set()
        #: Per node, set once its plan went out (or its channel ended): a FINALIZE follows it.
        self.planned: dict[str, asyncio.Event] = {name: asyncio.Event() for name in self.expected}

    def _batch_senders(self, flow: str) -> frozenset[str]:
        """Who sends the batches of ``flow``: its scramblers, or every source."""
        if flow in self.spec.transformed.batches:
            return frozenset(str(n) for n in self.spec.scramblers(flow))
        return frozenset(str(NodeName.source(i)) for i in range(num_sources(self.context.program)))

    # ------------------------------------------------------------------ the round

    async def run(self) -> CoordinatorOutcome:
        """Register the nodes, send the plans, decide the commits, finalize, close."""
        context = self.context
        listener = await context.serve(self.handle, lambda name: name in self.expected)
        started = context.loop.time()
        try:
            await self.wait_registrations()
            context.phase = "commits"
            planned = context.loop.time()
            planned_at = time.time()  # wall clock: comparable with the launcher's on one machine
            finalized = await self.finalize_stages()
            context.phase = "result"
            await self.wait_end()
            finished = context.loop.time()
            summary = self.summary(finalized)
            for name, channel in list(self.channels.items()):
                # The result node learns what the round lost, to publish it with the result.
                blob = encode(summary) if name == str(RESULT) else b""
                with contextlib.suppress(ChannelClosedError, TimeoutError, OSError):
                    await channel.send_blob(Op.CLOSE, blob, timeout=1.0)
        finally:
            listener.close()
            # On a failure too: the nodes waiting for a plan or a decision stop at once.
            for channel in list(self.channels.values()):
                await channel.close()
        return CoordinatorOutcome(
            committed=finalized,
            lost={flow: tuple(sorted(c.lost)) for flow, c in self.commits.items()},
            refused={flow: tuple(sorted(c.refused)) for flow, c in self.commits.items()},
            result_received=self.result_done.is_set(),
            registration_seconds=planned - started,
            planned_at=planned_at,
            round_seconds=finished - planned,
            absent=tuple(sorted(self.absent)),
            summary=summary,
        )

    def delivered(self, flow: str, committed: tuple[str, ...]) -> set[int]:
        """The sources whose message of ``flow`` a committed batch carries."""
        if flow not in self.spec.transformed.batches:
            return {NodeName.parse(sender).index for sender in committed}
        carried: set[int] = set()
        for sender in committed:
            members = np.asarray(self.routes.batches(flow).members(NodeName.parse(sender).index))
            bits = self.batched[flow].get(sender)
            if bits is not None:  # the members its COMMIT says its batch carries
                flags = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")
                members = members[flags[: len(members)].astype(bool)]
            carried.update(int(m) for m in members)
        return carried

    def summary(self, finalized: dict[str, tuple[str, ...]]) -> RoundSummary:
        """What the round lost (`RoundSummary`): left-out sources, dead nodes, no result."""
        total = num_sources(self.context.program)
        left_out = {
            flow: sorted(set(range(total)) - self.delivered(flow, committed))
            for flow, committed in finalized.items()
        }
        failures = []
        absent = {NodeName.parse(n).index for n in self.absent if n.startswith("source-")}
        for flow, left in left_out.items():
            if len(left) > self.spec.max_left_out * total:
                lost = self.commits[flow].lost | self.commits[flow].refused
                failures.append(
                    f"flow {flow}: {len(left):,} of {total:,} sources left out "
                    f"({len(absent & set(left)):,} never registered; the others refused by "
                    f"their scrambler or in a batch lost or refused: {len(lost)} batch(es) "
                    f"lost or refused), more than --max-left-out {self.spec.max_left_out:g} allows"
                )
        senders = any(self.commits[flow].senders for flow in finalized)  # none: no rows
        if senders and not any(finalized.values()):
            failures.append("no batch committed: nothing was aggregated")
        if not self.result_done.is_set():
            # (Once the result node has every output, a compute node's DONE may still be on
            # its way: only a round without its result asks which compute nodes died.)
            gone = sorted((self.computes & self.registry.keys()) - self.done)
            if gone:
                failures.append(
                    f"{len(gone)} compute node(s) ended before delivering their outputs: "
                    f"{', '.join(gone[:5])}"
                )
            failures.append("the result node never said it had every output")
        counts = {flow: len(left) for flow, left in left_out.items()}
        return RoundSummary(total, counts, self.spec.max_left_out, tuple(failures[:8]))

    async def wait_registrations(self) -> None:
        """Until every node registered, or none did for ``idle_seconds``.

        Then an absent source is left out (its batch is lost); an absent infrastructure node
        fails the round: DeploymentError naming the phase and the nodes.
        """
        context = self.context
        idle = self.spec.idle_seconds
        while not self.registered.is_set() and context.remaining() > 0.05:
            self.registration.clear()
            try:
                await asyncio.wait_for(self.registration.wait(), min(idle, context.remaining()))
            except TimeoutError:
                break
        self.registration_closed = True
        missing = sorted(set(self.expected) - set(self.registry))
        infrastructure = [name for name in missing if name in self.infrastructure]
        if infrastructure:
            raise DeploymentError(
                f"registration: {len(infrastructure)} of {len(self.infrastructure)} "
                f"infrastructure nodes never registered (none registered for {idle:g} s): "
                f"{', '.join(infrastructure[:5])}{', ...' if len(infrastructure) > 5 else ''}"
            )
        self.absent = frozenset(missing)
        for name in missing:
            self.lose(name)
        self.registered.set()
        self.infrastructure_ready.set()

    async def wait_end(self) -> None:
        """Until the result node has every output, or a compute node is gone for good.

        Once every compute node said DONE, their outputs may still be on their way to the
        result node (a loaded machine): it then has ``idle_seconds`` to say it has them all.
        """
        context = self.context
        grace_until: float | None = None
        while not self.result_done.is_set() and str(RESULT) not in self.finished:
            if self.computes <= self.finished:
                if not self.computes <= self.done:
                    return  # a compute node ended before its DONE: the result cannot complete
                if grace_until is None:
                    grace_until = context.loop.time() + self.spec.idle_seconds
            wait = context.remaining()
            if grace_until is not None:
                wait = min(wait, grace_until - context.loop.time())
            if wait <= 0:
                return
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), wait)
            except TimeoutError:
                return

    def progress(self) -> None:
        """Something happened (a registration, a window opened, a commit, a node done or gone)."""
        self.last_progress = self.context.loop.time()
        self.changed.set()

    async def close_windows(self, flow: str) -> None:
        """WINDOW to the scramblers of ``flow`` still undecided: nothing progressed for T."""
        commit = self.commits[flow]
        for name in sorted(commit.senders - commit.committed - commit.lost - self.windowed):
            self.windowed.add(name)
            channel = self.channels.get(name)
            if channel is not None:
                with contextlib.suppress(ChannelClosedError, TimeoutError, OSError):
                    await channel.send_blob(Op.WINDOW, timeout=self.context.remaining())

    async def finalize_stages(self) -> dict[str, tuple[str, ...]]:
        """Stage by stage, each flow's decision once its batches are decided.

        A batch sender decides its batch by committing or by hanging up. Once nothing
        progressed in the round for ``idle_seconds`` (T), the scramblers still collecting are
        told to close their windows (WINDOW). Only the round's deadline finalizes a flow with
        senders undecided (they are lost).
        """
        context = self.context
        program = context.program
        finalized: dict[str, tuple[str, ...]] = {}
        limit = context.deadline - 2.0
        for names in program.stages:
            pending = list(names)
            while pending:
                for flow in list(pending):
                    if self.commits[flow].decided or context.loop.time() >= limit:
                        finalized[flow] = tuple(sorted(self.commits[flow].finalize()))
                        await self.send_finalize(Finalize(flow, finalized[flow]))
                        pending.remove(flow)
                if not pending:
                    break
                idle_left = self.last_progress + self.spec.idle_seconds - context.loop.time()
                if idle_left <= 0:
                    for flow in pending:
                        if flow in self.spec.transformed.batches:
                            await self.close_windows(flow)
                    idle_left = self.spec.idle_seconds
                self.changed.clear()
                wait = min(idle_left, limit - context.loop.time())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), max(0.01, wait))
        return finalized

    async def send_finalize(self, decision: Finalize) -> None:
        """FINALIZE to the flow's targets (a compute node that hung up is simply not told).

        A target is told only once it has its plan: a node drops what comes before it. (A
        flow without batch sender, over a table without rows, is decided at once.)
        """
        blob = encode(decision)
        for receiver in self.spec.receivers(decision.flow):
            with contextlib.suppress(TimeoutError):
                planned = self.planned[str(receiver)].wait()
                await asyncio.wait_for(planned, self.context.remaining())
            channel = self.channels.get(str(receiver))
            if channel is None:
                continue
            with contextlib.suppress(ChannelClosedError, TimeoutError, OSError):
                await channel.send_blob(Op.FINALIZE, blob, timeout=self.context.remaining())

    # ------------------------------------------------------------------ one node's channel

    async def handle(self, channel: Channel) -> None:
        """A node's channel: HELLO, its plan when ready, then its COMMITs and DONE."""
        context = self.context
        peer = channel.peer
        try:
            hello = await channel.expect(Op.HELLO, timeout=context.remaining())
            if peer in self.registry:
                context.drops.add("duplicate_node")
                await channel.send_blob(Op.REJECT, ALREADY_REGISTERED.encode(), timeout=5.0)
                return
            if self.registration_closed:
                context.drops.add("late_registration")  # left out already
                await channel.send_blob(Op.REJECT, REGISTRATION_CLOSED.encode(), timeout=5.0)
                return
            request = decode(hello.blob, Hello)
            if request.round_digest != self.spec.digest:
                # Another round's spec (other countermeasures, release or program): refused
                # before it gets a plan, so before any data moves; it counts as never registered.
                context.drops.add("round_mismatch")
                await channel.send_blob(Op.REJECT, ROUND_MISMATCH.encode(), timeout=5.0)
                return
            self.register(peer, request, channel)
            # A source's plan names only infrastructure nodes, a scrambler's its members (by the
            # plan's batches) and its targets: in a large round they go out as soon as the
            # infrastructure has registered, so that sources are batched (and their links
            # closed) while others still register. The rest wait for every node.
            early = self.large and self.expected[peer].role in ("source", "scrambler")
            ready = self.infrastructure_ready if early else self.registered
            async with asyncio.timeout(context.remaining()):
                await ready.wait()
            plan = encode(self.plan_for(self.expected[peer]))
            await channel.send_blob(Op.PLAN, plan, timeout=context.remaining())
            self.planned[peer].set()
            await self.serve_commits(peer, channel)
        except (ChannelClosedError, TimeoutError, DeploymentError):
            pass
        finally:
            if peer in self.planned:
                self.planned[peer].set()  # no plan will go out: nothing to wait for
            # Only the registered node's own channel ending loses it: a second connection
            # under its name (refused above) must not abort the real node's batch.
            if self.channels.get(peer) is channel:
                self.channels.pop(peer, None)
                self.lose(peer)

    def register(self, peer: str, hello: Hello, channel: Channel) -> None:
        """Record a node's HELLO and channel."""
        self.registry[peer] = hello
        self.channels[peer] = channel
        self.progress()
        self.registration.set()
        if len(self.registry) == len(self.expected):
            self.registered.set()
        if self.infrastructure <= self.registry.keys() and not self.infrastructure_ready.is_set():
            self.infrastructure_ready.set()
            if self.context.on_event is not None:
                self.context.on_event(INFRASTRUCTURE_REGISTERED)

    async def serve_commits(self, peer: str, channel: Channel) -> None:
        """A node's COMMITs (answered at once) and DONE, until its channel ends."""
        while True:
            got = await channel.expect(
                Op.COMMIT, Op.DONE, Op.OPEN, timeout=self.context.remaining()
            )
            if got.op == Op.OPEN:  # a scrambler's window opened
                self.progress()
                continue
            if got.op == Op.DONE:
                self.finished.add(peer)
                self.done.add(peer)
                if peer == str(RESULT):
                    self.result_done.set()
                self.progress()
                continue
            request = decode(got.blob, Commit)
            flow = request.flow
            if request.abandon and flow in self.commits:
                self.commits[flow].lose(peer)
            accepted = (
                not request.abandon and flow in self.commits and self.commits[flow].request(peer)
            )
            if accepted and request.batched is not None:
                self.batched[flow].setdefault(peer, request.batched)
            reply = Op.COMMITTED if accepted else Op.ABORTED
            await channel.send_blob(reply, timeout=self.context.remaining())
            self.progress()

    def lose(self, peer: str) -> None:
        """``peer`` hung up: unless committed, its batches are lost."""
        for commit in self.commits.values():
            commit.lose(peer)
        self.finished.add(peer)
        self.progress()

    # ------------------------------------------------------------------ plans

    def peer(self, name: str, *, address: bool = True) -> Peer:
        """Registered node ``name`` as the plans name it (with its key, if it has one)."""
        hello = self.registry[name]
        return Peer(name, hello.address if address else None, hello.key)

    def plan_for(self, node: NodeName) -> NodePlan:
        """The part of the plan ``node`` gets."""
        if node.role == "source":
            return self.source_plan(node.index)
        if node.role == "scrambler":
            return self.scrambler_plan(node)
        if node.role == "compute":
            return self.compute_plan(node)
        return ResultPlan()

    def source_plan(self, index: int) -> SourcePlan:
        """Per data flow: its targets' keys, and its scrambler (or the targets' addresses)."""
        flows = {}
        for flow in self.spec.data_flows:
            receivers = [str(n) for n in self.spec.receivers(flow)]
            if flow in self.spec.transformed.batches:
                # Through a scrambler: the targets' keys only, to seal for them.
                batch = int(self.routes.batches(flow).batch_of([index])[0])
                scrambler = self.peer(str(self.spec.scramblers(flow)[batch]))
                targets = tuple(self.peer(n, address=False) for n in receivers)
                flows[flow] = SourceRoute(targets, scrambler)
            else:
                flows[flow] = SourceRoute(tuple(self.peer(n) for n in receivers))
        return SourcePlan(flows)

    def scrambler_plan(self, node: NodeName) -> ScramblerPlan:
        """Its sources (the batch the plan assigns it, absent sources aside), its flow's targets."""
        flow = self.spec.data_flows[node.group]
        members = tuple(
            source
            for source in self.routes.batches(flow).members(node.index)
            if str(NodeName.source(source)) not in self.absent
        )
        targets = tuple(self.peer(str(n)) for n in self.spec.receivers(flow))
        return ScramblerPlan(members, targets)

    def compute_plan(self, node: NodeName) -> ComputePlan:
        """Per data flow it receives, the receivers of its output on every output route."""
        outputs = {}
        for flow in self.spec.data_flows:
            if self.spec.compute_group_of(flow) != node.group:
                continue
            routes = []
            for routed in self.routes.output_routes(flow):
                receivers = self.routes.receivers_of(routed, node.index)
                names = [str(self.spec.name_of(routed.receiver, int(i))) for i in receivers]
                routes.append(OutputRoute(routed.name, tuple(self.peer(n) for n in names)))
            outputs[flow] = tuple(routes)
        return ComputePlan(outputs)


async def run_coordinator(context: NodeContext) -> CoordinatorOutcome:
    """Run the coordinator node."""
    return await Coordinator(context).run()
