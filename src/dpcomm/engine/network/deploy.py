"""A whole deployment on this machine: every role in separate OS processes, over loopback TLS.

:func:`deploy_local` issues one certificate per node, starts the coordinator and the result
node in one process, the compute nodes in another, the scramblers in a third (a scrambler
chosen to crash in its own), the sources in one or two more (each source with its own
identity and connections), runs one Aggregate round and returns a :class:`DeploymentReport`:
the result, which tuples were delivered, what was measured on the wire, and the privacy report
of the same plan by :func:`dpcomm.plan.account_plan` (the accountant accounts the mechanism the
nodes ran: R_σ and the scramblers' dummies and shuffle come from :mod:`dpcomm.protocol`).
"""

from __future__ import annotations

import math
import multiprocessing
import queue as queue_module
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dpcomm.engine.network.pki import CertificateAuthority, NodeCredentials, issue_many
from dpcomm.engine.network.runtime import run_node_group
from dpcomm.engine.network.runtime_spec import (
    COORDINATOR,
    RESULT,
    DeploymentError,
    FlowSpec,
    NodeConfig,
    NodeFaults,
    RoundSpec,
    column_spec,
    scrambler_name,
    sizes_for,
    source_name,
)
from dpcomm.engine.runs import privacy_report
from dpcomm.engine.simulator import simulate
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.privacy import account_plan, num_scramblers
from dpcomm.queries.aggregate import AggregateProgram

#: Sources per OS process (above this, the sources are split over two processes).
SOURCES_PER_PROCESS = 600
_START_TIMEOUT = 60.0


@dataclass(frozen=True, kw_only=True)
class Faults:
    """Faults to inject in a local deployment (for tests and demonstrations).

    Attributes:
        kill_scrambler: global index of a scrambler (flow-major) that dies mid-forward.
        late_sources: sources that send only after the collection deadline.
        replay_sources: sources that resend their data frame byte for byte.
        malformed_sources: sources that send a frame of random bytes.
        unauthenticated_sources: sources that also try a connection without a certificate.
    """

    kill_scrambler: int | None = None
    late_sources: tuple[int, ...] = ()
    replay_sources: tuple[int, ...] = ()
    malformed_sources: tuple[int, ...] = ()
    unauthenticated_sources: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class LinkTraffic:
    """Frames on one directed link, as measured by the sender and by the receiver.

    Attributes:
        sender, receiver: node names.
        frames: frames written by the sender (all kinds).
        data_frames: DATA frames (sealed payloads: real or dummy) among them.
        bytes: TLS application bytes written (frames × frame size).
        frames_received: frames read by the receiver.
    """

    sender: str
    receiver: str
    frames: int
    data_frames: int
    bytes: int
    frames_received: int


