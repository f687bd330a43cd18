"""A scrambler of a deployed round: Algorithm 1 of Section 4.1 over links.

A scrambler relays the outputs broadcast to its sources (the K-means centroids of the previous
iteration), collects its sources' sealed messages until all arrived or the coordinator closes
the collection window (nothing progressed in the round for its ``idle_seconds``), adds the
scrambler step's dummies (`dpcomm.protocol.roles.scrambler_dummies`) sealed for their
targets, shuffles (`dpcomm.protocol.roles.scrambler_shuffle`) and forwards the batch as
one unit, then asks the coordinator to commit it. It cannot open the messages it relays: they
are sealed for the targets.
"""

from __future__ import annotations

import asyncio
import contextlib

import numpy as np

from dpcomm.engine.network.batches import Message, ScramblerCoordinator, forward_batch
from dpcomm.engine.network.names import NodeName
from dpcomm.engine.network.node import NodeContext, parse_output
from dpcomm.engine.network.records import (
    DeploymentError,
    Peer,
    ScramblerOutcome,
    ScramblerPlan,
)
from dpcomm.engine.network.sealing import make_dummy, sealed_size
from dpcomm.engine.network.wire import DATA_HEADER, Channel, ChannelClosedError, Op
from dpcomm.plan.countermeasures import Scramblers
from dpcomm.protocol import roles


