"""Sending as the round's two-phase batch commit asks (`dpcomm.engine.network.commit`).

* `forward_batch`: a batch sender (a scrambler, or a source sending straight to its
  targets) writes its DATA frames, then a PREPARE to every target, and waits for PREPARED;
* `request_commit`: then it asks the coordinator to COMMIT its batch;
* `send_output`: a compute node's output, one OUTPUT blob per receiver, until acknowledged;
* `ScramblerCoordinator`: a scrambler's channel to the coordinator, read by one task (the
  coordinator may close its collection window at any time).

A link that fails is opened again (after a `node.Backoff` pause) and the very same
frames (same message ids) are written, so a target holds each frame at most once; a target
unreachable for the round's ``idle_seconds`` counts as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dpcomm.engine.network.commit import batch_digest
from dpcomm.engine.network.node import Backoff, NodeContext
from dpcomm.engine.network.records import Commit, DeploymentError, Peer, Prepare, encode
from dpcomm.engine.network.transport import HandshakeError
from dpcomm.engine.network.wire import Channel, ChannelClosedError, Op

T = TypeVar("T")

#: What ends an attempt to send (the sender opens the link again while time is left).
RETRIED = (ChannelClosedError, HandshakeError, TimeoutError)


@dataclass(frozen=True)
class Message:
    """One message of a batch: its target (index among the flow's), payload and routed flow."""

    target: int
    sealed: bytes
    routed: str


class _Batch:
    """One batch on its way to its targets (see `forward_batch`)."""

    def __init__(
        self, context: NodeContext, flow: str, messages: Sequence[Message], targets: Sequence[Peer]
    ) -> None:
        self.context = context
        self.flow = flow
        self.messages = messages
        self.targets = targets
        self.ids = [os.urandom(16) for _ in messages]
        routed = context.spec.routed_names
        self.indices = [routed.index(m.routed) for m in messages]
        self.by_target: dict[int, list[int]] = {}
        for position, message in enumerate(messages):
            self.by_target.setdefault(message.target, []).append(position)
            context.stats.message(message.routed, context.name, targets[message.target].name)

    def write(self, channel: Channel, position: int) -> None:
        message = self.messages[position]
        channel.write_data(
            self.indices[position], message.target, message.sealed, self.ids[position]
        )

    def prepare(self, channel: Channel, target: int) -> None:
        positions = self.by_target[target]
        digest = batch_digest([self.ids[p] for p in positions])
        channel.write_blob(Op.PREPARE, encode(Prepare(self.flow, len(positions), digest)))

    async def open(self, target: int) -> Channel:
        return await self.context.connect(self.targets[target])

    async def confirm(self, target: int, channel: Channel | None) -> bool:
        """PREPARED from ``target`` (its frames written again on a new link if need be)."""
        context = self.context
        backoff = Backoff(context)
        while True:
            try:
                if channel is None:
                    channel = await self.open(target)
                    for position in self.by_target[target]:
                        self.write(channel, position)
                    self.prepare(channel, target)
                await channel.drain(timeout=context.remaining())
                got = await channel.expect(Op.PREPARED, Op.REJECT, timeout=context.remaining())
                await channel.close()
                return got.op == Op.PREPARED
            except RETRIED:
                if channel is not None:
                    await channel.close()
                channel = None
                if backoff.exhausted():
                    return False
                await backoff.pause()


async def forward_batch(
    context: NodeContext, flow: str, messages: Sequence[Message], targets: Sequence[Peer]
) -> bool:
    """Send a batch of data flow ``flow`` as one unit: DATA frames in order, then PREPAREs.

    ``messages`` go to ``targets[message.target]``. Returns True when every target
    acknowledged the whole batch (PREPARED). A target whose link fails is retried with the
    same frames (same message ids) until it answers or stays unreachable for ``idle_seconds``.
    """
    batch = _Batch(context, flow, messages, targets)
    if not batch.by_target:
        return True
    order = sorted(batch.by_target)
    opened = await asyncio.gather(*(batch.open(t) for t in order), return_exceptions=True)
    channels = {t: c for t, c in zip(order, opened, strict=True) if isinstance(c, Channel)}
    # Frames leave in the batch's (shuffled) order, across the target links.
    for position, message in enumerate(messages):
        if message.target in channels:
            batch.write(channels[message.target], position)
    for target in order:
        if target in channels:
            batch.prepare(channels[target], target)
    confirmed = await asyncio.gather(*(batch.confirm(t, channels.get(t)) for t in order))
    return all(confirmed)


async def request_commit(
    context: NodeContext, coordinator: Channel, flow: str, lock: asyncio.Lock, *, prepared: bool
) -> bool:
    """Ask the coordinator to commit this node's batch of ``flow``; True if committed.

    A batch not ``prepared`` at every target is abandoned: the coordinator counts it lost.
    """
    async with lock:
        try:
            request = Commit(flow, abandon=not prepared)
            await coordinator.send_blob(Op.COMMIT, encode(request), timeout=context.remaining())
            got = await coordinator.expect(Op.COMMITTED, Op.ABORTED, timeout=context.remaining())
        except (ChannelClosedError, TimeoutError):
            return False
    return prepared and got.op == Op.COMMITTED


async def send_output(context: NodeContext, routed: str, blob: bytes, receiver: Peer) -> str | None:
    """Send one OUTPUT blob to ``receiver`` until acknowledged.

    None once acknowledged; else why it gave up, in one line naming the receiver. Delivery
    ends on progress, not on a fixed deadline: an attempt goes on while its link moves bytes
    (`while_progressing`), however slow the link, and the output is given up only after the
    round's ``idle_seconds`` (T) without progress (the receiver unreachable, silent, or its
    link stalled) or at the round's deadline.
    """
    context.stats.message(routed, context.name, receiver.name)
    backoff = Backoff(context)
    while True:
        channel: Channel | None = None
        try:
            channel = await context.connect(receiver)
            channel.write_blob(Op.OUTPUT, blob)
            await while_progressing(context, channel, _acknowledged(context, channel), backoff)
            return None
        except RETRIED as error:
            if backoff.exhausted():
                context.drops.add("output_given_up")
                return (
                    f"gave up on its output to {receiver.name} ({len(blob):,} bytes) after "
                    f"{backoff.elapsed():.0f} s without progress "
                    f"({type(error).__name__}: {error or 'no answer'})"
                )
        finally:
            if channel is not None:
                await channel.close()
        await backoff.pause()


async def _acknowledged(context: NodeContext, channel: Channel) -> None:
    await channel.drain(timeout=context.remaining())
    await channel.expect(Op.ACK, timeout=context.remaining())


PROGRESS_CHECK_SECONDS = 0.5
"""How often a sender looks whether its link moved bytes (`while_progressing`)."""


async def while_progressing(
    context: NodeContext, channel: Channel, step: Coroutine[Any, Any, T], backoff: Backoff
) -> T:
    """Await ``step`` for as long as ``channel`` makes progress.

    Each fall of the bytes the link has not delivered (`Link.unsent`) is progress
    (`Backoff.progress`); once nothing moved for the round's ``idle_seconds`` (or at the
    round's deadline), ``step`` is cancelled and TimeoutError says how much was left.
    """
    task = asyncio.ensure_future(step)
    last = channel.link.unsent()
    try:
        while True:
            wait = max(0.005, min(PROGRESS_CHECK_SECONDS, context.remaining()))
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return task.result()
            unsent = channel.link.unsent()
            if unsent < last:
                backoff.progress()
            last = unsent
            if backoff.exhausted():
                raise TimeoutError(
                    f"{channel.peer} took nothing for {backoff.elapsed():.0f} s, "
                    f"{unsent:,} bytes still unsent"
                )
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, *RETRIED):
                await task