@dataclass(frozen=True, kw_only=True)
class DeploymentReport:
    """What one deployed round produced and what was measured on the wire.

    Attributes:
        result: the decentralized result (rows in :func:`dpcomm.queries.groupby.evaluate`'s
            order).
        delivered: per flow (grouping set), the sorted row ids of the real tuples aggregated.
        links: per directed link, frames and bytes.
        channels: distinct peers per node over every link (the coordinator's included).
        data_channels: distinct peers per node without the coordinator's control links.
        frame_size: the length of every frame.
        frame_lengths: every distinct frame length observed (written or read).
        committed: the batch senders whose batches were committed.
        lost_scramblers: scramblers whose batch was lost (e.g. they died mid-round).
        left_out_sources: per flow, sources whose message was not accepted by the deadline.
        dropped: per node, frames and connections dropped, by reason.
        privacy: the privacy report of the plan (``dpcomm.engine.runs.privacy_report``).
        simulated: the simulator's message and byte counts for the same plan and seed.
        timings: seconds spent on certificates, process start-up, the round and in total.
        scramblers: per scrambler, what it received, forwarded and whether it committed.
        discarded: per compute node, senders whose frames it held but discarded (uncommitted).
        errors: per node, errors that stopped it (empty in a clean round).
    """

    result: list[dict[str, Any]]
    delivered: dict[str, tuple[int, ...]]
    links: tuple[LinkTraffic, ...]
    channels: dict[str, int]
    data_channels: dict[str, int]
    frame_size: int
    frame_lengths: tuple[int, ...]
    committed: tuple[str, ...]
    lost_scramblers: tuple[str, ...]
    left_out_sources: dict[str, tuple[int, ...]]
    dropped: dict[str, dict[str, int]]
    privacy: dict[str, Any]
    simulated: dict[str, Any]
    timings: dict[str, float]
    scramblers: dict[str, dict[str, Any]] = field(default_factory=dict)
    discarded: dict[str, tuple[str, ...]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def masks(self, num_rows: int) -> list[np.ndarray[Any, np.dtype[np.bool_]]]:
        """The delivered row ids as one boolean mask per flow."""
        masks = []
        for rows in self.delivered.values():
            mask = np.zeros(num_rows, dtype=bool)
            mask[list(rows)] = True
            masks.append(mask)
        return masks

    def dropped_total(self, reason: str | None = None) -> int:
        """Drops over all nodes (of one reason, or all)."""
        return sum(
            count
            for counts in self.dropped.values()
            for name, count in counts.items()
            if reason is None or name == reason
        )

    @property
    def frames(self) -> int:
        """Frames written on every link."""
        return sum(link.frames for link in self.links)

    @property
    def data_frames(self) -> int:
        """DATA frames written on every link."""
        return sum(link.data_frames for link in self.links)

    @property
    def bytes(self) -> int:
        """TLS application bytes written on every link."""
        return sum(link.bytes for link in self.links)

    def wire_summary(self) -> dict[str, Any]:
        """Totals of the wire measurements, JSON-ready."""
        by_role: dict[str, int] = {}
        for node, count in self.data_channels.items():
            role = node.split("-")[0]
            by_role[role] = max(by_role.get(role, 0), count)
        data = [c for c in self.data_channels.values() if c]
        return {
            "frame_size": self.frame_size,
            "frame_lengths_observed": list(self.frame_lengths),
            "frames": self.frames,
            "data_frames": self.data_frames,
            "control_frames": self.frames - self.data_frames,
            "bytes": self.bytes,
            "links": len(self.links),
            "max_channels_per_node": max(self.channels.values(), default=0),
            "max_data_channels_per_node": max(data, default=0),
            "mean_data_channels_per_node": float(np.mean(data)) if data else 0.0,
            "max_data_channels_by_role": by_role,
            "dropped": self.dropped_total(),
        }


def round_spec(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    *,
    seed: int | None,
    round_id: int = 1,
    collect_seconds: float = 10.0,
    round_seconds: float = 60.0,
) -> RoundSpec:
    """The public parameters of one round of ``program`` with ``countermeasure``."""
    query = program.query
    table = program.table
    measured = []
    for output in query.outputs:
        if output.column and output.function:
            name = table.column(output.column).name
            if name not in measured:
                measured.append(name)
    flows = []
    sources = table.num_rows
    for index, name in enumerate(program.flow_names):
        columns = tuple(table.column(c).name for c in query.grouping_sets[index])
        carried = columns + tuple(c for c in measured if c not in columns)
        targets = program.compute_nodes_of(index)
        if targets == 1 or isinstance(countermeasure, NoCountermeasure):
            flows.append(
                FlowSpec(
                    name=name, columns=columns, carried=carried, num_targets=targets, mode="direct"
                )
            )
        elif isinstance(countermeasure, LocalFlooding):
            flows.append(
                FlowSpec(
                    name=name,
                    columns=columns,
                    carried=carried,
                    num_targets=targets,
                    mode="local",
                    sampling_rate=countermeasure.sampling_rate,
                    num_dummies=countermeasure.num_dummies,
                )
            )
        else:
            assert isinstance(countermeasure, Scramblers)
            flows.append(
                FlowSpec(
                    name=name,
                    columns=columns,
                    carried=carried,
                    num_targets=targets,
                    mode="scrambler",
                    sampling_rate=countermeasure.sampling_rate,
                    batch_size=countermeasure.batch_size,
                    num_dummies=countermeasure.num_dummies,
                    capped=countermeasure.capped,
                    num_scramblers=num_scramblers(sources, countermeasure.batch_size),
                )
            )
    schema = tuple(column_spec(c) for c in table.columns)
    payload, frame = sizes_for(schema, tuple(flows))
    return RoundSpec(
        round_id=round_id,
        num_sources=sources,
        sql=query.sql,
        table_name=table.name,
        schema=schema,
        flows=tuple(flows),
        payload_size=payload,
        frame_size=frame,
        seed=seed,
        collect_seconds=collect_seconds,
        round_seconds=round_seconds,
    )


def source_row(program: AggregateProgram, index: int) -> dict[str, Any]:
    """Source ``index``'s own row (None for NULL)."""
    row: dict[str, Any] = {}
    for column in program.table.columns:
        value = None if bool(column.is_null[index]) else column.values[index].item()
        row[column.name] = value
    return row


def node_configs(
    program: AggregateProgram,
    spec: RoundSpec,
    *,
    coordinator_port: int = 0,
    faults: Faults = Faults(),
) -> dict[str, NodeConfig]:
    """The config of every node of the round, by name (sources carry their own row)."""
    configs: dict[str, NodeConfig] = {}
    scramblers = [name for name, role in spec.node_names() if role == "scrambler"]
    victim = None
    if faults.kill_scrambler is not None:
        if not 0 <= faults.kill_scrambler < len(scramblers):
            raise InvalidParameterError(
                "kill_scrambler",
                f"a scrambler index in [0, {len(scramblers) - 1}]",
                faults.kill_scrambler,
            )
        victim = scramblers[faults.kill_scrambler]
    for name, role in spec.node_names():
        extra: dict[str, Any] = {}
        if role == "source":
            index = int(name.split("-")[1])
            extra["row"] = source_row(program, index)
            extra["faults"] = NodeFaults(
                late=index in faults.late_sources,
                replay=index in faults.replay_sources,
                malformed=index in faults.malformed_sources,
                unauthenticated=index in faults.unauthenticated_sources,
            )
        elif name == victim:
            extra["faults"] = NodeFaults(crash_mid_forward=True)
        configs[name] = NodeConfig(
            name=name, role=role, round=spec, coordinator_port=coordinator_port, **extra
        )
    return configs


def write_deployment(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    directory: str | Path,
    *,
    seed: int | None = None,
    coordinator_host: str = "127.0.0.1",
    coordinator_port: int = 7400,
    collect_seconds: float = 30.0,
    timeout: float = 300.0,
) -> dict[str, Path]:
    """Write a CA, one certificate and one config per node into ``directory`` (multi-host).

    Every node is then started on its host with ``dpcomm node run``; edit ``listen_host``,
    ``listen_port`` and ``advertise_host`` in a node's config to place it. Returns the config
    path of every node. The CA key (``pki/ca.key``) must stay with the operator.
    """
    folder = Path(directory)
    spec = round_spec(
        program,
        countermeasure,
        seed=seed,
        round_id=secrets.randbelow(1 << 62) + 1,
        collect_seconds=float(collect_seconds),
        round_seconds=float(timeout),
    )
    configs = node_configs(program, spec, coordinator_port=coordinator_port)
    authority = CertificateAuthority.create(folder / "pki")
    issue_many(authority, list(configs), folder / "pki")
    paths = {}
    (folder / "configs").mkdir(parents=True, exist_ok=True)
    for name, config in configs.items():
        settings = replace(config, coordinator_host=coordinator_host)
        if name == COORDINATOR:
            settings = replace(settings, listen_host="0.0.0.0", listen_port=coordinator_port)
            settings = replace(settings, advertise_host=coordinator_host)
        path = folder / "configs" / f"{name}.json"
        path.write_text(settings.to_json())
        paths[name] = path
    return paths


def _process_main(
    group: str,
    configs: list[NodeConfig],
    credentials: dict[str, NodeCredentials],
    channel: Any,
    ports: Any,
) -> None:
    """Entry point of one deployment process: run its nodes, report to the launcher.

    Processes start while the coordinator is still binding its port; every process but the
    coordinator's takes the port from ``ports`` before it starts its nodes.
    """

    def on_listening(name: str, port: int) -> None:
        if name == COORDINATOR:
            channel.put(("port", group, port))

    try:
        if not any(config.role == "coordinator" for config in configs):
            port = int(ports.get(timeout=_START_TIMEOUT))
            configs = [replace(config, coordinator_port=port) for config in configs]
        outcome = run_node_group(configs, credentials, on_listening=on_listening)
        channel.put(("done", group, outcome))
    except BaseException as error:  # reported to the launcher, never lost
        channel.put(("error", group, f"{type(error).__name__}: {error}"))


def _groups(spec: RoundSpec, victim: str | None) -> dict[str, list[str]]:
    names = spec.node_names()
    groups: dict[str, list[str]] = {
        "control": [COORDINATOR, RESULT],
        "compute": [n for n, r in names if r == "compute"],
        "scramblers": [n for n, r in names if r == "scrambler" and n != victim],
    }
    if victim is not None:
        groups["victim"] = [victim]
    sources = [n for n, r in names if r == "source"]
    parts = max(1, math.ceil(len(sources) / SOURCES_PER_PROCESS))
    for part in range(parts):
        groups[f"sources-{part}"] = sources[part::parts]
    return {g: members for g, members in groups.items() if members}


def _merge_wire(outcomes: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    sent: dict[tuple[str, str], list[int]] = {}
    received: dict[tuple[str, str], int] = {}
    lengths: set[int] = set()
    drops: dict[str, dict[str, int]] = {}
    for outcome in outcomes.values():
        wire = outcome["wire"]
        for sender, receiver, frames, data, size in wire["sent"]:
            entry = sent.setdefault((sender, receiver), [0, 0, 0])
            entry[0] += frames
            entry[1] += data
            entry[2] += size
        for sender, receiver, frames, _, _ in wire["received"]:
            received[(sender, receiver)] = received.get((sender, receiver), 0) + frames
        lengths.update(wire["frame_lengths"])
        for node, counts in wire["drops"].items():
            merged = drops.setdefault(node, {})
            for reason, count in counts.items():
                merged[reason] = merged.get(reason, 0) + count
    return {"sent": sent, "received": received, "lengths": lengths, "drops": drops}


def _channels(links: tuple[LinkTraffic, ...], *, control: bool) -> dict[str, int]:
    peers: dict[str, set[str]] = {}
    for link in links:
        if not control and COORDINATOR in (link.sender, link.receiver):
            continue
        peers.setdefault(link.sender, set()).add(link.receiver)
        peers.setdefault(link.receiver, set()).add(link.sender)
    return {node: len(others) for node, others in sorted(peers.items())}


def launch(
    spec: RoundSpec,
    configs: dict[str, NodeConfig],
    *,
    workdir: str | Path | None,
    timeout: float,
) -> tuple[dict[str, dict[str, Any]], dict[str, str], str | None, dict[str, float]]:
    """Certify every node and run the nodes of ``configs`` in separate processes on loopback.

    Returns each process group's outcome, the errors of the groups, the scrambler chosen to
    crash (if any) and the timings (``started`` is the perf-counter time it began).
    """
    started = time.perf_counter()
    temporary = workdir is None
    directory = (
        Path(tempfile.mkdtemp(prefix="dpcomm-deploy-")) if workdir is None else Path(workdir)
    )
    processes: dict[str, Any] = {}
    try:
        pki = directory / "pki"
        authority = CertificateAuthority.create(pki, overwrite=True)
        credentials = issue_many(authority, list(configs), pki)
        certified = time.perf_counter()
        victim = next((n for n, c in configs.items() if c.faults.crash_mid_forward), None)
        groups = _groups(spec, victim)
        context = multiprocessing.get_context("spawn")
        channel = context.Queue()
        ports = context.Queue()
        for group, members in groups.items():
            process = context.Process(
                target=_process_main,
                args=(
                    group,
                    [configs[n] for n in members],
                    {n: credentials[n] for n in members},
                    channel,
                    ports,
                ),
                daemon=True,
            )
            process.start()
            processes[group] = process
        deadline = time.monotonic() + timeout + _START_TIMEOUT
        port = None
        outcomes: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        while port is None:
            message = _next(channel, processes, deadline)
            if message[0] == "port":
                port = int(message[2])
            elif message[0] == "error":
                raise DeploymentError(f"process {message[1]} failed: {message[2]}")
        for _ in range(len(groups) - 1):
            ports.put(port)
        launched = time.perf_counter()
        while len(outcomes) + len(errors) < len(groups):
            dead = [
                g
                for g, p in processes.items()
                if not p.is_alive() and g not in outcomes and g not in errors
            ]
            try:
                message = channel.get(timeout=0.2)
            except queue_module.Empty:
                for group in dead:
                    if processes[group].exitcode not in (0, None):
                        errors[group] = f"process exited with status {processes[group].exitcode}"
                if time.monotonic() > deadline:
                    raise DeploymentError(f"the round did not finish within {timeout} s") from None
                continue
            if message[0] == "done":
                outcomes[message[1]] = message[2]
            elif message[0] == "error":
                errors[message[1]] = message[2]
        finished = time.perf_counter()
    finally:
        for process in processes.values():
            process.join(timeout=5.0)
            if process.is_alive():
                process.kill()
                process.join(timeout=5.0)
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)
    if victim is not None:
        errors.pop("victim", None)
    timings = {
        "started": started,
        "certificates_seconds": certified - started,
        "launch_seconds": launched - certified,
        "wall_seconds": finished - started,
    }
    return outcomes, errors, victim, timings


def since(timings: dict[str, float], started: float) -> dict[str, float]:
    """:func:`launch`'s timings with the time since ``started`` before it added."""
    offset = timings["started"] - started
    result = {k: v for k, v in timings.items() if k != "started"}
    result["certificates_seconds"] += offset
    result["wall_seconds"] += offset
    return result


def deploy_local(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    *,
    delta: float,
    seed: int | None = 0,
    workdir: str | Path | None = None,
    timeout: float = 120.0,
    collect_seconds: float = 10.0,
    kill_scrambler: int | None = None,
    faults: Faults | None = None,
) -> DeploymentReport:
    """Run one round of ``program`` as a real deployment on this machine (loopback TLS).

    Args:
        program: the Aggregate program (its table's rows are the sources).
        countermeasure: applied to every data-dependent flow, as in ``dpcomm run``.
        delta: δ of each data-dependent cluster for the privacy report.
        seed: seed of every random draw (None: fresh entropy).
        workdir: where certificates and configs go (default: a temporary directory, removed).
        timeout: hard deadline of the round in seconds (processes are killed after it).
        collect_seconds: how long a scrambler waits for its n frames.
        kill_scrambler: global index of a scrambler that dies mid-forward (fault injection).
        faults: further injected faults.
    """
    if not (isinstance(timeout, int | float) and timeout > 0):
        raise InvalidParameterError("timeout", "a number of seconds > 0", timeout)
    if not (isinstance(collect_seconds, int | float) and 0 < collect_seconds < timeout):
        raise InvalidParameterError(
            "collect_seconds", f"a number of seconds in (0, {timeout})", collect_seconds
        )
    faults = faults or Faults()
    if kill_scrambler is not None:
        faults = replace(faults, kill_scrambler=kill_scrambler)
    privacy = account_plan(program.plan, countermeasure, delta=delta)
    simulation = simulate(program, countermeasure, delta=delta, rng=seed)
    started = time.perf_counter()
    spec = round_spec(
        program,
        countermeasure,
        seed=seed,
        round_id=secrets.randbelow(1 << 62) + 1,
        collect_seconds=float(collect_seconds),
        round_seconds=float(timeout),
    )
    configs = node_configs(program, spec, faults=faults)
    outcomes, errors, _, timings = launch(spec, configs, workdir=workdir, timeout=timeout)
    timings = since(timings, started)
    report = _report(
        program,
        spec,
        outcomes,
        errors,
        privacy=privacy_report(privacy),
        simulation=simulation,
        timings=timings,
    )
    actual = actual_batch_sizes(spec, report.scramblers)
    if actual:
        as_run = account_plan(program.plan, countermeasure, delta=delta, batch_sizes=actual)
        report = replace(report, privacy=privacy_report(as_run))
    return report


def actual_batch_sizes(
    spec: RoundSpec, scramblers: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[int, int]]:
    """Per scrambled flow, how many scramblers batched how many sources in this round.

    The guarantee holds for the batches as run: a scrambler whose sources missed the deadline
    ran A_σ^{k,d} with k < n, which is less private. A scrambler that reported nothing (it
    died) is counted as a batch of one source, the worst case, since its k is unknown.
    """
    result: dict[str, dict[int, int]] = {}
    for index, flow in enumerate(spec.flows):
        if flow.mode != "scrambler":
            continue
        reported = [int(o["received"]) for o in scramblers.values() if o.get("flow") == index]
        sizes: dict[int, int] = {}
        for size in reported:
            sizes[size] = sizes.get(size, 0) + 1
        missing = flow.num_scramblers - len(reported)
        if missing > 0:
            sizes[1] = sizes.get(1, 0) + missing
        result[flow.name] = sizes
    return result


def _next(channel: Any, processes: Mapping[str, Any], deadline: float) -> tuple[Any, ...]:
    while True:
        try:
            message: tuple[Any, ...] = channel.get(timeout=0.2)
            return message
        except queue_module.Empty:
            if time.monotonic() > deadline:
                raise DeploymentError("the coordinator did not start in time") from None
            for group, process in processes.items():
                if not process.is_alive():
                    raise DeploymentError(
                        f"process {group} exited with status {process.exitcode}"
                    ) from None


def _report(
    program: object,
    spec: RoundSpec,
    outcomes: Mapping[str, dict[str, Any]],
    errors: dict[str, str],
    *,
    privacy: dict[str, Any],
    simulation: Any,
    timings: dict[str, float],
) -> DeploymentReport:
    nodes: dict[str, Any] = {}
    for group, outcome in outcomes.items():
        nodes.update(outcome["nodes"])
        for name, message in outcome["errors"].items():
            errors[name] = message
        del group
    wire = _merge_wire(outcomes)
    keys = set(wire["sent"]) | set(wire["received"])
    links = tuple(
        LinkTraffic(
            sender=sender,
            receiver=receiver,
            frames=wire["sent"].get((sender, receiver), [0, 0, 0])[0],
            data_frames=wire["sent"].get((sender, receiver), [0, 0, 0])[1],
            bytes=wire["sent"].get((sender, receiver), [0, 0, 0])[2],
            frames_received=wire["received"].get((sender, receiver), 0),
        )
        for sender, receiver in sorted(keys)
    )
    delivered: dict[str, list[int]] = {flow.name: [] for flow in spec.flows}
    left_out: dict[str, list[int]] = {flow.name: [] for flow in spec.flows}
    for outcome in nodes.values():
        if outcome["role"] == "compute":
            delivered[spec.flows[outcome["flow"]].name] += outcome["delivered"]
        elif outcome["role"] == "source":
            for flow, item in enumerate(outcome["flows"]):
                if item["status"] != "accepted":
                    left_out[spec.flows[flow].name].append(outcome["index"])
    coordinator = nodes.get(COORDINATOR, {})
    result = nodes.get(RESULT, {}).get("result", [])
    if "round_seconds" in coordinator:
        timings = {**timings, "round_seconds": coordinator["round_seconds"]}
        timings["registration_seconds"] = coordinator["registration_seconds"]
    sim = simulation.efficiency
    data_flows = sum(
        f.messages for f in simulation.traffic if "result" not in f.flow.split(" ")[-1]
    )
    simulated = {
        "messages": sim.messages,
        "data_messages": data_flows,
        "dummy_messages": sim.dummy_messages,
        "frame_bytes": sim.frame_bytes,
        "bytes": sim.bytes,
        "bytes_at_deployed_frame_size": sim.messages * spec.frame_size,
        "max_channels_per_node": sim.max_channels,
        "max_channels_by_role": dict(sim.max_channels_by_role),
    }
    return DeploymentReport(
        result=result,
        delivered={name: tuple(sorted(rows)) for name, rows in delivered.items()},
        links=links,
        channels=_channels(links, control=True),
        data_channels=_channels(links, control=False),
        frame_size=spec.frame_size,
        frame_lengths=tuple(sorted(wire["lengths"])),
        committed=tuple(coordinator.get("committed", ())),
        lost_scramblers=tuple(coordinator.get("lost", ())),
        left_out_sources={name: tuple(sorted(rows)) for name, rows in left_out.items()},
        dropped=wire["drops"],
        privacy=privacy,
        simulated=simulated,
        timings=timings,
        scramblers={
            name: {k: v for k, v in outcome.items() if k != "role"}
            for name, outcome in sorted(nodes.items())
            if outcome["role"] == "scrambler"
        },
        discarded={
            name: tuple(outcome["held_uncommitted"])
            for name, outcome in sorted(nodes.items())
            if outcome["role"] == "compute" and outcome["held_uncommitted"]
        },
        errors=errors,
    )


__all__ = [
    "DeploymentReport",
    "Faults",
    "LinkTraffic",
    "actual_batch_sizes",
    "deploy_local",
    "launch",
    "node_configs",
    "round_spec",
    "scrambler_name",
    "source_name",
    "write_deployment",
]
