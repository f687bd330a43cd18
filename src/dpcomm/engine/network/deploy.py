"""The network engine: a round of a program over a network of nodes, as a `Run`.

`NetworkEngine` runs the same program, with the same roles and the same draws, as the
in-memory engine, but every node is a program of its own that only sends messages:

* ``transport="memory"``: every node a coroutine of one event loop (the engine contract test,
  seconds, no sockets);
* ``transport="tls"``: every node in separate processes on this machine, each with its own
  certificate, over mutually authenticated TLS 1.3 on loopback
  (``dpcomm run ... --engine network``).

The run it returns is assembled from what the nodes measured: the result the result node
merged, which tuples were counted (each source's draw and whether its batch committed), the
messages of every routed flow as sent, the dummies as their openers counted them, and the wire
itself (frames and bytes per link, drops). Its guarantee is that of the batches as they ran.
`write_deployment` writes the certificates and configs of a round for several hosts.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt

from dpcomm.engine.network.launcher import (
    Workers,
    check_new_authority,
    launch,
    run_in_memory,
    terminated_as_error,
)
from dpcomm.engine.network.names import COORDINATOR, NodeName
from dpcomm.engine.network.pki import CertificateAuthority, issue_many
from dpcomm.engine.network.records import GroupOutcome, WireRecord
from dpcomm.engine.network.report import DeploymentDetails, round_failures, wire_report
from dpcomm.engine.network.spec import DeploymentError, NodeConfig, NodeFaults, RoundSpec
from dpcomm.engine.run import (
    Prepared,
    Run,
    RunOptions,
    prepare,
    run_efficiency,
    warn_above_target,
)
from dpcomm.engine.traffic import FlowTraffic
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, Countermeasures, NoCountermeasure
from dpcomm.plan.model import ExecutionPlan
from dpcomm.protocol import roles
from dpcomm.queries.program import QueryProgram, num_sources, source_rows
from dpcomm.validation import check_seed


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
    # The sources are source-0 ... source-(S−1): each config carries its own row.
    payloads = program.codec.rows.encode(source_rows(program))
    row_of = {name: payloads[name.index].hex() for name in sources}
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


def _merge_wire(wires: Sequence[WireRecord]) -> dict[str, Any]:
    """What every process measured on the wire, added up."""
    sent: dict[tuple[str, str], list[int]] = {}
    received: dict[tuple[str, str], int] = {}
    lengths: set[int] = set()
    drops: dict[str, dict[str, int]] = {}
    messages: dict[tuple[str, str, str], int] = {}
    dummies: dict[str, int] = {}
    for wire in wires:
        for link in wire.sent:
            entry = sent.setdefault((link.sender, link.receiver), [0, 0, 0])
            entry[0] += link.frames
            entry[1] += link.data_frames
            entry[2] += link.bytes
        for link in wire.received:
            key = (link.sender, link.receiver)
            received[key] = received.get(key, 0) + link.frames
        lengths.update(wire.frame_lengths)
        for node, counts in wire.drops.items():
            merged = drops.setdefault(node, {})
            for reason, count in counts.items():
                merged[reason] = merged.get(reason, 0) + count
        for message in wire.messages:
            key3 = (message.flow, message.sender, message.receiver)
            messages[key3] = messages.get(key3, 0) + message.count
        for flow, count in wire.dummies.items():
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
    outcome: GroupOutcome,
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
    unknown = num_sources(spec.public_program) - len(outcome.sources)
    result: dict[str, dict[int, int]] = {}
    for flow, planned in spec.transformed.batches.items():
        reported = {s.name: s for s in outcome.scramblers if s.flow == flow}
        sizes = Counter(len(s.batched) for s in reported.values())
        for scrambler in spec.scramblers(flow):
            if str(scrambler) in reported:
                continue
            statuses = [
                source.flows[flow].status
                for source in outcome.sources
                if flow in source.flows and source.flows[flow].scrambler == str(scrambler)
            ]
            low = statuses.count("accepted")
            high = min(max(planned), low + statuses.count("failed") + unknown)
            worst = worst_size(flow, range(max(low, 1), high + 1))
            if worst is not None:
                sizes[worst] += 1
        result[flow] = dict(sizes)
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
    from dpcomm.plan.privacy import account_plan  # the accountant: here, not in a node

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


def observed_traffic(spec: RoundSpec, merged: Mapping[str, Any]) -> list[FlowTraffic]:
    """Every routed flow's messages per edge, as the nodes sent them (node ids of the plan)."""
    traffic = []
    for routed in spec.transformed.flows:
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
    return traffic


