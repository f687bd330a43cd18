"""The network engine: a round of a program over a network of nodes, as a :class:`Run`.

:class:`NetworkEngine` runs the same program, with the same roles and the same draws, as the
in-memory engine, but every node is a program of its own that only sends messages:

* ``transport="memory"``: every node a coroutine of one event loop (the engine contract test,
  seconds, no sockets);
* ``transport="tls"``: every node in separate processes on this machine, each with its own
  certificate, over mutually authenticated TLS 1.3 on loopback (``dpcomm deploy local``).

The run it returns is assembled from what the nodes measured: the result the result node
merged, which tuples were counted (each source's draw and whether its batch committed), the
messages of every routed flow as sent, the dummies as their openers counted them, and the wire
itself (frames and bytes per link, drops). Its guarantee is that of the batches as they ran.
:func:`write_deployment` writes the certificates and configs of a round for several hosts.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dpcomm.engine.network.launcher import (
    Workers,
    check_new_authority,
    launch,
    run_in_memory,
    terminated_as_error,
)
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.pki import CertificateAuthority, issue_many
from dpcomm.engine.network.report import DeploymentDetails, round_failures, wire_report
from dpcomm.engine.network.spec import DeploymentError, NodeConfig, NodeFaults, RoundSpec
from dpcomm.engine.run import Prepared, Run, prepare, run_efficiency, warn_above_target
from dpcomm.engine.traffic import FlowTraffic
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, NoCountermeasure, Scramblers
from dpcomm.plan.model import ExecutionPlan
from dpcomm.plan.privacy import account_plan
from dpcomm.protocol.randomness import check_seed
from dpcomm.queries.program import QueryProgram


@dataclass(frozen=True, kw_only=True)
class Faults:
    """Faults to inject in a round (for tests and demonstrations).

    Attributes:
        kill_scrambler: global index of a scrambler (flow-major) that dies mid-forward.
        late_sources: sources that send only after the collection deadline.
        replay_sources: sources that resend their data frames byte for byte.
        malformed_sources: sources that send a frame of random bytes after each data frame.
        unauthenticated_sources: sources that also try a connection without a certificate.
    """

    kill_scrambler: int | None = None
    late_sources: tuple[int, ...] = ()
    replay_sources: tuple[int, ...] = ()
    malformed_sources: tuple[int, ...] = ()
    unauthenticated_sources: tuple[int, ...] = ()


def node_configs(
    program: QueryProgram,
    spec: RoundSpec,
    *,
    coordinator_host: str = "127.0.0.1",
    coordinator_port: int = 0,
    faults: Faults = Faults(),
) -> dict[str, NodeConfig]:
    """The config of every node of the round, by name (sources carry their own row)."""
    names = spec.node_names()
    scramblers = [n for n in names if n.role == "scrambler"]
    victim = None
    if faults.kill_scrambler is not None:
        if not 0 <= faults.kill_scrambler < len(scramblers):
            raise InvalidParameterError(
                "kill_scrambler",
                f"a scrambler index in [0, {len(scramblers) - 1}]"
                if scramblers
                else "no value (this round has no scramblers)",
                faults.kill_scrambler,
            )
        victim = scramblers[faults.kill_scrambler]
    sources = [n for n in names if n.role == "source"]
    rows = program.encode_rows([n.index for n in sources])
    row_of = dict(zip(sources, rows, strict=True))
    configs: dict[str, NodeConfig] = {}
    for name in names:
        node_faults = NodeFaults()
        if name.role == "source":
            node_faults = NodeFaults(
                late=name.index in faults.late_sources,
                replay=name.index in faults.replay_sources,
                malformed=name.index in faults.malformed_sources,
                unauthenticated=name.index in faults.unauthenticated_sources,
            )
        elif name == victim:
            # Half a batch on the wire, then the process dies.
            batch = max(spec.transformed.batches[spec.data_flows[name.group]])
            node_faults = NodeFaults(crash_after_frames=max(1, batch // 2))
        configs[str(name)] = NodeConfig(
            name=str(name),
            round=spec,
            coordinator_host=coordinator_host,
            coordinator_port=coordinator_port,
            row=row_of.get(name),
            faults=node_faults,
        )
    return configs


def _merge_wire(wires: list[dict[str, Any]]) -> dict[str, Any]:
    sent: dict[tuple[str, str], list[int]] = {}
    received: dict[tuple[str, str], int] = {}
    lengths: set[int] = set()
    drops: dict[str, dict[str, int]] = {}
    messages: dict[tuple[str, str, str], int] = {}
    dummies: dict[str, int] = {}
    for wire in wires:
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
        for flow, sender, receiver, count in wire["messages"]:
            key = (flow, sender, receiver)
            messages[key] = messages.get(key, 0) + count
        for flow, count in wire["dummies"].items():
            dummies[flow] = dummies.get(flow, 0) + count
    return {
        "sent": sent,
        "received": received,
        "lengths": lengths,
        "drops": drops,
        "messages": messages,
        "dummies": dummies,
    }


def actual_batch_sizes(
    spec: RoundSpec,
    scramblers: Mapping[str, Mapping[str, Any]],
    sources: Mapping[str, Mapping[str, Any]],
    worst_size: Callable[[str, range], int | None],
) -> dict[str, dict[int, int]]:
    """Per scrambled flow, how many scramblers batched how many sources in this round.

    The guarantee holds for the batches as run: a scrambler whose sources missed the deadline
    ran its mechanism with m < n sources. A scrambler that reported nothing (it died) batched
    between the members that got its acknowledgement and those plus the ones whose frame's
    fate is unknown (no acknowledgement, or no report at all); what the observer saw of it is
    a prefix of its shuffled output, so its m is accounted at ``worst_size`` of that range
    (None: no m in the range sends anything).
    """
    unknown = spec.public_program.num_sources - len(sources)
    result: dict[str, dict[int, int]] = {}
    for flow, planned in spec.transformed.batches.items():
        reported = {name for name, o in scramblers.items() if o.get("flow") == flow}
        sizes: dict[int, int] = {}
        for name in reported:
            size = len(scramblers[name]["batched"])
            sizes[size] = sizes.get(size, 0) + 1
        for scrambler in spec.scramblers(flow):
            if str(scrambler) in reported:
                continue
            statuses = [
                o["flows"][flow]["status"]
                for o in sources.values()
                if o["flows"].get(flow, {}).get("scrambler") == str(scrambler)
            ]
            low = statuses.count("accepted")
            high = min(max(planned), low + statuses.count("failed") + unknown)
            worst = worst_size(flow, range(max(low, 1), high + 1))
            if worst is not None:
                sizes[worst] = sizes.get(worst, 0) + 1
        result[flow] = sizes
    return result


def _worst_batch_size(
    plan: ExecutionPlan,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    delta: float,
) -> Callable[[str, range], int | None]:
    """The size in a range whose batch has the weakest guarantee for its cluster.

    A capped scrambler of m sources with d > (T − 1)·m cannot run: it stops before sending, so
    such an m is not a candidate.
    """

    def worst(flow: str, sizes: range) -> int | None:
        chosen: tuple[tuple[float, float], int] | None = None
        for size in sizes:
            try:
                guarantee = account_plan(
                    plan,
                    countermeasures,
                    delta=delta,
                    batch_sizes={flow: {size: 1}},
                    compose_pld=False,  # only the clusters' guarantees are compared
                )
            except InvalidParameterError:
                continue  # a capped batch too small to run: it sent nothing
            cluster = next(
                c.guarantee
                for c in guarantee.clusters
                if any(m.flow.name == flow for m in c.cluster.members)
            )
            key = (cluster.epsilon, cluster.delta)
            if chosen is None or key > chosen[0]:
                chosen = (key, size)
        return None if chosen is None else chosen[1]

    return worst


def assemble_run(
    program: QueryProgram,
    spec: RoundSpec,
    prepared: Prepared,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    outcomes: Mapping[str, dict[str, Any]],
    errors: dict[str, str],
    *,
    delta: float,
    seed: int | None,
    seconds: float,
    timings: Mapping[str, float],
    target_epsilon: float | None = None,
    max_left_out: float = 0.0,
) -> Run:
    """The :class:`Run` of a round from what its nodes reported.

    ``run.details`` is the round's :class:`~dpcomm.engine.network.report.DeploymentDetails`;
    its ``failures`` say why the round failed, if it did.
    """
    nodes: dict[str, Any] = {}
    for outcome in outcomes.values():
        nodes.update(outcome["nodes"])
        errors.update(outcome["errors"])
    merged = _merge_wire([o["wire"] for o in outcomes.values()])
    transformed = prepared.transformed
    traffic = []
    for routed in transformed.flows:
        edges = sorted(
            (spec.node_id(NodeName.parse(s)), spec.node_id(NodeName.parse(r)), n)
            for (f, s, r), n in merged["messages"].items()
            if f == routed.name and n > 0
        )
        columns = np.array(edges, dtype=np.int64).reshape(-1, 3)
        traffic.append(
            FlowTraffic(
                routed.name,
                columns[:, 0].copy(),
                columns[:, 1].copy(),
                columns[:, 2].copy(),
                merged["dummies"].get(routed.name, 0),
            )
        )
    coordinator = nodes.get(str(COORDINATOR), {})
    committed = {flow: set(names) for flow, names in coordinator.get("committed", {}).items()}
    sources = program.num_sources
    real = {flow: np.zeros(sources, dtype=bool) for flow in spec.data_flows}
    left_out: dict[str, list[int]] = {flow: [] for flow in spec.data_flows}
    for name, outcome in nodes.items():
        if outcome.get("role") != "source":
            continue
        for flow, item in outcome["flows"].items():
            real[flow][outcome["index"]] = bool(item["real"])
            behind = item.get("scrambler")
            lost_batch = behind is not None and behind not in committed.get(flow, set())
            if item["status"] not in ("accepted", "committed") or lost_batch:
                left_out[flow].append(int(outcome["index"]))
        del name
    delivered: dict[str, np.ndarray[Any, np.dtype[np.bool_]]] = {}
    scramblers = {n: o for n, o in nodes.items() if o.get("role") == "scrambler"}
    for flow in spec.data_flows:
        counted = np.zeros(sources, dtype=bool)
        if isinstance(spec.countermeasure(flow), Scramblers):
            for name, outcome in scramblers.items():
                if outcome["flow"] == flow and name in committed.get(flow, set()):
                    counted[np.asarray(outcome["batched"], dtype=np.int64)] = True
        else:
            for i in range(sources):
                counted[i] = str(NodeName.source(i)) in committed.get(flow, set())
        delivered[flow] = counted & real[flow]
    outputs = {}
    for flow, target, data in nodes.get(str(RESULT), {}).get("outputs", []):
        outputs[(str(flow), int(target))] = program.decode_output(str(flow), bytes.fromhex(data))
    state = program.merge(program.initial_state(), program.num_stages - 1, outputs)
    sources_reports = {n: o for n, o in nodes.items() if o.get("role") == "source"}
    actual = actual_batch_sizes(
        spec, scramblers, sources_reports, _worst_batch_size(program.plan, countermeasures, delta)
    )
    planned = {flow: dict(Counter(sizes)) for flow, sizes in transformed.batches.items()}
    privacy = prepared.privacy
    if actual != planned:
        privacy = account_plan(program.plan, countermeasures, delta=delta, batch_sizes=actual)
        warn_above_target(
            privacy, target_epsilon, "batches smaller than planned ran: late or lost nodes"
        )
    measured = dict(timings)
    if "round_seconds" in coordinator:
        measured["registration_seconds"] = coordinator["registration_seconds"]
        measured["round_seconds"] = coordinator["round_seconds"]
    lost = sorted(
        name for flow in transformed.batches for name in coordinator.get("lost", {}).get(flow, [])
    )
    reported = {int(o["index"]) for o in sources_reports.values()}
    silent = [i for i in range(sources) if i not in reported]  # a source that never reported
    for flow in spec.data_flows:
        left_out[flow] = sorted(set(left_out[flow]) | set(silent))
    missing = tuple((str(f), int(t)) for f, t in nodes.get(str(RESULT), {}).get("missing", []))
    if str(RESULT) not in nodes:
        missing = (("*", -1),)
    left_out_sources = {flow: tuple(rows) for flow, rows in left_out.items() if rows}
    details = DeploymentDetails(
        wire=wire_report(spec.frame_size, merged, measured),
        lost_scramblers=tuple(lost),
        left_out_sources=left_out_sources,
        missing_outputs=missing,
        errors=dict(errors),
        failures=round_failures(
            num_sources=sources,
            left_out_sources=left_out_sources,
            missing_outputs=missing,
            errors=errors,
            delivered=delivered,
            max_left_out=max_left_out,
        ),
    )
    return Run(
        engine="network",
        program=program,
        transformed=transformed,
        privacy=privacy,
        state=state,
        result=program.result(state),
        delivered=delivered,
        traffic=tuple(traffic),
        efficiency=run_efficiency(transformed, traffic),
        seed=seed,
        seconds=seconds,
        details=details,
        result_computed_here=False,
    )


#: Longest round accepted (``timeout``), in seconds: one day.
MAX_ROUND_SECONDS = 86_400.0


def round_deadlines(num_sources: int, *, stages: int = 1, flows: int = 1) -> tuple[float, float]:
    """Default (collect_seconds, timeout) of a round of ``num_sources`` sources.

    A scrambler's window opens when it has its plan, once every node has registered; the
    sources connect to their scramblers meanwhile, one TLS handshake per source and flow of
    the stage (``flows``: G for an Aggregate over G grouping sets), all on the scramblers'
    process. On this 2-core machine a 10,000-source round spends about 17 ms of CPU per
    source (docs/benchmarks.md), so the window grows by 1/150 s per source and flow: no
    source misses it by default, and a scrambler closes it as soon as its n sources have
    arrived, so a long window costs nothing when they do. The hard deadline covers
    registration, every stage's window and commit, and the result.
    """
    collect = 20.0 + flows * num_sources / 150.0
    timeout = 60.0 + num_sources / 100.0 + stages * (2 * collect + 10.0)
    return collect, timeout


class NetworkEngine:
    """Runs a program's round over a network of nodes (see the module's docstring).

    Args:
        transport: ``"tls"`` (separate processes, mutual TLS 1.3 on loopback) or ``"memory"``
            (one event loop, no sockets).
        timeout: hard deadline of the round in seconds (None: :func:`round_deadlines`).
        collect_seconds: how long a scrambler waits for its sources, per stage (None:
            :func:`round_deadlines`).
        workdir: where certificates go (default: a temporary directory, removed); a folder
            that already holds a certificate authority is refused unless ``force``.
        faults: injected faults.
        force: replace the certificate authority and keys already in ``workdir``.
        max_left_out: the fraction of sources that may be left out before the round counts
            as failed (``run.details.failures``).
    """

    name = "network"

    def __init__(
        self,
        *,
        transport: Literal["tls", "memory"] = "tls",
        timeout: float | None = None,
        collect_seconds: float | None = None,
        workdir: str | Path | None = None,
        faults: Faults | None = None,
        force: bool = False,
        max_left_out: float = 0.0,
    ) -> None:
        if transport not in ("tls", "memory"):
            raise InvalidParameterError("transport", "tls or memory", transport)
        if timeout is not None and not (
            isinstance(timeout, int | float) and 0 < timeout <= MAX_ROUND_SECONDS
        ):
            raise InvalidParameterError(
                "timeout", f"a number of seconds in (0, {MAX_ROUND_SECONDS:,}]", timeout
            )
        if collect_seconds is not None and not (
            isinstance(collect_seconds, int | float)
            and 0 < collect_seconds < (timeout or MAX_ROUND_SECONDS)
        ):
            raise InvalidParameterError(
                "collect_seconds",
                f"a number of seconds in (0, {timeout or MAX_ROUND_SECONDS})",
                collect_seconds,
            )
        self.transport = transport
        self.timeout = None if timeout is None else float(timeout)
        self.collect_seconds = None if collect_seconds is None else float(collect_seconds)
        self.workdir = workdir
        self.faults = faults or Faults()
        self.force = force
        if not (isinstance(max_left_out, int | float) and 0 <= max_left_out <= 1):
            raise InvalidParameterError("max_left_out", "a fraction in [0, 1]", max_left_out)
        self.max_left_out = float(max_left_out)

    def deadlines(self, program: QueryProgram) -> tuple[float, float]:
        """The round's (collect_seconds, timeout): those given, or :func:`round_deadlines`."""
        collect, timeout = round_deadlines(
            program.num_sources,
            stages=program.num_stages,
            flows=max(len(program.stage_flows(s)) for s in range(program.num_stages)),
        )
        if self.collect_seconds is not None:
            collect = self.collect_seconds
        if self.timeout is not None:
            timeout = self.timeout
        elif self.collect_seconds is not None:
            timeout = max(timeout, 2 * self.collect_seconds + 10.0)
        if not collect < timeout:
            raise InvalidParameterError(
                "collect_seconds", f"fewer seconds than the timeout ({timeout:g})", collect
            )
        return collect, timeout

    def baseline(self, program: QueryProgram, *, seed: int | None = None) -> Run:
        """``program`` without countermeasures, not accounted: in memory, no round needed."""
        from dpcomm.engine.memory import simulate

        return simulate(program, NoCountermeasure(), delta=None, seed=seed)

    def execute(
        self,
        program: QueryProgram,
        countermeasures: Countermeasure | Mapping[str, Countermeasure],
        *,
        delta: float,
        seed: int | None = None,
        progress: bool = False,
        target_epsilon: float | None = None,
    ) -> Run:
        """Run one round of ``program`` (its rows are the sources') and return the run."""
        started = time.perf_counter()
        check_seed(seed)  # before any worker process starts
        self.deadlines(program)
        if self.transport == "tls" and self.workdir is not None and not self.force:
            check_new_authority(Path(self.workdir) / "pki")
        workers = None
        if self.transport == "tls":
            # The worker interpreters start now and import while the round is prepared.
            crashing = 0 if self.faults.kill_scrambler is None else 1
            workers = Workers(Workers.count_for(program.num_sources, crashing))
        try:
            with terminated_as_error():
                return self._execute(
                    program, countermeasures, delta, seed, target_epsilon, started, workers
                )
        finally:
            if workers is not None:
                workers.close()

    def _execute(
        self,
        program: QueryProgram,
        countermeasures: Countermeasure | Mapping[str, Countermeasure],
        delta: float,
        seed: int | None,
        target_epsilon: float | None,
        started: float,
        workers: Workers | None,
    ) -> Run:
        prepared = prepare(program, countermeasures, delta=delta, target_epsilon=target_epsilon)
        collect_seconds, timeout = self.deadlines(program)
        spec = RoundSpec.create(
            program.public(),
            countermeasures,
            round_id=secrets.randbelow(1 << 62) + 1,
            seed=seed,
            collect_seconds=collect_seconds,
            round_seconds=timeout,
        )
        configs = node_configs(program, spec, faults=self.faults)
        if self.transport == "memory":
            outcomes = {"memory": run_in_memory(list(configs.values()))}
            errors: dict[str, str] = {}
            timings = {"wall_seconds": time.perf_counter() - started}
        else:
            outcomes, errors, timings = launch(
                spec,
                configs,
                workdir=self.workdir,
                timeout=timeout,
                workers=workers,
                force=self.force,
            )
        if not outcomes:
            raise DeploymentError(f"no node reported: {errors}")
        return assemble_run(
            program,
            spec,
            prepared,
            countermeasures,
            outcomes,
            errors,
            delta=delta,
            seed=seed,
            seconds=time.perf_counter() - started,
            timings=timings,
            target_epsilon=target_epsilon,
            max_left_out=self.max_left_out,
        )


