"""A source node of a deployed round: its row, the source step, its messages.

Per stage, a source merges the outputs broadcast to it (the K-means centroids, relayed by its
scramblers or sent directly), routes its row with the program under the state it knows
(`dpcomm.protocol.roles.ProgramHooks.route`), applies the source step once per flow
(`dpcomm.protocol.roles.source_messages`: R_σ and its flooding dummies), seals its tuple
(or a dummy) for the drawn target, and sends it to its scrambler (the very same frame until
acknowledged) or straight to the targets as one batch that it then asks to commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import numpy as np

from dpcomm.engine.network.batches import RETRIED, Message, forward_batch, request_commit
from dpcomm.engine.network.node import LINK_ERRORS, Backoff, NodeContext, parse_output
from dpcomm.engine.network.records import (
    DeploymentError,
    Peer,
    SendStatus,
    SourceFlowOutcome,
    SourceOutcome,
    SourcePlan,
    SourceRoute,
)
from dpcomm.engine.network.sealing import make_dummy, seal_payload
from dpcomm.engine.network.wire import Channel, Op
from dpcomm.plan.countermeasures import LocalFlooding
from dpcomm.protocol import roles
from dpcomm.queries.codec import from_hex


class Source:
    """One source node (see the module's docstring)."""

    def __init__(self, context: NodeContext) -> None:
        if context.config.row is None:
            raise DeploymentError(f"{context.name}: a source without its row")
        self.context = context
        self.spec = context.spec
        self.routes = context.spec.routes
        self.program = context.program
        self.index = context.node.index
        self.rows = self.program.codec.rows.decode(from_hex([context.config.row], "row"))
        self.inbox: dict[tuple[str, int], Any] = {}
        self.arrived = asyncio.Event()
        self.lock = asyncio.Lock()
        self.coordinator: Channel | None = None

    def accept(self, blob: bytes) -> None:
        """An output broadcast to this source."""
        flow, target, encoded = parse_output(self.spec, blob)
        self.inbox[(flow, target)] = self.program.codec.outputs(flow).decode(encoded)
        self.arrived.set()

    async def handle(self, channel: Channel) -> None:
        """An output sent directly by a compute node (a broadcast without scramblers)."""
        with contextlib.suppress(*LINK_ERRORS):
            got = await channel.expect(Op.OUTPUT, timeout=self.context.remaining())
            self.accept(got.blob)
            await channel.send_blob(Op.ACK, timeout=self.context.remaining())

    async def run(self) -> SourceOutcome:
        """Register, then every stage: gather the outputs it needs, send every flow."""
        context = self.context
        direct = any(
            routed.kind == "broadcast"
            for flow in self.spec.data_flows
            for _, routed in self.routes.incoming_outputs(flow)
        )
        listener = None
        if direct:
            listener = await context.serve(self.handle, lambda name: name.startswith("compute-"))
        flows: dict[str, SourceFlowOutcome] = {}
        try:
            self.coordinator, plan = await context.register(context.hello(), SourcePlan)
            if all(route.scrambler is not None for route in plan.flows.values()):
                # Its scramblers commit for it: the coordinator has nothing more to tell it, and
                # an idle TLS channel per source would only hold memory on both ends.
                await self.coordinator.close()
                self.coordinator = None
            state = self.program.initial_state()
            for stage in range(len(self.program.stages)):
                state = await self.stage(stage, state, plan, flows)
        finally:
            if listener is not None:
                listener.close()
            if self.coordinator is not None:
                await self.coordinator.close()
        return SourceOutcome(context.name, self.index, flows)

    async def stage(
        self, stage: int, state: Any, plan: SourcePlan, flows: dict[str, SourceFlowOutcome]
    ) -> Any:
        """One stage: the outputs it needs merged into ``state``, then its flows sent."""
        names = self.program.stages[stage]
        self.context.phase = f"stage {stage + 1} of {len(self.program.stages)}"
        scramblers: dict[str, Channel] = {}
        for flow in names:
            scrambler = plan.flows[flow].scrambler
            if scrambler is not None:
                scramblers[flow] = await self.context.connect_retrying(scrambler)
        needed = {
            (data, target)
            for flow in names
            for data, _ in self.routes.incoming_outputs(flow)
            for target in range(self.routes.num_targets(data))
        }
        if needed:
            await self.gather_outputs(needed, scramblers)
            state = self.program.merge(state, stage - 1, {key: self.inbox[key] for key in needed})
        sent = await asyncio.gather(
            *(self.send_flow(flow, plan.flows[flow], state, scramblers.get(flow)) for flow in names)
        )
        flows.update(zip(names, sent, strict=True))
        for channel in scramblers.values():
            await channel.close()
        return state

    async def gather_outputs(
        self, needed: set[tuple[str, int]], scramblers: dict[str, Channel]
    ) -> None:
        """Wait for the broadcast outputs ``needed`` (relayed by scramblers, or sent directly)."""
        remaining = self.context.remaining

        async def relayed(channel: Channel) -> None:
            while not needed <= set(self.inbox):
                got = await channel.expect(Op.OUTPUT, timeout=remaining())
                self.accept(got.blob)

        if scramblers:
            async with asyncio.timeout(remaining()):
                await asyncio.gather(*(relayed(c) for c in scramblers.values()))
        while not needed <= set(self.inbox):
            self.arrived.clear()
            async with asyncio.timeout(remaining()):
                await self.arrived.wait()

    async def send_flow(
        self, flow: str, route: SourceRoute, state: Any, scrambler: Channel | None
    ) -> SourceFlowOutcome:
        """The source step of ``flow``, its first message sealed, and its sending."""
        context = self.context
        truth = np.asarray(self.program.route(state, flow, self.rows), dtype=np.int64)
        messages = roles.source_messages(
            truth,
            countermeasure=self.spec.countermeasure(flow),
            num_targets=len(route.targets),
            randomness=context.randomness,
            flow=flow,
            sources=[self.index],
        )
        sent, real = int(messages.sent[0]), bool(messages.is_real[0])
        key = self.key(route, sent)
        if real:
            content = self.program.codec.tuples(flow).encode(self.program.carried(flow, self.rows))
            first = seal_payload(key, content[0], payload_size=self.spec.payload_size)
        else:
            first = make_dummy(key, payload_size=self.spec.payload_size)
        if scrambler is not None and route.scrambler is not None:
            status = await self.send_to_scrambler(flow, route.scrambler, scrambler, sent, first)
            if not real:
                context.stats.dummy(self.spec.transformed.routed_from(flow)[0].name)
            return SourceFlowOutcome(real, sent, status, route.scrambler.name)
        committed = await self.send_direct(flow, route, messages, first)
        return SourceFlowOutcome(real, sent, "committed" if committed else "failed")

    @staticmethod
    def key(route: SourceRoute, target: int) -> bytes:
        """The sealing key of target ``target``."""
        key = route.targets[target].key
        if key is None:
            raise DeploymentError(f"no sealing key for target {route.targets[target].name}")
        return key

    async def send_direct(
        self, flow: str, route: SourceRoute, messages: roles.SourceMessages, first: bytes
    ) -> bool:
        """R_σ^d's d + 1 messages as one batch, in a random order, then its commit."""
        context = self.context
        routed = self.spec.transformed.routed_from(flow)
        # The first message is routed flow <flow>, the flooding dummies <flow> (flooding).
        batch = [Message(int(messages.sent[0]), first, routed[0].name)]
        if isinstance(self.spec.countermeasure(flow), LocalFlooding):
            batch += [
                Message(
                    int(t),
                    make_dummy(self.key(route, int(t)), payload_size=self.spec.payload_size),
                    routed[-1].name,
                )
                for t in messages.flooding[0]
            ]
        order = roles.source_send_order(
            len(batch), randomness=context.randomness, flow=flow, source=self.index
        )
        shuffled = [batch[i] for i in order.tolist()]
        prepared = await forward_batch(context, flow, shuffled, route.targets)
        if self.coordinator is None:
            raise DeploymentError(f"{context.name}: flow {flow} has no coordinator channel")
        return await request_commit(context, self.coordinator, flow, self.lock, prepared=prepared)

    async def send_to_scrambler(
        self, flow: str, scrambler: Peer, channel: Channel, target: int, sealed: bytes
    ) -> SendStatus:
        """The source's frame to its scrambler until acknowledged; the outcome."""
        context = self.context
        routed = self.spec.transformed.routed_from(flow)[0].name  # "<flow> (to scramblers)"
        flow_index = self.spec.routed_names.index(routed)
        message_id = os.urandom(16)
        context.stats.message(routed, context.name, scrambler.name)
        backoff = Backoff(context)
        current: Channel | None = channel
        while True:
            try:
                if current is None:
                    current = await context.connect(scrambler)
                current.write_data(flow_index, target, sealed, message_id)
                await current.drain(timeout=context.remaining())
                got = await current.expect(Op.ACK, Op.REJECT, timeout=context.remaining())
                return "accepted" if got.op == Op.ACK else "rejected"
            except RETRIED:
                if current is not None and current is not channel:
                    await current.close()
                current = None
                if backoff.exhausted():
                    return "failed"
                await backoff.pause()


async def run_source(context: NodeContext) -> SourceOutcome:
    """Run a source node."""
    return await Source(context).run()
