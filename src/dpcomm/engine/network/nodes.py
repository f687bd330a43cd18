"""The nodes of a deployed round, run together in one event loop (one process, or a test).

Each role is a small class of its own module, over the shared `node.NodeContext`:

* `coordinator`: registers every node, sends the plans, decides which batches commit;
* `source`: the source step of `dpcomm.protocol.roles` once per flow, sealed;
* `scrambler`: Algorithm 1 (dummies, shuffle) and the batch's forwarding and commit;
* `compute`: holds the batches, counts the committed real tuples, sends its output;
* `result`: collects the last outputs.

The steps, their randomness and the query program's hooks are those every engine calls; the
routes are the plan's (`dpcomm.plan.routes.Routes`). `run_nodes` runs the nodes
of one process and gathers their typed outcomes (`records.GroupOutcome`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from dpcomm.engine.network.compute import run_compute
from dpcomm.engine.network.coordinator import LARGE_ROUND_SOURCES, run_coordinator
from dpcomm.engine.network.faults import faulty
from dpcomm.engine.network.node import NodeContext
from dpcomm.engine.network.records import (
    ComputeOutcome,
    CoordinatorOutcome,
    GroupOutcome,
    ResultOutcome,
    ScramblerOutcome,
    SourceOutcome,
)
from dpcomm.engine.network.result import run_result
from dpcomm.engine.network.scrambler import run_scrambler
from dpcomm.engine.network.source import run_source
from dpcomm.engine.network.spec import NodeConfig
from dpcomm.engine.network.transport import Address, Transport
from dpcomm.engine.network.wire import WireStats

__all__ = ["CONNECT_CONCURRENCY", "LARGE_ROUND_SOURCES", "RUNNERS", "run_nodes"]

#: Concurrent link set-ups per process, to the coordinator and to the other nodes each (keeps
#: listen backlogs from overflowing).
CONNECT_CONCURRENCY = 64

NodeOutcome = CoordinatorOutcome | SourceOutcome | ScramblerOutcome | ComputeOutcome | ResultOutcome

RUNNERS: dict[str, Callable[[NodeContext], Awaitable[NodeOutcome]]] = {
    "coordinator": run_coordinator,
    "source": run_source,
    "scrambler": run_scrambler,
    "compute": run_compute,
    "result": run_result,
}


async def run_nodes(
    configs: list[NodeConfig],
    transport: Transport,
    *,
    coordinator_address: Callable[[], Awaitable[Address]],
    on_listening: Callable[[str, Address], None] | None = None,
    crash: Callable[[], None] | None = None,
    on_event: Callable[[str], None] | None = None,
) -> GroupOutcome:
    """Run the nodes ``configs`` concurrently in this event loop; their outcomes and the wire.

    Every node uses ``transport``, wrapped with its injected faults (`faults.faulty`;
    ``crash`` is how a crashing node dies).
    """
    stats = WireStats()
    slots = asyncio.Semaphore(CONNECT_CONCURRENCY)
    registration = asyncio.Semaphore(CONNECT_CONCURRENCY)
    contexts = [
        NodeContext(
            config,
            faulty(
                transport,
                config.faults,
                stats=stats,
                idle_seconds=config.round.idle_seconds,
                crash=crash,
            ),
            stats,
            slots,
            coordinator_address,
            on_listening,
            on_event=on_event,
            registration_slots=registration,
        )
        for config in configs
    ]
    results = await asyncio.gather(
        *(RUNNERS[c.node.role](c) for c in contexts), return_exceptions=True
    )
    await _settle(asyncio.get_running_loop())
    errors: dict[str, str] = {}
    outcomes: list[NodeOutcome] = []
    for context, result in zip(contexts, results, strict=True):
        if isinstance(result, BaseException):
            errors[context.name] = f"{context.phase}: {type(result).__name__}: {result}"
        else:
            outcomes.append(result)
    return GroupOutcome(
        coordinator=next((o for o in outcomes if isinstance(o, CoordinatorOutcome)), None),
        result=next((o for o in outcomes if isinstance(o, ResultOutcome)), None),
        sources=tuple(o for o in outcomes if isinstance(o, SourceOutcome)),
        scramblers=tuple(o for o in outcomes if isinstance(o, ScramblerOutcome)),
        computes=tuple(o for o in outcomes if isinstance(o, ComputeOutcome)),
        errors=errors,
        wires=(stats.record(),),
    )


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """Let link handlers finish, then cancel the rest quietly."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    if pending:
        await asyncio.wait(pending, timeout=2.0)
    default = loop.get_exception_handler()

    def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError):
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet)