def delivered_tuples(spec: RoundSpec, outcome: GroupOutcome) -> dict[str, npt.NDArray[np.bool_]]:
    """Per data flow, the sources whose real tuple was counted (their batch committed)."""
    sources = num_sources(spec.public_program)
    committed: dict[str, tuple[str, ...]] = {}
    if outcome.coordinator is not None:
        committed = outcome.coordinator.committed
    delivered = {}
    for flow in spec.data_flows:
        real = np.zeros(sources, dtype=bool)
        for source in outcome.sources:
            if flow in source.flows:
                real[source.index] = source.flows[flow].real
        counted = np.zeros(sources, dtype=bool)
        accepted = set(committed.get(flow, ()))
        if flow in spec.transformed.batches:
            for scrambler in outcome.scramblers:
                if scrambler.flow == flow and scrambler.name in accepted:
                    counted[np.asarray(scrambler.batched, dtype=np.int64)] = True
        else:
            for index in range(sources):
                counted[index] = str(NodeName.source(index)) in accepted
        delivered[flow] = roles.delivered(real, counted)
    return delivered


def left_out_sources(spec: RoundSpec, outcome: GroupOutcome) -> dict[str, list[int]]:
    """Per data flow, the sources not counted for want of time (or of their scrambler)."""
    committed = {} if outcome.coordinator is None else outcome.coordinator.committed
    left_out: dict[str, set[int]] = {flow: set() for flow in spec.data_flows}
    for source in outcome.sources:
        for flow, item in source.flows.items():
            behind = item.scrambler
            lost_batch = behind is not None and behind not in committed.get(flow, ())
            if item.status not in ("accepted", "committed") or lost_batch:
                left_out[flow].add(source.index)
    reported = {source.index for source in outcome.sources}
    # A source that never reported is left out of every flow.
    silent = set(range(num_sources(spec.public_program))) - reported
    return {flow: sorted(rows | silent) for flow, rows in left_out.items()}


def assemble_run(
    program: QueryProgram,
    spec: RoundSpec,
    prepared: Prepared,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    outcome: GroupOutcome,
    errors: dict[str, str],
    *,
    delta: float,
    seed: int | None,
    seconds: float,
    timings: Mapping[str, float],
    target_epsilon: float | None = None,
    max_left_out: float = 0.0,
) -> Run:
    """The `Run` of a round from what its nodes reported.

    ``run.details`` is the round's `dpcomm.engine.network.report.DeploymentDetails`;
    its ``failures`` say why the round failed, if it did.
    """
    errors = {**errors, **outcome.errors}
    merged = _merge_wire(outcome.wires)
    transformed = prepared.transformed
    traffic = observed_traffic(spec, merged)
    delivered = delivered_tuples(spec, outcome)
    state = result_state(program, outcome)
    actual = actual_batch_sizes(
        spec, outcome, _worst_batch_size(program.plan, countermeasures, delta)
    )
    planned = {flow: dict(Counter(sizes)) for flow, sizes in transformed.batches.items()}
    privacy = prepared.privacy
    if actual != planned:
        from dpcomm.plan.privacy import account_plan  # the accountant: here, not in a node

        privacy = account_plan(program.plan, countermeasures, delta=delta, batch_sizes=actual)
        warn_above_target(
            privacy, target_epsilon, "batches smaller than planned ran: late or lost nodes"
        )
    details = _details(spec, outcome, merged, timings, errors, max_left_out, delivered)
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


