"""A compute node (target) of a deployed round: hold the batches, count the committed tuples.

A compute node holds every batch sender's frames (`commit.BatchIntake`) and answers
PREPARE. Once the coordinator's FINALIZE for a flow names the committed senders, it opens the
frames of the senders that prepared and committed (`commit.BatchIntake.release`),
discards the dummies, and computes its output from the real tuples with the program's target
step; the frames of the other senders are opened only to count their dummies
(`commit.BatchIntake.discarded`). Its output goes on over the routes of its plan: to
the result node, or broadcast to the next stage's sources (through their scramblers). It never
learns which source sent a tuple when scramblers are used: payloads carry the tuple only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcomm.engine.network.batches import send_output
from dpcomm.engine.network.commit import BatchIntake
from dpcomm.engine.network.node import NodeContext, output_header
from dpcomm.engine.network.records import (
    ComputeFlowOutcome,
    ComputeOutcome,
    ComputePlan,
    DeploymentError,
    Finalize,
    Hello,
    Prepare,
    decode,
)
from dpcomm.engine.network.sealing import SealError, TargetKeys, open_payload, sealed_size
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.engine.network.wire import DATA_HEADER, Channel, ChannelClosedError, Op, Received
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.protocol import roles
from dpcomm.queries.codec import CodecError

#: What a compute node keeps of each DATA frame: its routed flow and its sealed payload.
Held = tuple[str, bytes]


class Compute:
    """One compute node (see the module's docstring)."""

    def __init__(self, context: NodeContext) -> None:
        self.context = context
        self.spec = context.spec
        self.program = context.program
        self.group, self.index = context.node.group, context.node.index
        self.mine = [f for f in self.spec.data_flows if self.spec.compute_group_of(f) == self.group]
        self.keys = TargetKeys.generate()
        self.private = self.keys.nacl_private_key()
        self.blob_size = sealed_size(self.spec.payload_size)
        self.intakes: dict[str, BatchIntake[Held]] = {f: BatchIntake() for f in self.mine}
        self.largest = {f: largest_batch(self.spec, f) for f in self.mine}
        self.senders = {f: routed_senders(self.spec, f) for f in self.mine}
        #: Per flow, which routed senders sent each ciphertext (by its digest).
        self.seen: dict[str, dict[bytes, set[str]]] = {f: {} for f in self.mine}
        self.tainted: set[str] = set()
        self.finalized: dict[str, frozenset[str]] = {}
        self.decided = asyncio.Event()

    # ------------------------------------------------------------------ links

    async def handle(self, channel: Channel) -> None:
        """A batch sender's DATA frames and PREPAREs, until its channel ends."""
        while True:
            try:
                got = await channel.receive(timeout=self.context.remaining())
            except (ChannelClosedError, TimeoutError):
                return
            if got.op is None:
                self.hold(channel.peer, got)
            elif got.op == Op.PREPARE:
                await self.prepare(channel, got.blob)
            else:
                self.context.drops.add("unexpected")

    def routed(self, peer: str, flow: str) -> bool:
        """Whether the plan routes ``flow``'s batches from ``peer`` to this node."""
        senders = self.senders[flow]
        return peer.startswith("source-") if senders is None else peer in senders

    def accepts(self, peer: str) -> bool:
        """Whether ``peer`` may link to this node: a batch sender of one of its flows."""
        return any(self.routed(peer, flow) for flow in self.mine)

    def hold(self, peer: str, got: Received) -> None:
        """Keep a DATA frame for its flow's intake (a replayed one only once).

        Only the peers the plan routes a flow from (its scramblers, or the sources where
        they send directly) may send it: any other frame is dropped as ``unrouted_data``
        and never recorded, so it cannot make an honest sender's copy look repeated.
        """
        if got.replayed:
            return
        drops = self.context.drops
        body = got.frame.body
        flow_at, target = DATA_HEADER.unpack_from(body)
        sealed = body[DATA_HEADER.size :]
        routed_names = self.spec.routed_names
        if flow_at >= len(routed_names) or target != self.index or len(sealed) != self.blob_size:
            drops.add("malformed_data")
            return
        routed = self.spec.transformed.flows[flow_at]
        if routed.origin not in self.intakes:
            drops.add("malformed_data")
            return
        if not self.routed(peer, routed.origin):
            drops.add("unrouted_data")
            return
        intake = self.intakes[routed.origin]
        held = intake.held.get(peer, {})
        if got.frame.message_id not in held:
            # A sender may not relay one ciphertext twice (under fresh ids), nor send more
            # messages than the largest batch of the plan: its batch is then refused whole.
            # A ciphertext first held from another routed sender taints neither: the copies
            # are kept apart and opened once (`counted`).
            digest = hashlib.blake2b(sealed, digest_size=16).digest()
            holders = self.seen[routed.origin].setdefault(digest, set())
            if peer in holders or len(held) >= self.largest[routed.origin]:
                drops.add("repeated_ciphertext" if peer in holders else "oversized_batch")
                self.tainted.add(peer)
                return
            if holders:
                drops.add("repeated_ciphertext")
            holders.add(peer)
        verdict = intake.hold(peer, got.frame.message_id, (routed.name, sealed))
        if verdict != "held":
            drops.add(verdict)

    async def prepare(self, channel: Channel, blob: bytes) -> None:
        """PREPARED iff the sender's PREPARE names exactly the frames held, else REJECT."""
        try:
            request = decode(blob, Prepare)
        except DeploymentError:
            self.context.drops.add("unexpected")
            return
        intake = self.intakes.get(request.flow)
        if channel.peer in self.tainted:
            await channel.send_blob(Op.REJECT, timeout=self.context.remaining())
        elif intake is not None and intake.prepare(channel.peer, request.count, request.digest):
            await channel.send_blob(Op.PREPARED, timeout=self.context.remaining())
        else:
            self.context.drops.add("batch_mismatch")
            await channel.send_blob(Op.REJECT, timeout=self.context.remaining())

    async def read_finalize(self, coordinator: Channel) -> None:
        """The coordinator's FINALIZE of every flow of this node."""
        with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError):
            while len(self.finalized) < len(self.mine):
                got = await coordinator.expect(Op.FINALIZE, timeout=self.context.remaining())
                decision = decode(got.blob, Finalize)
                self.finalized[decision.flow] = frozenset(decision.committed)
                self.decided.set()

    # ------------------------------------------------------------------ the round

    async def run(self) -> ComputeOutcome:
        """Register with its key, then per stage: wait for FINALIZE, count, output."""
        context = self.context
        listener = await context.serve(self.handle, self.accepts)
        coordinator: Channel | None = None
        reader: asyncio.Future[None] | None = None
        flows: dict[str, ComputeFlowOutcome] = {}
        try:
            hello = Hello(context.hello().address, self.keys.public_key, self.spec.digest)
            coordinator, plan = await context.register(hello, ComputePlan)
            reader = asyncio.ensure_future(self.read_finalize(coordinator))
            state = self.program.initial_state()
            for stage, names in enumerate(self.program.stages):
                for flow in names:
                    if flow in self.mine:
                        state, flows[flow] = await self.flow(stage, flow, state, plan, reader)
            reader.cancel()
            # Its outputs are delivered: the coordinator need not wait for it any longer.
            with contextlib.suppress(ChannelClosedError, TimeoutError):
                await coordinator.send_blob(Op.DONE, timeout=context.remaining())
            await context.wait_close(coordinator)
        finally:
            listener.close()
            if reader is not None:
                reader.cancel()
            if coordinator is not None:
                await coordinator.close()
        return ComputeOutcome(context.name, self.group, self.index, flows)

    async def flow(
        self, stage: int, flow: str, state: Any, plan: ComputePlan, reader: asyncio.Future[None]
    ) -> tuple[Any, ComputeFlowOutcome]:
        """One flow: its committed tuples, this node's output, the output sent on."""
        self.context.phase = f"flow {flow}"
        committed = await self.decision(flow, reader)
        intake = self.intakes[flow]
        payloads, dummies = self.counted(flow, committed)
        payloads = self.decodable(flow, payloads)
        tuples = self.program.codec.tuples(flow).decode(payloads)
        targets = np.full(len(payloads), self.index, dtype=np.int64)
        step = roles.TargetStep(state, stage, flow, [self.index])
        [output] = roles.target_outputs(self.program, step, tuples, targets).values()
        state = self.program.merge(state, stage, {(flow, self.index): output})
        encoded = self.program.codec.outputs(flow).encode(output)
        blob = output_header(self.spec, flow, self.index) + encoded
        sends = [
            send_output(self.context, route.flow, blob, receiver)
            for route in plan.outputs.get(flow, ())
            for receiver in route.receivers
        ]
        gave_up = [why for why in await asyncio.gather(*sends) if why is not None]
        outcome = ComputeFlowOutcome(
            tuples=len(payloads),
            dummies=dummies,
            discarded=tuple(intake.discarded(committed)),
            outputs_sent=len(sends) - len(gave_up),
            outputs=len(sends),
            undelivered=tuple(gave_up),
        )
        return state, outcome

    async def decision(self, flow: str, reader: asyncio.Future[None]) -> frozenset[str]:
        """The committed senders of ``flow`` (none if no FINALIZE came before the deadline)."""
        context = self.context
        while flow not in self.finalized and not reader.done():
            self.decided.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(context.remaining()):
                    await self.decided.wait()
            if context.remaining() <= 0.01:
                break
        if flow not in self.finalized:
            context.drops.add("no_finalize")
        return self.finalized.get(flow, frozenset())

    def decodable(self, flow: str, payloads: list[bytes]) -> list[bytes]:
        """The payloads that decode as tuples of ``flow``; each other one is counted, dropped.

        Each payload is decoded on its own: one malformed tuple (a certified source sealing
        bad content) costs that tuple only, never the others of the node.
        """
        codec = self.program.codec.tuples(flow)
        good = []
        for payload in payloads:
            try:
                codec.decode([payload])
            except CodecError:
                self.context.drops.add("malformed_tuple")
                continue
            good.append(payload)
        return good

    def counted(self, flow: str, committed: frozenset[str]) -> tuple[list[bytes], int]:
        """The real tuples of the committed batches, and every dummy held.

        The tuples are those of `commit.BatchIntake.release` (senders that prepared and
        committed) whose message is real (`dpcomm.protocol.roles.delivered`); the other
        senders' frames are opened only to count their dummies (what the observer saw).
        """
        intake = self.intakes[flow]
        once: dict[bytes, Held] = {}  # a ciphertext committed by two senders counts once
        for _, item in intake.release(committed):
            once.setdefault(item[1], item)
        released = [self.open(item) for item in once.values()]
        others = [
            self.open(item)
            for sender in intake.discarded(committed)
            for item in intake.held[sender].values()
        ]
        dummies = sum(o.dummy for o in released) + sum(o.dummy for o in others)
        real = [o.content is not None for o in released]
        counted = roles.delivered(real, np.ones(len(released), dtype=bool))
        payloads = [
            o.content
            for o, keep in zip(released, counted, strict=True)
            if keep and o.content is not None
        ]
        return payloads, dummies

    def open(self, item: Held) -> Opened:
        """What a frame carries: a tuple, a dummy, or nothing (a payload that does not open)."""
        routed, sealed = item
        try:
            content = open_payload(self.private, sealed, payload_size=self.spec.payload_size)
        except SealError:
            self.context.drops.add("seal")
            return Opened(None, dummy=False)
        if content is None:
            self.context.stats.dummy(routed)
            return Opened(None, dummy=True)
        return Opened(content, dummy=False)


@dataclass(frozen=True)
class Opened:
    """An opened frame: its tuple (None for a dummy or a failed opening), and if a dummy."""

    content: bytes | None
    dummy: bool


def routed_senders(spec: RoundSpec, flow: str) -> frozenset[str] | None:
    """The peers that send ``flow``'s batches to its targets: its scramblers (None: sources)."""
    if isinstance(spec.countermeasure(flow), Scramblers):
        return frozenset(str(name) for name in spec.scramblers(flow))
    return None


def largest_batch(spec: RoundSpec, flow: str) -> int:
    """The most messages one batch sender of ``flow`` sends one target: n + d, d + 1, or 1."""
    countermeasure = spec.countermeasure(flow)
    if isinstance(countermeasure, Scramblers):
        return max(spec.transformed.batches[flow]) + countermeasure.num_dummies
    if isinstance(countermeasure, LocalFlooding):
        return 1 + countermeasure.num_dummies
    return 1


async def run_compute(context: NodeContext) -> ComputeOutcome:
    """Run a compute node."""
    return await Compute(context).run()