class ScramblerCoordinator:
    """A scrambler's channel to the coordinator, read by one task from the plan on.

    The scrambler says OPEN when its collection window opens; the coordinator may answer
    WINDOW at any time (no progress anywhere in the round for ``idle_seconds``: the window
    closes), then COMMITTED or ABORTED to its COMMIT, then CLOSE. One reader keeps these
    apart, so a WINDOW crossing a COMMIT is never taken for its answer.
    """

    def __init__(
        self, context: NodeContext, channel: Channel, on_window: Callable[[], None]
    ) -> None:
        self.context = context
        self.channel = channel
        self.on_window = on_window
        self.closed = asyncio.Event()
        self.replies: asyncio.Queue[Op | None] = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        wanted = (Op.WINDOW, Op.COMMITTED, Op.ABORTED, Op.CLOSE)
        try:
            while True:
                got = await self.channel.expect(*wanted, timeout=self.context.remaining())
                if got.op == Op.CLOSE:
                    return
                if got.op == Op.WINDOW:
                    self.on_window()
                else:
                    self.replies.put_nowait(got.op)
        except (ChannelClosedError, TimeoutError, DeploymentError):
            pass
        finally:
            self.closed.set()
            self.on_window()
            self.replies.put_nowait(None)

    async def open(self) -> None:
        """Tell the coordinator the collection window is open (once per round)."""
        try:
            await self.channel.send_blob(Op.OPEN, timeout=self.context.remaining())
        except (ChannelClosedError, TimeoutError):
            self.on_window()  # no coordinator: nothing to wait for

    async def commit(self, flow: str, *, prepared: bool, batched: bytes) -> bool:
        """Ask to commit the batch of ``flow`` (abandon it unless ``prepared``); True if so.

        ``batched``: which of its planned members the batch carries (`Commit.batched`).
        """
        try:
            request = Commit(flow, abandon=not prepared, batched=batched)
            await self.channel.send_blob(
                Op.COMMIT, encode(request), timeout=self.context.remaining()
            )
        except (ChannelClosedError, TimeoutError):
            return False
        return prepared and await self.replies.get() == Op.COMMITTED

    async def wait_close(self) -> None:
        """Until the coordinator's CLOSE (or the end of its channel, or the deadline)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closed.wait(), self.context.remaining())
        self.reader.cancel()
        await self.channel.close()