def _details(
    spec: RoundSpec,
    outcome: GroupOutcome,
    merged: Mapping[str, Any],
    timings: Mapping[str, float],
    errors: dict[str, str],
    max_left_out: float,
    delivered: Mapping[str, npt.NDArray[np.bool_]],
) -> DeploymentDetails:
    """What only a deployment measured: the wire, lost nodes, left-out sources, errors."""
    measured = dict(timings)
    coordinator = outcome.coordinator
    lost: list[str] = []
    if coordinator is not None:
        measured["registration_seconds"] = coordinator.registration_seconds
        measured["round_seconds"] = coordinator.round_seconds
        lost = sorted(
            name for flow in spec.transformed.batches for name in coordinator.lost.get(flow, ())
        )
    missing: tuple[tuple[str, int], ...] = (("*", -1),)
    if outcome.result is not None:
        missing = outcome.result.missing
    left_out = {flow: tuple(rows) for flow, rows in left_out_sources(spec, outcome).items() if rows}
    return DeploymentDetails(
        wire=wire_report(spec.frame_size, merged, measured),
        lost_scramblers=tuple(lost),
        left_out_sources=left_out,
        missing_outputs=missing,
        errors=dict(errors),
        failures=round_failures(
            num_sources=num_sources(spec.public_program),
            left_out_sources=left_out,
            missing_outputs=missing,
            errors=errors,
            delivered=delivered,
            max_left_out=max_left_out,
            undelivered=outcome.undelivered(),
        ),
    )


#: Longest round accepted (``timeout``), in seconds: one day.
MAX_ROUND_SECONDS = 86_400.0


#: Default T, in seconds: a phase of a round ends after this long without progress (no
#: registration at the coordinator, no message at a scrambler, a peer unreachable).
DEFAULT_IDLE_SECONDS = 30.0

#: T of a deployment whose nodes are started by hand on several hosts (``deploy configs``).
HAND_STARTED_IDLE_SECONDS = 120.0


def round_deadlines(num_sources: int, *, stages: int = 1) -> tuple[float, float]:
    """Default (idle_seconds, timeout) of a round of ``num_sources`` sources.

    The phases of a round end on inactivity (``idle_seconds``, T): registration when no node
    registered for T, a scrambler's window when no member's message came for T, a link when its
    peer stayed unreachable for T. A slow machine makes a round slower, not failed. The timeout
    only caps the whole round: 600 s plus 0.1 s per source and stage, some ten times what a
    round of that size takes on an idle 2-core machine (docs/benchmarks.md).
    """
    return DEFAULT_IDLE_SECONDS, 600.0 + 0.1 * num_sources * stages