def write_deployment(
    program: QueryProgram,
    countermeasure: Countermeasure | Mapping[str, Countermeasure],
    directory: str | Path,
    *,
    coordinator_host: str = "127.0.0.1",
    coordinator_port: int = 7400,
    collect_seconds: float | None = None,
    timeout: float | None = None,
) -> dict[str, Path]:
    """Write a CA, one certificate and one config per node into ``directory`` (several hosts).

    Every node is then started on its host with ``dpcomm node run``; edit ``listen_host``,
    ``listen_port`` and ``advertise_host`` in a node's config to place it. Returns the config
    path of every node. No seed is written: every node draws fresh operating-system entropy.
    The CA key (``pki/ca.key``) must stay with the operator. Deadlines not given scale with
    the round (:func:`round_deadlines`, with twice the window: hosts start by hand).
    """
    folder = Path(directory)
    default_collect, default_timeout = round_deadlines(
        program.num_sources,
        stages=program.num_stages,
        flows=max(len(program.stage_flows(s)) for s in range(program.num_stages)),
    )
    collect = 2 * default_collect if collect_seconds is None else float(collect_seconds)
    round_seconds = (
        float(timeout) if timeout is not None else max(default_timeout * 2, 2 * collect + 10)
    )
    if not 0 < collect < round_seconds:
        raise InvalidParameterError(
            "collect_seconds", f"a number of seconds in (0, {round_seconds:g})", collect
        )
    spec = RoundSpec.create(
        program.public(),
        countermeasure,
        round_id=secrets.randbelow(1 << 62) + 1,
        seed=None,
        collect_seconds=collect,
        round_seconds=round_seconds,
    )
    configs = node_configs(
        program, spec, coordinator_host=coordinator_host, coordinator_port=coordinator_port
    )
    authority = CertificateAuthority.create(folder / "pki")
    issue_many(authority, list(configs), folder / "pki")
    paths = {}
    (folder / "configs").mkdir(parents=True, exist_ok=True)
    for name, config in configs.items():
        settings = config
        if name == str(COORDINATOR):
            settings = replace(
                settings,
                listen_host=coordinator_host,
                listen_port=coordinator_port,
                advertise_host=coordinator_host,
            )
        path = folder / "configs" / f"{name}.json"
        path.write_text(settings.to_json())
        paths[name] = path
    return paths


__all__ = [
    "Faults",
    "NetworkEngine",
    "actual_batch_sizes",
    "assemble_run",
    "node_configs",
    "write_deployment",
]
