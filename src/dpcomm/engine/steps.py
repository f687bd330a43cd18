"""The data-dependent half of a flow, for any set of its nodes: the role steps and their traffic.

`flow_steps` runs the source step (`dpcomm.protocol.roles.source_messages`) of
some senders of a data-dependent flow and, under scramblers, the scrambler step
(`dpcomm.protocol.roles.scrambler_dummies`) of the scramblers that batch them;
`record_data_flow` records what the observer sees of it. The in-memory engine calls them
for all the nodes at once, the Dask engine for a partition of whole scramblers at a time: a
node's draws depend on its index only, so both give the same messages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpcomm.engine.traffic import TrafficLog
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.plan.routes import Routes
from dpcomm.plan.transform import (
    flooding_flow_name,
    scrambled_flow_name,
    scrambler_group_name,
    to_scramblers_flow_name,
)
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class FlowSteps:
    """What the source and scrambler steps of some nodes of one data-dependent flow produced.

    Attributes:
        flow: the data-dependent flow.
        sources: the senders' global indices (in the flow's sender group), in message order.
        messages: their messages (`dpcomm.protocol.roles.source_messages`).
        scramblers: under scramblers, the global indices of the scramblers that batch them.
        received: under scramblers, (K, T) messages each of them received for each target.
        dummies: under scramblers, (K, T) dummies each of them added (Algorithm 1).
    """

    flow: str
    sources: IntArray
    messages: roles.SourceMessages
    scramblers: IntArray | None = None
    received: IntArray | None = None
    dummies: IntArray | None = None

    @property
    def real(self) -> npt.NDArray[np.bool_]:
        """Which sources' messages carry their tuple (the others are dummies)."""
        return np.asarray(self.messages.is_real, dtype=bool)


def flow_steps(
    routes: Routes, randomness: Randomness, flow: str, truth: IntArray, sources: IntArray
) -> FlowSteps:
    """The source and scrambler steps of ``flow`` for ``sources`` (whole scrambler batches).

    ``truth`` is each source's true target (the program's route). Under scramblers, the
    sources must be every member of the scramblers that batch them (consecutive batches:
    `dpcomm.plan.routes.Routes.batches`).
    """
    chosen = routes.transformed.countermeasures[flow]
    targets = routes.num_targets(flow)
    messages = roles.source_messages(
        truth,
        countermeasure=chosen,
        num_targets=targets,
        randomness=randomness,
        flow=flow,
        sources=sources,
    )
    if not isinstance(chosen, Scramblers):
        return FlowSteps(flow, sources, messages)
    batches = routes.batches(flow)
    batch = batches.batch_of(sources)
    first = int(batch[0]) if len(batch) else 0
    stop = int(batch[-1]) + 1 if len(batch) else 0
    sizes = np.array(batches.sizes[first:stop], dtype=np.int64)
    local = batch - first
    if not np.array_equal(np.bincount(local, minlength=stop - first), sizes):
        raise InvalidParameterError(
            "sources", f"whole scrambler batches of flow {flow}", f"{len(sources)} sources"
        )
    keys = local * targets + messages.sent
    received = np.bincount(keys, minlength=(stop - first) * targets).reshape(-1, targets)
    scramblers = np.arange(first, stop, dtype=np.int64)
    dummies = roles.scrambler_dummies(
        received,
        sizes,
        countermeasure=chosen,
        randomness=randomness,
        flow=flow,
        scramblers=scramblers,
    )
    return FlowSteps(flow, sources, messages, scramblers, received, dummies)


def record_data_flow(log: TrafficLog, routes: Routes, steps: FlowSteps) -> None:
    """What the observer sees of ``steps`` (one data-dependent flow, some nodes) into ``log``.

    Without scramblers: each source's first message (and its flooding dummies) to the targets;
    under scramblers: each source to its scrambler, and each scrambler's messages per target
    (real, sampled out and dummies alike).
    """
    name = steps.flow
    plan = routes.plan
    flow = plan.flow(name)
    chosen = routes.transformed.countermeasures[name]
    messages = steps.messages
    senders = routes.node_ids(flow.sender, steps.sources)
    sampled_out = int((~messages.is_real).sum())
    if not isinstance(chosen, Scramblers):
        log.add(name, senders, routes.node_ids(flow.receiver, messages.sent), dummies=sampled_out)
        if isinstance(chosen, LocalFlooding) and chosen.num_dummies:
            flooding = messages.flooding
            log.add(
                flooding_flow_name(name),
                np.repeat(senders, flooding.shape[1]),
                routes.node_ids(flow.receiver, flooding.ravel()),
                dummies=int(flooding.size),
            )
        return
    if steps.scramblers is None or steps.received is None or steps.dummies is None:
        raise InvalidParameterError("steps", f"the scrambler step of flow {name}", "none")
    group = scrambler_group_name(name)
    scrambler_of_source = routes.batches(name).batch_of(steps.sources)
    log.add(
        to_scramblers_flow_name(name),
        senders,
        routes.node_ids(group, scrambler_of_source),
        dummies=sampled_out,
    )
    targets = routes.num_targets(name)
    log.add(
        scrambled_flow_name(name),
        np.repeat(routes.node_ids(group, steps.scramblers), targets),
        np.tile(routes.node_ids(flow.receiver), len(steps.scramblers)),
        (steps.received + steps.dummies).ravel(),
        dummies=int(steps.dummies.sum()) + sampled_out,
    )
