"""The result node of a deployed round: it collects the last compute nodes' outputs.

The outputs it expects are those of the data flows whose targets send to it
(`dpcomm.plan.routes.Routes.result_outputs`), one per target; the launcher merges them
with the program (`dpcomm.protocol.roles.ProgramHooks.merge`).
"""

from __future__ import annotations

import asyncio
import contextlib

from dpcomm.engine.network.node import LINK_ERRORS, NodeContext, parse_output
from dpcomm.engine.network.records import (
    DeploymentError,
    Output,
    ResultOutcome,
    ResultPlan,
    RoundSummary,
    decode,
)
from dpcomm.engine.network.wire import Channel, ChannelClosedError, Op


class Result:
    """The result node (see the module's docstring)."""

    def __init__(self, context: NodeContext) -> None:
        self.context = context
        routes = context.spec.routes
        self.expected = {
            (flow, target)
            for flow in routes.result_outputs()
            for target in range(routes.num_targets(flow))
        }
        self.outputs: dict[tuple[str, int], bytes] = {}
        self.complete = asyncio.Event()
        self.summary: RoundSummary | None = None
        if not self.expected:
            self.complete.set()

    async def handle(self, channel: Channel) -> None:
        """A compute node's output (kept once), acknowledged."""
        with contextlib.suppress(*LINK_ERRORS):
            got = await channel.expect(Op.OUTPUT, timeout=self.context.remaining())
            flow, target, data = parse_output(self.context.spec, got.blob)
            key = (flow, target)
            if key in self.expected and key not in self.outputs:
                self.outputs[key] = data
            await channel.send_blob(Op.ACK, timeout=self.context.remaining())
            if self.expected <= set(self.outputs):
                self.complete.set()

    async def run(self) -> ResultOutcome:
        """Register, collect the outputs until all are in (then say DONE) or the round ends."""
        context = self.context
        listener = await context.serve(self.handle, lambda name: name.startswith("compute-"))
        coordinator: Channel | None = None
        try:
            coordinator, _ = await context.register(context.hello(), ResultPlan)
            context.phase = "outputs"
            # Every output, or the coordinator's CLOSE: every compute node is done or gone.
            closing = asyncio.ensure_future(self.wait_close(coordinator))
            complete = asyncio.ensure_future(self.complete.wait())
            await asyncio.wait({closing, complete}, return_when=asyncio.FIRST_COMPLETED)
            complete.cancel()
            if self.complete.is_set() and not closing.done():
                with contextlib.suppress(ChannelClosedError, TimeoutError):
                    await coordinator.send_blob(Op.DONE, timeout=context.remaining())
            await closing
        finally:
            listener.close()
            if coordinator is not None:
                await coordinator.close()
        return ResultOutcome(
            outputs=tuple(Output(f, t, data) for (f, t), data in sorted(self.outputs.items())),
            missing=tuple(sorted(self.expected - set(self.outputs))),
            summary=self.summary,
        )

    async def wait_close(self, coordinator: Channel) -> None:
        """The coordinator's CLOSE, with what the round lost (`RoundSummary`)."""
        with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError):
            got = await coordinator.expect(Op.CLOSE, timeout=self.context.remaining())
            self.summary = decode(got.blob, RoundSummary)
        await coordinator.close()


async def run_result(context: NodeContext) -> ResultOutcome:
    """Run the result node (refused first if its config's derived SQL is not its own)."""
    context.program.check_config()
    return await Result(context).run()