class NetworkEngine:
    """Runs a program's round over a network of nodes (see the module's docstring).

    Args:
        transport: ``"tls"`` (separate processes, mutual TLS 1.3 on loopback) or ``"memory"``
            (one event loop, no sockets).
        timeout: the cap on the whole round, in seconds (None: `round_deadlines`).
        idle_seconds: T, how long a phase of the round waits without progress: no
            registration, no message at a scrambler, a peer unreachable (None:
            `DEFAULT_IDLE_SECONDS`).
        workdir: where certificates go (default: a temporary directory, removed); a folder
            that already holds a certificate authority is refused unless ``force``.
        faults: injected faults.
        force: replace the certificate authority and keys already in ``workdir``.
        max_left_out: the fraction of sources that may be left out before the round counts
            as failed (``run.details.failures``).
    """

    name = "network"
    reads_row_sources = False

    def __init__(
        self,
        *,
        transport: Literal["tls", "memory"] = "tls",
        timeout: float | None = None,
        idle_seconds: float | None = None,
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
        if idle_seconds is not None and not (
            isinstance(idle_seconds, int | float)
            and 0 < idle_seconds < (timeout or MAX_ROUND_SECONDS)
        ):
            raise InvalidParameterError(
                "idle_seconds",
                f"a number of seconds in (0, {timeout or MAX_ROUND_SECONDS})",
                idle_seconds,
            )
        self.transport = transport
        self.timeout = None if timeout is None else float(timeout)
        self.idle_seconds = None if idle_seconds is None else float(idle_seconds)
        self.workdir = workdir
        self.faults = faults or Faults()
        self.force = force
        if not (isinstance(max_left_out, int | float) and 0 <= max_left_out <= 1):
            raise InvalidParameterError("max_left_out", "a fraction in [0, 1]", max_left_out)
        self.max_left_out = float(max_left_out)

    def deadlines(self, program: QueryProgram) -> tuple[float, float]:
        """The round's (idle_seconds, timeout): those given, or `round_deadlines`."""
        idle, timeout = round_deadlines(num_sources(program), stages=len(program.stages))
        if self.idle_seconds is not None:
            idle = self.idle_seconds
        if self.timeout is not None:
            timeout = self.timeout
        if not idle < timeout:
            raise InvalidParameterError(
                "idle_seconds", f"fewer seconds than the timeout ({timeout:g})", idle
            )
        return idle, timeout

    def baseline(self, program: QueryProgram, *, seed: int | None = None) -> Run:
        """``program`` without countermeasures, not accounted: in memory, no round needed."""
        from dpcomm.engine.memory import simulate

        return simulate(program, NoCountermeasure(), delta=None, seed=seed)

    def execute(
        self, program: QueryProgram, countermeasures: Countermeasures, **options: Unpack[RunOptions]
    ) -> Run:
        """Run one round of ``program`` (its rows are the sources') and return the run."""
        started = time.perf_counter()
        seed = options.get("seed")
        if seed is not None:
            check_seed(seed)  # before any worker process starts
        self.deadlines(program)
        if self.transport == "tls" and self.workdir is not None and not self.force:
            check_new_authority(Path(self.workdir) / "pki")
        workers = None
        if self.transport == "tls":
            # The worker interpreters start now and import while the round is prepared.
            crashing = 0 if self.faults.kill_scrambler is None else 1
            workers = Workers(Workers.count_for(num_sources(program), crashing))
        try:
            with terminated_as_error():
                return self._execute(program, countermeasures, options, started, workers)
        finally:
            if workers is not None:
                workers.close()

    def _execute(
        self,
        program: QueryProgram,
        countermeasures: Countermeasures,
        options: RunOptions,
        started: float,
        workers: Workers | None,
    ) -> Run:
        delta, seed = options["delta"], options.get("seed")
        target_epsilon = options.get("target_epsilon")
        if delta is None:
            raise InvalidParameterError("delta", "the plan's δ (a deployment is accounted)", None)
        prepared = options.get("prepared") or prepare(
            program, countermeasures, delta=delta, target_epsilon=target_epsilon
        )
        idle_seconds, timeout = self.deadlines(program)
        spec = RoundSpec.create(
            program,
            countermeasures,
            seed=seed,
            idle_seconds=idle_seconds,
            round_seconds=timeout,
            max_left_out=self.max_left_out,
            transformed=prepared.transformed,
        )
        configs = node_configs(program, spec, faults=self.faults)
        if self.transport == "memory":
            outcome = run_in_memory(list(configs.values()))
            errors: dict[str, str] = {}
            timings = {"wall_seconds": time.perf_counter() - started}
        else:
            outcome, errors, timings = launch(
                spec,
                configs,
                workdir=self.workdir,
                timeout=timeout,
                workers=workers,
                force=self.force,
            )
        if not outcome.wires:
            raise DeploymentError(f"no node reported: {errors}")
        return assemble_run(
            program,
            spec,
            prepared,
            countermeasures,
            outcome,
            errors,
            delta=delta,
            seed=seed,
            seconds=time.perf_counter() - started,
            timings=timings,
            target_epsilon=target_epsilon,
            max_left_out=self.max_left_out,
        )


def result_state(program: QueryProgram, outcome: GroupOutcome) -> Any:
    """The program's final state from the outputs the result node merged (empty without)."""
    outputs = {}
    if outcome.result is not None:
        for item in outcome.result.outputs:
            codec = program.codec.outputs(item.flow)
            outputs[(item.flow, item.target)] = codec.decode(item.data)
    return program.merge(program.initial_state(), len(program.stages) - 1, outputs)


def published_result(spec: RoundSpec, outcome: GroupOutcome) -> dict[str, Any] | None:
    """What the result node of a round with a noisy release publishes (None without one).

    The released rows and the release's guarantee (the program's `published` hook: the noise
    is drawn here, at the result node), the outputs it never got, the sources the round left
    out (``left_out``, per flow, and ``why``: the round's failures), and the errors of its
    process; not the exact outputs, which ``dpcomm node run`` prints otherwise.
    """
    if spec.program.get("release") is None:  # the public description: no noisy release
        return None
    program = spec.public_program
    if outcome.result is None:
        return {
            "rows": None,
            "release": None,
            "missing": None,
            "left_out": None,
            "why": ["the result node did not finish"],
            "errors": dict(outcome.errors),
        }
    program.check_config()  # the SQL it runs is derived here, never taken from the config
    published = program.published(result_state(program, outcome))
    if published is None:
        return None
    summary = outcome.result.summary
    published["missing"] = [list(item) for item in outcome.result.missing]
    published["left_out"] = None if summary is None else dict(summary.left_out)
    published["why"] = list(outcome.result.failures)
    published["errors"] = dict(outcome.errors)
    return published


def write_deployment(
    program: QueryProgram,
    countermeasure: Countermeasure | Mapping[str, Countermeasure],
    directory: str | Path,
    *,
    coordinator_host: str = "127.0.0.1",
    coordinator_port: int = 7400,
    idle_seconds: float | None = None,
    timeout: float | None = None,
    max_left_out: float = 0.0,
) -> dict[str, Path]:
    """Write a CA, one certificate and one config per node into ``directory`` (several hosts).

    Every node is then started on its host with ``dpcomm node run``; edit ``listen_host``,
    ``listen_port`` and ``advertise_host`` in a node's config to place it. Returns the config
    path of every node. No seed is written: every node draws fresh operating-system entropy.
    The CA key (``pki/ca.key``) must stay with the operator. Without ``idle_seconds``, T is
    `HAND_STARTED_IDLE_SECONDS` (hosts are started by hand); without ``timeout``, the cap
    is `round_deadlines`'s. ``max_left_out``: the fraction of the sources that may be
    absent before the coordinator's node reports the round failed.
    """
    folder = Path(directory)
    _, default_timeout = round_deadlines(num_sources(program), stages=len(program.stages))
    idle = HAND_STARTED_IDLE_SECONDS if idle_seconds is None else float(idle_seconds)
    round_seconds = float(timeout) if timeout is not None else max(default_timeout, 2 * idle)
    if not (0 < round_seconds <= MAX_ROUND_SECONDS):
        raise InvalidParameterError(
            "timeout", f"a number of seconds in (0, {MAX_ROUND_SECONDS:,.0f}]", round_seconds
        )
    if not 0 < idle < round_seconds:
        raise InvalidParameterError(
            "idle_seconds", f"a number of seconds in (0, {round_seconds:g})", idle
        )
    if isinstance(max_left_out, bool) or not (
        isinstance(max_left_out, int | float) and 0 <= max_left_out <= 1
    ):
        raise InvalidParameterError("max_left_out", "a fraction in [0, 1]", max_left_out)
    spec = RoundSpec.create(
        program,
        countermeasure,
        seed=None,
        idle_seconds=idle,
        round_seconds=round_seconds,
        max_left_out=max_left_out,
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
        _write_private(path, settings.to_json())  # a source's config holds its row
        paths[name] = path
    return paths


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600, even if it existed)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(text)


__all__ = [
    "Faults",
    "NetworkEngine",
    "actual_batch_sizes",
    "assemble_run",
    "node_configs",
    "published_result",
    "result_state",
    "write_deployment",
]
