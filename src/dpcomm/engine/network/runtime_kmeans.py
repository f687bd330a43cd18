"""The networked runtime of a deployed K-means run (Section 5.1): one flow per iteration.

The round's flows are the I iterations: flow i has the compute nodes ``compute-<i>-<k>`` (one
per centroid) and the scramblers ``scrambler-<i>-<j>``. Every node is started once and lives
through all iterations; the channels, batches, commits and the coordinator's FINALIZE are
those of the Aggregate runtime (:mod:`dpcomm.engine.network.runtime`). Per iteration i:

* **result**: seals each current centroid for each source (the source's public key came with
  its registration) and sends them to the source's scrambler of iteration i as one batch
  (DATA frames, PREPARE, PREPARED). It starts with the initial centroids of its config.
* **scrambler**: relays to each of its sources the K sealed centroid frames meant for it, then
  collects the sources' point frames, adds d dummies, shuffles and forwards the batch to the
  compute nodes of iteration i, and asks the coordinator to commit it.
* **source**: opens its K centroids, takes the nearest as its true target, applies R_σ once
  per (source, iteration) (:func:`dpcomm.protocol.randomize_targets`), seals its point (or a
  dummy) for the drawn target and sends it through the scrambler, retrying the same frame.
* **compute**: on FINALIZE, sums the committed real points it received and sends the sum and
  the count to the result node, which replaces each centroid by sum / count (or keeps it when
  the count is 0) and starts iteration i + 1.
* **coordinator**: finalizes iteration i once each of its scramblers committed or was lost.

Points and centroids travel as float32 coordinates in payloads of one size; every frame on the
wire (data or control) has the round's single frame size.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import struct
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.engine.network.frames import frame_size_for
from dpcomm.engine.network.runtime import (
    _COUNT,
    NodeContext,
    _digest,
    _json,
    _key,
    _loads,
    _rng,
    batch_receiver,
    build_batch,
    commit,
    forward_batch,
    receive_source_frames,
    send_partial,
    serve_registered_peer,
)
from dpcomm.engine.network.runtime_spec import (
    COORDINATOR,
    RESULT,
    DeploymentError,
    RoundSpec,
    compute_name,
    parse_name,
    scrambler_name,
)
from dpcomm.engine.network.runtime_wire import (
    BLOB_HEADER,
    DATA_HEADER,
    MIN_BODY_SIZE,
    Channel,
    ChannelClosedError,
    Op,
)
from dpcomm.engine.network.sealing import (
    SealError,
    TargetKeys,
    make_dummy,
    open_payload,
    payload_size_for,
    seal_payload,
    sealed_size,
)
from dpcomm.engine.network.tls import HandshakeError
from dpcomm.protocol import ScramblerAssignment, assign_scramblers, randomize_targets
from dpcomm.queries.kmeans import COORDINATE_BYTES, nearest_centroid

#: Header of a point or centroid payload: source index, iteration, centroid index.
VECTOR_HEADER = struct.Struct(">IHH")
_SOURCE_RETRIES = 40


def kmeans_sizes(dimension: int) -> tuple[int, int]:
    """(payload_size, frame_size) for points of ``dimension`` float32 coordinates."""
    payload = payload_size_for(VECTOR_HEADER.size + dimension * COORDINATE_BYTES)
    body = max(DATA_HEADER.size + sealed_size(payload), MIN_BODY_SIZE, BLOB_HEADER.size + 16)
    return payload, frame_size_for(body)


def encode_vector(source: int, iteration: int, centroid: int, vector: Any) -> bytes:
    """A point (``centroid`` 0) or a centroid meant for ``source``, as float32 coordinates."""
    coordinates = np.asarray(vector, dtype=">f4").tobytes()
    return VECTOR_HEADER.pack(source, iteration, centroid) + coordinates


def decode_vector(spec: RoundSpec, payload: bytes) -> tuple[int, int, int, npt.NDArray[np.float64]]:
    """Inverse of :func:`encode_vector`; DeploymentError if malformed."""
    size = VECTOR_HEADER.size + spec.dimension * COORDINATE_BYTES
    if len(payload) != size:
        raise DeploymentError(f"malformed vector: {len(payload)} bytes, expected {size}")
    source, iteration, centroid = VECTOR_HEADER.unpack_from(payload)
    vector = np.frombuffer(payload, dtype=">f4", offset=VECTOR_HEADER.size).astype(np.float64)
    return source, iteration, centroid, vector


# --------------------------------------------------------------------------- coordinator


async def run_kmeans_coordinator(context: NodeContext) -> dict[str, Any]:
    """Register the nodes, send the plans, commit batches, finalize each iteration in turn."""
    spec = context.spec
    expected = {name: role for name, role in spec.node_names() if name != COORDINATOR}
    registry: dict[str, dict[str, Any]] = {}
    channels: dict[str, Channel] = {}
    registered = asyncio.Event()
    result_done = asyncio.Event()
    committed: set[str] = set()
    lost: set[str] = set()
    aborted: set[str] = set()
    finalized: set[int] = set()
    senders = [
        {scrambler_name(i, k) for k in range(flow.num_scramblers)}
        for i, flow in enumerate(spec.flows)
    ]
    decided = [asyncio.Event() for _ in spec.flows]
    rng = _rng(spec, "coordinator")
    assignments: list[ScramblerAssignment] = []
    for flow in spec.flows:
        if flow.mode != "scrambler":
            raise DeploymentError(f"flow {flow.name}: K-means deployments need scramblers")
        assignment = assign_scramblers(spec.num_sources, batch_size=flow.batch_size, rng=rng)
        if assignment.num_scramblers != flow.num_scramblers:
            raise DeploymentError(f"flow {flow.name}: scrambler count mismatch")
        assignments.append(assignment)

    def check_decided(flow: int) -> None:
        if senders[flow] <= committed | lost:
            decided[flow].set()

    def address(name: str) -> list[Any]:
        info = registry[name]
        return [name, info["host"], info["port"]]

    def plan_for(name: str) -> dict[str, Any]:
        role, numbers = parse_name(name)
        if role == "source":
            flows = []
            for i, flow in enumerate(spec.flows):
                k = int(assignments[i].scrambler_of_source[numbers[0]])
                flows.append(
                    {
                        "scrambler": address(scrambler_name(i, k)),
                        "targets": [
                            [compute_name(i, c), registry[compute_name(i, c)]["key"]]
                            for c in range(flow.num_targets)
                        ],
                    }
                )
            return {"flows": flows}
        if role == "scrambler":
            group, k = numbers
            return {
                "members": [int(m) for m in assignments[group].members(k)],
                "targets": [
                    [*address(compute_name(group, c)), registry[compute_name(group, c)]["key"]]
                    for c in range(spec.flows[group].num_targets)
                ],
            }
        if role == "compute":
            return {"result": address(RESULT)}
        flows = [
            {
                "scramblers": [
                    [*address(scrambler_name(i, k)), [int(m) for m in assignments[i].members(k)]]
                    for k in range(flow.num_scramblers)
                ]
            }
            for i, flow in enumerate(spec.flows)
        ]
        keys = [registry[f"source-{s}"]["key"] for s in range(spec.num_sources)]
        return {"flows": flows, "keys": keys}

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        channel = context.channel(reader, writer, peer)
        role, numbers = parse_name(peer)
        flow = numbers[0] if role == "scrambler" else -1

        def accept(name: str) -> bool:
            if flow >= 0 and flow not in finalized and name not in lost:
                committed.add(name)
                return True
            aborted.add(name)
            return False

        def after(_: str) -> None:
            if flow >= 0:
                check_decided(flow)

        try:
            await serve_registered_peer(
                context,
                channel,
                peer,
                registry=registry,
                channels=channels,
                expected=len(expected),
                registered=registered,
                result_done=result_done,
                plan_for=plan_for,
                accept_commit=accept,
                after_commit=after,
            )
        except (ChannelClosedError, TimeoutError, DeploymentError):
            pass
        finally:
            channels.pop(peer, None)
            if flow >= 0 and peer not in committed and flow not in finalized:
                lost.add(peer)
                check_decided(flow)

    server = await context.serve(handler, lambda name: name in expected)
    started = context.loop.time()
    finalize_seconds: list[float] = []
    try:
        try:
            await asyncio.wait_for(registered.wait(), context.remaining())
        except TimeoutError:
            missing = sorted(set(expected) - set(registry))
            raise DeploymentError(
                f"{len(missing)} nodes never registered: {', '.join(missing[:5])}"
            ) from None
        planned = context.loop.time()
        budget = 2 * spec.collect_seconds + 30.0
        for iteration in range(len(spec.flows)):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    decided[iteration].wait(), max(0.01, min(budget, context.remaining() - 2.0))
                )
            finalized.add(iteration)
            lost |= senders[iteration] - committed
            decision = _json({"committed": sorted(senders[iteration] & committed)})
            for c in range(spec.flows[iteration].num_targets):
                channel = channels.get(compute_name(iteration, c))
                if channel is not None:
                    with contextlib.suppress(
                        ChannelClosedError, TimeoutError, OSError, AttributeError
                    ):
                        await channel.send_blob(Op.FINALIZE, decision, timeout=context.remaining())
            finalize_seconds.append(context.loop.time() - planned)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(result_done.wait(), context.remaining())
        finished = context.loop.time()
        for channel in list(channels.values()):
            # A peer may have hung up already (its transport is gone): nothing to tell it.
            with contextlib.suppress(ChannelClosedError, TimeoutError, OSError, AttributeError):
                await channel.send_blob(Op.CLOSE, timeout=1.0)
    finally:
        server.close()
    return {
        "role": "coordinator",
        "committed": sorted(committed),
        "lost": sorted(lost),
        "lost_sources": [],
        "aborted": sorted(aborted),
        "result_received": result_done.is_set(),
        "registration_seconds": planned - started,
        "round_seconds": finished - planned,
        "finalized_at_seconds": finalize_seconds,
    }


# --------------------------------------------------------------------------- source


async def _exchange(
    context: NodeContext,
    flow: int,
    item: dict[str, Any],
    point: npt.NDArray[np.float64],
    private: Any,
    rng: np.random.Generator,
) -> tuple[str, bool]:
    """One iteration of a source: get the centroids from the scrambler, send the point."""
    spec = context.spec
    index = parse_name(context.name)[1][0]
    settings = spec.flows[flow]
    drops = context.stats.drops[context.name]
    keys = [_key(t[-1]) for t in item["targets"]]
    name, host, port = item["scrambler"]
    frame: tuple[int, bytes, bytes] | None = None
    real = False
    for _ in range(_SOURCE_RETRIES):
        if context.remaining() <= 0.05:
            break
        channel: Channel | None = None
        try:
            channel = await context.connect(host, int(port), name)
            centroids: dict[int, npt.NDArray[np.float64]] = {}
            while len(centroids) < settings.num_targets:
                got = await channel.receive(timeout=context.remaining())
                if got.op is not None or got.replayed:
                    drops.add("unexpected")
                    continue
                try:
                    payload = open_payload(
                        private,
                        got.frame.body[DATA_HEADER.size :],
                        payload_size=spec.payload_size,
                    )
                    if payload is None:
                        continue
                    source, iteration, k, vector = decode_vector(spec, payload)
                except (SealError, DeploymentError):
                    drops.add("seal")
                    continue
                if source != index or iteration != flow or k >= settings.num_targets:
                    drops.add("wrong_centroid")
                    continue
                centroids[k] = vector
            if frame is None:
                matrix = np.stack([centroids[k] for k in range(settings.num_targets)])
                truth = nearest_centroid(point[None, :], matrix)
                # R_σ, drawn once per (source, iteration): every retry resends this frame.
                drawn = randomize_targets(
                    truth,
                    num_targets=settings.num_targets,
                    sampling_rate=settings.sampling_rate,
                    rng=rng,
                )
                target = int(drawn.sent[0])
                real = bool(drawn.is_real[0])
                if real:
                    sealed = seal_payload(
                        keys[target],
                        encode_vector(index, flow, 0, point),
                        payload_size=spec.payload_size,
                    )
                else:
                    sealed = make_dummy(keys[target], payload_size=spec.payload_size)
                frame = (target, sealed, os.urandom(16))
            channel.write_data(*frame)
            await channel.drain(timeout=context.remaining())
            got = await channel.expect(Op.ACK, Op.REJECT, timeout=context.remaining())
            return ("accepted" if got.op == Op.ACK else "rejected"), real
        except (HandshakeError, ChannelClosedError, TimeoutError):
            await asyncio.sleep(0.25)
        finally:
            if channel is not None:
                await channel.close()
    return "failed", real


async def run_kmeans_source(context: NodeContext) -> dict[str, Any]:
    """One source: per iteration, nearest centroid, R_σ, seal, send through its scrambler."""
    spec = context.spec
    _, (index,) = parse_name(context.name)
    row = context.config.row or {}
    point = np.asarray(row.get("point", []), dtype=np.float64)
    if point.shape != (spec.dimension,):
        raise DeploymentError(f"{context.name}: a point of {spec.dimension} coordinates needed")
    keys = TargetKeys.generate()
    coordinator, plan = await context.register(
        {"host": None, "port": 0, "key": base64.b64encode(keys.public_key).decode()}
    )
    rng = _rng(spec, "source", index)
    outcome: dict[str, Any] = {"role": "source", "index": index, "flows": []}
    try:
        for flow, item in enumerate(plan["flows"]):
            status, real = await _exchange(context, flow, item, point, keys.nacl_private_key(), rng)
            outcome["flows"].append({"real": real, "status": status})
    finally:
        await coordinator.close()
    return outcome


# --------------------------------------------------------------------------- scrambler


async def run_kmeans_scrambler(context: NodeContext) -> dict[str, Any]:
    """One scrambler: relay the centroids, collect n points, add d dummies, forward, commit."""
    spec = context.spec
    _, (flow, index) = parse_name(context.name)
    settings = spec.flows[flow]
    plan_ready = asyncio.Event()
    centroids_ready = asyncio.Event()
    full = asyncio.Event()
    members: list[int] = []
    relay: dict[int, list[bytes]] = {}
    received: dict[int, tuple[int, bytes, bytes]] = {}
    intake = {"open": True}
    drops = context.stats.drops[context.name]
    blob_size = sealed_size(spec.payload_size)

    async def from_result(channel: Channel) -> None:
        held: dict[bytes, tuple[int, bytes]] = {}
        while True:
            try:
                got = await channel.receive(timeout=context.remaining())
            except (ChannelClosedError, TimeoutError):
                return
            if got.op is None:
                if got.replayed:
                    continue
                (position,) = DATA_HEADER.unpack_from(got.frame.body)
                sealed = got.frame.body[DATA_HEADER.size :]
                if position >= len(members) or len(sealed) != blob_size:
                    drops.add("malformed_data")
                    continue
                held[got.frame.message_id] = (position, sealed)
                continue
            if got.op != Op.PREPARE or len(got.blob) != _COUNT.size + 32:
                drops.add("unexpected")
                continue
            (count,) = _COUNT.unpack_from(got.blob)
            if count != len(held) or got.blob[_COUNT.size :] != _digest(list(held)):
                drops.add("batch_mismatch")
                await channel.send_blob(Op.REJECT, timeout=context.remaining())
                continue
            if not centroids_ready.is_set():
                for position, sealed in held.values():
                    relay.setdefault(members[position], []).append(sealed)
                centroids_ready.set()
            await channel.send_blob(Op.PREPARED, timeout=context.remaining())

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(plan_ready.wait(), context.remaining())
        channel = context.channel(reader, writer, peer)
        if peer == RESULT:
            await from_result(channel)
            return
        _, (source,) = parse_name(peer)
        if source not in members:
            drops.add("unauthorized")
            return
        try:
            await asyncio.wait_for(centroids_ready.wait(), context.remaining())
            for sealed in relay.get(source, []):
                channel.write_data(0, sealed)
            await channel.drain(timeout=context.remaining())
        except (ChannelClosedError, TimeoutError):
            return
        await receive_source_frames(
            context,
            channel,
            source,
            num_targets=settings.num_targets,
            received=received,
            intake=intake,
            full=full,
            num_members=len(members),
        )

    server = await context.serve(handler, lambda name: name == RESULT or name.startswith("source-"))
    outcome: dict[str, Any] = {"role": "scrambler", "flow": flow, "index": index}
    try:
        coordinator, plan = await context.register(
            {"host": context.advertised, "port": context.port}
        )
        members.extend(int(m) for m in plan["members"])
        targets = plan["targets"]
        keys = [_key(t[-1]) for t in targets]
        plan_ready.set()
        await asyncio.wait_for(centroids_ready.wait(), context.remaining())
        relayed = context.loop.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(full.wait(), min(spec.collect_seconds, context.remaining()))
        intake["open"] = False
        collected = context.loop.time()
        sources, batch = build_batch(
            context,
            received,
            keys,
            num_dummies=settings.num_dummies,
            capped=settings.capped,
            rng=_rng(spec, "scrambler", flow, index),
        )
        prepared = await forward_batch(context, batch, targets)
        committed = prepared and await commit(context, coordinator)
        outcome.update(
            collect_seconds=collected - relayed,
            forward_seconds=context.loop.time() - collected,
            received=len(sources),
            members=len(members),
            forwarded=len(batch),
            dummies=len(batch) - len(sources),
            centroid_frames_relayed=sum(len(v) for v in relay.values()),
            committed=committed,
        )
        await context.wait_close(coordinator)
    finally:
        server.close()
    return outcome


# --------------------------------------------------------------------------- compute


async def run_kmeans_compute(context: NodeContext) -> dict[str, Any]:
    """One compute node: hold batches, sum the committed real points, report sum and count."""
    spec = context.spec
    _, (flow, index) = parse_name(context.name)
    keys = TargetKeys.generate()
    pending: dict[str, dict[bytes, bytes | None]] = {}
    prepared: set[str] = set()
    drops = context.stats.drops[context.name]
    handler = batch_receiver(context, index, keys, pending, prepared)
    server = await context.serve(handler, lambda name: name.startswith(f"scrambler-{flow}-"))
    try:
        coordinator, plan = await context.register(
            {
                "host": context.advertised,
                "port": context.port,
                "key": base64.b64encode(keys.public_key).decode(),
            }
        )
        try:
            final = await coordinator.expect(Op.FINALIZE, timeout=context.remaining())
            committed = set(_loads(final.blob)["committed"])
        except (ChannelClosedError, TimeoutError):
            committed = set()
            drops.add("no_finalize")
        total = np.zeros(spec.dimension, dtype=np.float64)
        row_ids: list[int] = []
        senders = sorted(committed & prepared)
        for sender in senders:
            for payload in pending[sender].values():
                if payload is None:
                    continue
                try:
                    source, iteration, _, vector = decode_vector(spec, payload)
                except DeploymentError:
                    drops.add("malformed_tuple")
                    continue
                if iteration != flow or source in row_ids:
                    drops.add("duplicate_tuple" if source in row_ids else "wrong_flow")
                    continue
                row_ids.append(source)
                total += vector
        partial = {"flow": flow, "index": index, "count": len(row_ids), "sum": total.tolist()}
        sent = await send_partial(context, plan["result"], partial)
        await context.wait_close(coordinator)
    finally:
        server.close()
    return {
        "role": "compute",
        "flow": flow,
        "index": index,
        "delivered": sorted(row_ids),
        "batches": senders,
        "held_uncommitted": sorted(set(pending) - set(senders)),
        "result_sent": sent,
    }


# --------------------------------------------------------------------------- result


async def run_kmeans_result(context: NodeContext) -> dict[str, Any]:
    """The result node: send the centroids out, average the partial sums, I times."""
    spec = context.spec
    row = context.config.row or {}
    centroids = np.asarray(row.get("centroids", []), dtype=np.float64)
    num_centroids = spec.flows[0].num_targets
    if centroids.shape != (num_centroids, spec.dimension):
        raise DeploymentError(f"result: {num_centroids} initial centroids needed")
    expected = {
        compute_name(f, c) for f, flow in enumerate(spec.flows) for c in range(flow.num_targets)
    }
    partials: dict[str, dict[str, Any]] = {}
    complete = [asyncio.Event() for _ in spec.flows]

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        channel = context.channel(reader, writer, peer)
        try:
            got = await channel.expect(Op.RESULT, timeout=context.remaining())
        except (ChannelClosedError, TimeoutError):
            return
        if peer not in partials:
            partials[peer] = _loads(got.blob)
        await channel.send_blob(Op.ACK, timeout=context.remaining())
        flow = parse_name(peer)[1][0]
        if all(compute_name(flow, c) in partials for c in range(num_centroids)):
            complete[flow].set()

    server = await context.serve(handler, lambda name: name in expected)
    history = [centroids.tolist()]
    counts: list[list[int]] = []
    relayed: list[bool] = []
    try:
        coordinator, plan = await context.register(
            {"host": context.advertised, "port": context.port}
        )
        keys = [_key(k) for k in plan["keys"]]
        for flow, item in enumerate(plan["flows"]):
            messages: list[tuple[int, bytes]] = []
            labels: list[int] = []
            targets = []
            for position, (name, host, port, members) in enumerate(item["scramblers"]):
                targets.append([name, host, port])
                for slot, source in enumerate(members):
                    for k in range(num_centroids):
                        payload = encode_vector(source, flow, k, centroids[k])
                        sealed = seal_payload(keys[source], payload, payload_size=spec.payload_size)
                        messages.append((position, sealed))
                        labels.append(slot)
            relayed.append(await forward_batch(context, messages, targets, labels=labels))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(complete[flow].wait(), max(0.01, context.remaining() - 1.0))
            updated = centroids.copy()
            flow_counts = []
            for c in range(num_centroids):
                partial = partials.get(compute_name(flow, c))
                count = int(partial["count"]) if partial is not None else 0
                flow_counts.append(count)
                if partial is not None and count > 0:
                    updated[c] = np.asarray(partial["sum"], dtype=np.float64) / count
            centroids = updated
            counts.append(flow_counts)
            history.append(centroids.tolist())
        with contextlib.suppress(ChannelClosedError, TimeoutError):
            await coordinator.send_blob(Op.DONE, timeout=context.remaining())
        await context.wait_close(coordinator)
    finally:
        server.close()
    return {
        "role": "result",
        "result": [],
        "centroids": centroids.tolist(),
        "history": history,
        "counts": counts,
        "relayed": relayed,
        "missing_partials": sorted(expected - set(partials)),
    }


KMEANS_RUNNERS = {
    "coordinator": run_kmeans_coordinator,
    "source": run_kmeans_source,
    "scrambler": run_kmeans_scrambler,
    "compute": run_kmeans_compute,
    "result": run_kmeans_result,
}

__all__ = [
    "KMEANS_RUNNERS",
    "VECTOR_HEADER",
    "decode_vector",
    "encode_vector",
    "kmeans_sizes",
    "run_kmeans_compute",
    "run_kmeans_coordinator",
    "run_kmeans_result",
    "run_kmeans_scrambler",
    "run_kmeans_source",
]