class Scrambler:
    """One scrambler node (see the module's docstring)."""

    def __init__(self, context: NodeContext) -> None:
        self.context = context
        spec = context.spec
        self.spec = spec
        self.flow = spec.data_flows[context.node.group]
        self.index = context.node.index
        chosen = spec.countermeasure(self.flow)
        if not isinstance(chosen, Scramblers):
            raise DeploymentError(f"{context.name}: flow {self.flow} has no scramblers")
        self.countermeasure = chosen
        to_scramblers, scrambled = spec.transformed.routed_from(self.flow)
        self.scrambled = scrambled.name
        self.routed_index = spec.routed_names.index(to_scramblers.name)
        relays = spec.routes.incoming_outputs(self.flow)
        self.relay_names = {data: routed.name for data, routed in relays}
        self.expected_relays = {
            (data, target) for data, _ in relays for target in range(spec.routes.num_targets(data))
        }
        self.num_targets = spec.routes.num_targets(self.flow)
        self.blob_size = sealed_size(spec.payload_size)
        self.plan_ready = asyncio.Event()
        self.relays_done = asyncio.Event()
        self.full = asyncio.Event()
        self.arrived = asyncio.Event()
        self.window = asyncio.Event()  # set when the coordinator closes the window
        self.members: set[int] = set()
        self.member_channels: dict[int, Channel] = {}
        self.relays: dict[tuple[str, int], bytes] = {}
        self.received: dict[int, tuple[int, bytes, bytes]] = {}
        self.open = True
        if not self.expected_relays:
            self.relays_done.set()

    # ------------------------------------------------------------------ links

    async def handle(self, channel: Channel) -> None:
        """A compute node's output to relay, or a member source's message."""
        context = self.context
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(context.remaining()):
                await self.plan_ready.wait()
        peer = NodeName.parse(channel.peer)
        with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError):
            if peer.role == "compute":
                await self.from_compute(channel)
            elif peer.role == "source" and peer.index in self.members:
                try:
                    await self.from_source(channel, peer.index)
                finally:
                    if self.member_channels.get(peer.index) is channel:
                        self.member_channels.pop(peer.index, None)
            else:
                context.drops.add("unauthorized")

    def push(self, source: int, channel: Channel, key: tuple[str, int]) -> None:
        """Relay the stored output ``key`` to member ``source``."""
        name = str(NodeName.source(source))
        self.context.stats.message(self.relay_names[key[0]], self.context.name, name)
        channel.write_blob(Op.OUTPUT, self.relays[key])

    async def from_compute(self, channel: Channel) -> None:
        """Store an output to relay and push it to the members connected so far."""
        got = await channel.expect(Op.OUTPUT, timeout=self.context.remaining())
        data_flow, target, _ = parse_output(self.spec, got.blob)
        key = (data_flow, target)
        if key not in self.expected_relays or key in self.relays:
            self.context.drops.add("unexpected")
            return
        # Stored and pushed with no await in between: a member that connects later gets every
        # stored relay once, on connecting.
        self.relays[key] = got.blob
        for source, member in list(self.member_channels.items()):
            self.push(source, member, key)
        if self.expected_relays <= set(self.relays):
            self.relays_done.set()
        await channel.send_blob(Op.ACK, timeout=self.context.remaining())

    async def from_source(self, channel: Channel, source: int) -> None:
        """A member's channel: the stored relays, then its one message (ACK or REJECT)."""
        self.member_channels[source] = channel
        for key in sorted(self.relays):
            self.push(source, channel, key)
        while True:
            got = await channel.receive(timeout=self.context.remaining())
            if got.op is not None:
                self.context.drops.add("unexpected")
                continue
            verdict = self.take(source, got.frame.body, got.frame.message_id, got.replayed)
            if verdict is not None:
                await channel.send_blob(verdict, timeout=self.context.remaining())
            if verdict == Op.ACK and not got.replayed:
                self.arrived.set()
            if len(self.received) == len(self.members):
                self.full.set()
                self.arrived.set()

    def take(self, source: int, body: bytes, message_id: bytes, replayed: bool) -> Op | None:
        """Keep a member's DATA frame while the window is open; the answer (None: none)."""
        drops = self.context.drops
        flow_at, target = DATA_HEADER.unpack_from(body)
        sealed = body[DATA_HEADER.size :]
        if flow_at != self.routed_index or target >= self.num_targets:
            drops.add("malformed_data")
            return None
        if len(sealed) != self.blob_size:
            drops.add("malformed_data")
            return None
        known = self.received.get(source)
        if replayed:
            # The very frame it already acknowledged: its ACK was lost, send it again.
            return Op.ACK if known is not None and known[2] == message_id else None
        if not self.open:
            drops.add("late")
            return Op.REJECT
        if known is not None:
            drops.add("duplicate_source")
            return Op.REJECT
        self.received[source] = (target, sealed, message_id)
        return Op.ACK

    # ------------------------------------------------------------------ the round

    async def run(self) -> ScramblerOutcome:
        """Register, relay, collect, then add dummies, shuffle, forward and commit."""
        context = self.context
        allowed = ("source-", "compute-")
        listener = await context.serve(self.handle, lambda name: name.startswith(allowed))
        coordinator: Channel | None = None
        try:
            coordinator, plan = await context.register(context.hello(), ScramblerPlan)
            self.members.update(plan.members)
            self.plan_ready.set()
            link = ScramblerCoordinator(context, coordinator, self.close_window)
            context.phase = "relays"
            await self.wait_relays()
            opened = context.loop.time()
            context.phase = "collection"
            await link.open()
            await self.collect()
            self.open = False
            collected = context.loop.time()
            batched = sorted(self.received)
            context.phase = "forwarding"
            dummies, messages = self.batch(batched, plan.targets)
            prepared = await forward_batch(context, self.flow, messages, plan.targets)
            planned = self.spec.routes.batches(self.flow).members(self.index)
            carried = np.isin(np.asarray(planned, dtype=np.int64), batched)
            bits = np.packbits(carried, bitorder="little").tobytes()
            committed = await link.commit(self.flow, prepared=prepared, batched=bits)
            outcome = ScramblerOutcome(
                name=context.name,
                flow=self.flow,
                index=self.index,
                batched=tuple(batched),
                members=len(self.members),
                dummies=dummies,
                committed=committed,
                collect_seconds=collected - opened,
                forward_seconds=context.loop.time() - collected,
            )
            await link.wait_close()
        finally:
            listener.close()
            for member in list(self.member_channels.values()):
                await member.close()
            if coordinator is not None:
                await coordinator.close()  # on an error too: the coordinator then counts it lost
        return outcome

    def close_window(self) -> None:
        """The coordinator closed the window (or is gone)."""
        self.window.set()
        self.arrived.set()

    async def wait_relays(self) -> None:
        """Until every output to relay is in, or the coordinator closes the window."""
        waits = {asyncio.ensure_future(e.wait()) for e in (self.relays_done, self.window)}
        with contextlib.suppress(TimeoutError):
            await asyncio.wait(
                waits, timeout=self.context.remaining(), return_when=asyncio.FIRST_COMPLETED
            )
        for wait in waits:
            wait.cancel()

    async def collect(self) -> None:
        """Until every member's message is in, or the coordinator closes the window.

        The coordinator closes it (WINDOW) once nothing progressed anywhere in the round for
        ``idle_seconds`` (T): no registration, no window opened, no batch committed. The window
        measures the round's inactivity, not total time: on a slow machine the members arrive
        later but the round keeps progressing; a member that is T behind everything is left out.
        """
        context = self.context
        while not self.full.is_set() and not self.window.is_set():
            self.arrived.clear()
            try:
                async with asyncio.timeout(context.remaining()):
                    await self.arrived.wait()
            except TimeoutError:
                return

    def batch(self, batched: list[int], targets: tuple[Peer, ...]) -> tuple[int, list[Message]]:
        """The scrambler step over the messages batched: its dummies, and the shuffled batch."""
        context = self.context
        counts = np.zeros((1, self.num_targets), dtype=np.int64)
        for source in batched:
            counts[0, self.received[source][0]] += 1
        dummies = roles.scrambler_dummies(
            counts,
            [len(batched)],
            countermeasure=self.countermeasure,
            randomness=context.randomness,
            flow=self.flow,
            scramblers=[self.index],
        )[0]
        messages = [Message(*self.received[s][:2], self.scrambled) for s in batched]
        for target, peer in enumerate(targets):
            if peer.key is None:
                raise DeploymentError(f"no sealing key for target {peer.name}")
            size = self.spec.payload_size
            messages += [
                Message(target, make_dummy(peer.key, payload_size=size), self.scrambled)
                for _ in range(int(dummies[target]))
            ]
        order = roles.scrambler_shuffle(
            len(messages),
            largest_batch=max(self.spec.transformed.batches[self.flow]),
            countermeasure=self.countermeasure,
            randomness=context.randomness,
            flow=self.flow,
            scrambler=self.index,
        )
        return int(dummies.sum()), [messages[i] for i in order.tolist()]


async def run_scrambler(context: NodeContext) -> ScramblerOutcome:
    """Run a scrambler node."""
    return await Scrambler(context).run()
