"""Starting the nodes of a round: in one event loop, or in separate processes over TLS.

* `run_in_memory`: every node a coroutine of one event loop, linked by
  `dpcomm.engine.network.transport.MemoryTransport` (seconds, no sockets);
* `run_tls_group`: the nodes given, in this process, over mutually authenticated TLS 1.3
  (``dpcomm node run`` runs one node this way on its host);
* `launch`: a whole round on this machine: one certificate per node, the coordinator,
  result node, compute nodes and scramblers in one process (a crashing node in its own), the
  sources in more, at most `SOURCES_PER_PROCESS` each; each process a fresh interpreter
  running `dpcomm.engine.network.worker`, which imports only what its nodes run.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue as queue_module
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcomm.engine.network.faults import exit_process
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.nodes import LARGE_ROUND_SOURCES, run_nodes
from dpcomm.engine.network.pki import CertificateAuthority, NodeCredentials, PkiError, issue_many
from dpcomm.engine.network.records import GroupOutcome, WorkerReport, decode, encode
from dpcomm.engine.network.scratch import PrivateFolder, private_folder, write_private
from dpcomm.engine.network.spec import DeploymentError, NodeConfig, NodeSettings, RoundSpec
from dpcomm.engine.network.tls import DEFAULT_BACKLOG, TlsTransport
from dpcomm.engine.network.transport import Address, MemoryTransport
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.program import num_sources

#: Sources per OS process (above this, the sources are split over more processes).
SOURCES_PER_PROCESS = 600
MAX_SOURCE_PROCESSES = 4
"""At most this many processes of sources (each interpreter holds some 60 MB before its first
node: past a few processes on a small machine, more only cost memory)."""
_START_TIMEOUT = 60.0


def source_processes(num_sources: int) -> int:
    """Processes the sources take: one per `SOURCES_PER_PROCESS` (at most 4)."""
    return max(1, min(MAX_SOURCE_PROCESSES, math.ceil(num_sources / SOURCES_PER_PROCESS)))


class RoundInterruptedError(DeploymentError):
    """The process running a round was asked to stop (SIGTERM)."""


@contextlib.contextmanager
def terminated_as_error() -> Iterator[None]:
    """While the block runs, SIGTERM or SIGHUP raises `RoundInterruptedError` (main thread).

    Python's default SIGTERM and SIGHUP end the process at once, without ``finally`` blocks:
    the worker processes would run on until their deadline and the temporary folder, with
    every node's private key and the CA key, would stay. Raised as an exception, they unwind
    like Ctrl-C (SIGINT, KeyboardInterrupt): workers stopped, keys removed. Outside the main
    thread (where handlers cannot be set) nothing changes; the folder's guard removes it
    anyway when the process ends (`dpcomm.engine.network.scratch`).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        del frame
        raise RoundInterruptedError(f"interrupted by signal {signal.Signals(signum).name}")

    caught = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    previous = {signum: signal.signal(signum, interrupt) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def check_new_authority(directory: Path) -> None:
    """InvalidParameterError if ``directory`` already holds a certificate authority or keys."""
    if directory.exists() and any(directory.iterdir()):
        raise InvalidParameterError(
            "workdir",
            "a folder without certificates (or force=True to replace them)",
            f"{directory.parent} (it holds a certificate authority and keys)",
        )


def listen_backlog(num_nodes: int) -> int:
    """Pending connections a listener queues: every node may connect at once at the start.

    Too short a queue makes the kernel answer with SYN cookies or drop connections under a
    burst of registrations, or under a flood of connections; the kernel caps it at
    ``net.core.somaxconn`` anyway.
    """
    return max(DEFAULT_BACKLOG, 2 * num_nodes)


@dataclass(frozen=True)
class CredentialPaths:
    """Where a node's certificate, key and the CA's certificate are (a worker loads them)."""

    cert: str
    key: str
    ca: str

    def credentials(self, name: str) -> NodeCredentials:
        """The credentials of node ``name``."""
        return NodeCredentials(
            name=name, cert_path=Path(self.cert), key_path=Path(self.key), ca_path=Path(self.ca)
        )


@dataclass(frozen=True)
class WorkerGroup:
    """What a worker process runs: its nodes' settings, the round, their credentials.

    Attributes:
        round: the round's public parameters (shared by the nodes).
        nodes: every node's own settings.
        credentials: every node's credential files, by name.
    """

    round: RoundSpec
    nodes: tuple[NodeSettings, ...]
    credentials: dict[str, CredentialPaths]

    def configs(self) -> list[NodeConfig]:
        """The nodes' configs."""
        return [NodeConfig.of(settings, self.round) for settings in self.nodes]


async def _in_memory(configs: list[NodeConfig]) -> GroupOutcome:
    transport = MemoryTransport()

    async def coordinator() -> Address:
        return [str(COORDINATOR)]

    try:
        return await run_nodes(configs, transport, coordinator_address=coordinator)
    finally:
        await transport.shutdown()


def _run_loop(group: Coroutine[Any, Any, GroupOutcome]) -> GroupOutcome:
    """``asyncio.run(group)``, whose task does not hold the outcome as its result.

    When ``asyncio.run`` puts the SIGINT handler back, ``signal.signal`` formats the handler
    it replaces, which names the main task, its result included: the repr of a whole round's
    outcome, milliseconds of CPU for a round of a hundred nodes.
    """
    outcome: list[GroupOutcome] = []

    async def main() -> None:
        outcome.append(await group)

    asyncio.run(main())
    return outcome[0]


def run_in_memory(configs: list[NodeConfig]) -> GroupOutcome:
    """Run every node of ``configs`` in one fresh event loop over the in-memory transport."""
    return _run_loop(_in_memory(configs))


async def _tls_group(
    configs: list[NodeConfig],
    credentials: Mapping[str, NodeCredentials],
    on_listening: Any,
    coordinator_port: Callable[[], int] | None,
    on_event: Callable[[str], None] | None = None,
) -> GroupOutcome:
    advertise = {c.name: c.advertise_host or c.listen_host for c in configs}
    backlog = listen_backlog(len(configs[0].round.node_names())) if configs else DEFAULT_BACKLOG
    transport = TlsTransport(credentials, advertise=advertise, backlog=backlog)
    loop = asyncio.get_running_loop()
    # The nodes' TLS contexts load in a thread while the first nodes already connect: loading
    # a key costs about a millisecond with OpenSSL 3, and the coordinator should not wait.
    preparing = loop.run_in_executor(None, transport.prepare)
    local: asyncio.Future[Address] = loop.create_future()
    hosted = any(c.node == COORDINATOR for c in configs)
    first = configs[0]
    port: asyncio.Future[int] | None = None
    if not hosted and coordinator_port is not None:
        port = loop.run_in_executor(None, coordinator_port)

    def listening(name: str, address: Address) -> None:
        if name == str(COORDINATOR) and not local.done():
            local.set_result(address)
        if on_listening is not None:
            on_listening(name, address)

    async def coordinator() -> Address:
        if hosted:
            return await asyncio.shield(local)
        if port is not None:
            return [first.coordinator_host, await asyncio.shield(port)]
        return [first.coordinator_host, first.coordinator_port]

    outcome = await run_nodes(
        configs,
        transport,
        coordinator_address=coordinator,
        on_listening=listening,
        on_event=on_event,
        crash=exit_process,
    )
    # A node whose credentials do not load fails on its own (and is reported as such).
    with contextlib.suppress(PkiError):
        await preparing
    return outcome


def run_tls_group(
    configs: list[NodeConfig],
    credentials: Mapping[str, NodeCredentials],
    *,
    on_listening: Any = None,
    coordinator_port: Callable[[], int] | None = None,
    on_event: Callable[[str], None] | None = None,
) -> GroupOutcome:
    """Run the nodes ``configs`` in this process over TLS (a fresh event loop).

    ``coordinator_port`` (blocking, called once in a thread) gives the coordinator's port when
    it is not known in advance (a local deployment's workers learn it from the launcher);
    ``on_event`` hears the round's milestones (the coordinator's).
    """
    return _run_loop(_tls_group(configs, credentials, on_listening, coordinator_port, on_event))


def process_groups(spec: RoundSpec, configs: Mapping[str, NodeConfig]) -> dict[str, list[str]]:
    """Which nodes share a process: the infrastructure, crashing nodes, the sources.

    Above `LARGE_ROUND_SOURCES` sources, the coordinator and the result node take
    one process, the compute nodes and scramblers another: every node registers with the
    coordinator while the sources already connect to their scramblers, two streams of TLS
    handshakes that two cores run side by side (below, one process starts faster). The
    sources (the most numerous, each with its own TLS connections) take the others, at most
    `SOURCES_PER_PROCESS` each (and `MAX_SOURCE_PROCESSES` processes); a node set
    to crash gets a process of its own.
    """
    names = spec.node_names()
    crashing = [str(n) for n in names if configs[str(n)].faults.crash_after_frames is not None]
    infrastructure = [str(n) for n in names if n.role != "source" and str(n) not in crashing]
    groups: dict[str, list[str]] = {"nodes": infrastructure}
    if num_sources(spec.public_program) > LARGE_ROUND_SOURCES:
        control = {str(COORDINATOR), str(RESULT)}
        groups = {
            "coordinator": [n for n in infrastructure if n in control],
            "nodes": [n for n in infrastructure if n not in control],
        }
    for position, name in enumerate(crashing):
        groups[f"crashing-{position}"] = [name]
    sources = [str(n) for n in names if n.role == "source" and str(n) not in crashing]
    parts = source_processes(len(sources))
    for part in range(parts):
        groups[f"sources-{part}"] = sources[part::parts]
    return {g: members for g, members in groups.items() if members}


def _group_file(
    path: Path,
    spec: RoundSpec,
    configs: list[NodeConfig],
    credentials: Mapping[str, NodeCredentials],
) -> None:
    group = WorkerGroup(
        round=spec,
        nodes=tuple(config.settings for config in configs),
        credentials={
            c.name: CredentialPaths(
                str(credentials[c.name].cert_path),
                str(credentials[c.name].key_path),
                str(credentials[c.name].ca_path),
            )
            for c in configs
        },
    )
    write_private(path, encode(group))  # the sources' rows: the owner's only


@dataclass(frozen=True)
class _Exited:
    """A worker process ended with ``status``."""

    status: int


def _reader(
    process: subprocess.Popen[str],
    lines: queue_module.Queue[tuple[str, WorkerReport | _Exited]],
    group: str,
) -> None:
    """Forward the reports a worker writes (its port, its outcome) and its end to ``lines``.

    A line that is not a report (a library printing on standard output) is ignored.
    """
    assert process.stdout is not None
    for line in process.stdout:
        with contextlib.suppress(DeploymentError):
            lines.put((group, decode(line, WorkerReport)))
    lines.put((group, _Exited(process.wait())))


class Workers:
    """Worker interpreters started ahead of a round: they import while the round is prepared.

    Each runs `dpcomm.engine.network.worker` and waits for the path of its group file.
    """

    def __init__(self, count: int) -> None:
        self.started_at = time.time()
        """When the workers were started: a round's start-up counts from here."""
        self.processes: list[subprocess.Popen[str]] = [
            subprocess.Popen(
                [sys.executable, "-m", "dpcomm.engine.network.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(count)
        ]

    @staticmethod
    def count_for(num_sources: int, crashing: int = 0) -> int:
        """The workers a round of ``num_sources`` sources needs (see `process_groups`)."""
        infrastructure = 2 if num_sources > LARGE_ROUND_SOURCES else 1
        return infrastructure + crashing + source_processes(num_sources)

    def close(self) -> None:
        """Stop every worker still running and close their pipes."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(Exception):
                process.wait(timeout=5.0)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(Exception):
                        stream.close()


def _start_groups(
    spec: RoundSpec,
    configs: Mapping[str, NodeConfig],
    groups: Mapping[str, list[str]],
    processes: Mapping[str, subprocess.Popen[str]],
    directory: Path,
    *,
    force: bool,
) -> None:
    """Certify each group's nodes and hand its worker its group file.

    Group by group, the infrastructure first: the coordinator listens (its registrations are
    the start-up's bottleneck) while the sources are still being certified, and each worker
    starts as soon as its own group is ready.
    """
    pki = directory / "pki"
    authority = CertificateAuthority.create(pki, overwrite=True)
    for group in sorted(groups, key=lambda g: g.startswith("sources")):
        members = groups[group]
        credentials = issue_many(authority, members, pki, overwrite=force)
        path = directory / f"group-{group}.json"
        _group_file(path, spec, [configs[n] for n in members], credentials)
        stdin = processes[group].stdin
        if stdin is None:
            raise DeploymentError(f"worker of {group} has no input")
        stdin.write(f"{path}\n")
        stdin.flush()


def _collect(
    processes: Mapping[str, subprocess.Popen[str]],
    lines: queue_module.Queue[tuple[str, WorkerReport | _Exited]],
    deadline: float,
    timeout: float,
) -> tuple[dict[str, GroupOutcome], dict[str, str], float | None]:
    """Every worker's reports until all exited: outcomes, errors, when the round launched.

    The coordinator's port goes to every other worker as soon as it is known, except in a
    large round (the coordinator in a process of its own) to the sources' workers: they get it
    once every other node registered, so that the infrastructure does not queue behind
    thousands of sources at the coordinator, and the sources' plans (and their links to their
    scramblers) follow their registrations at once. A worker that fails before the round
    launched fails it at once.
    """
    large = "coordinator" in processes
    held = {g for g in processes if g.startswith("sources")} if large else set()
    port: int | None = None

    def send_port(groups: Iterable[str]) -> None:
        for other in groups:
            process = processes[other]
            if process.stdin is not None:
                process.stdin.write(f"{port}\n")
                process.stdin.flush()

    outcomes: dict[str, GroupOutcome] = {}
    errors: dict[str, str] = {}
    exited: set[str] = set()
    launched = None
    while len(exited) < len(processes):
        try:
            group, message = lines.get(timeout=0.5)
        except queue_module.Empty:
            if time.monotonic() > deadline:
                raise DeploymentError(f"the round did not finish within {timeout} s") from None
            continue
        if isinstance(message, _Exited):
            exited.add(group)
            if message.status != 0 and group not in outcomes and group not in errors:
                errors[group] = f"process exited with status {message.status}"
        elif message.port is not None and launched is None:
            launched = time.perf_counter()
            port = message.port
            send_port(g for g in processes if g != group and g not in held)
        elif message.infrastructure and held:
            send_port(sorted(held))
            held = set()
        elif message.outcome is not None:
            outcomes[group] = message.outcome
        elif message.error is not None:
            errors[group] = message.error
        if launched is None and errors:
            raise DeploymentError(
                f"process {next(iter(errors))} failed: {next(iter(errors.values()))}"
            )
    return outcomes, errors, launched


def launch(
    spec: RoundSpec,
    configs: Mapping[str, NodeConfig],
    *,
    workdir: str | Path | None,
    timeout: float,
    workers: Workers | None = None,
    force: bool = False,
) -> tuple[GroupOutcome, dict[str, str], dict[str, float]]:
    """Certify every node and run the nodes of ``configs`` in worker processes on loopback.

    Each process group is a fresh interpreter running `dpcomm.engine.network.worker`
    (``workers``, if given, were started earlier; more are started if they are too few).
    Returns the outcome of every process's nodes, the errors of the processes (a crashing
    node's process is expected to die and is not an error) and the timings. A ``workdir``
    that already holds certificates is refused unless ``force``.
    """
    started = time.perf_counter()
    started_at = workers.started_at if workers is not None else time.time()
    if workdir is not None and not force:
        check_new_authority(Path(workdir) / "pki")
    groups = process_groups(spec, configs)
    pool = workers if workers is not None else Workers(len(groups))
    if len(pool.processes) < len(groups):
        pool.processes += Workers(len(groups) - len(pool.processes)).processes
    processes = dict(zip(groups, pool.processes, strict=False))
    for surplus in pool.processes[len(groups) :]:
        surplus.kill()
    temporary: PrivateFolder | None = None
    try:
        # Keys and rows: in a folder of the owner's only, removed however this process ends.
        if workdir is None:
            temporary = PrivateFolder()
            directory = temporary.path
        else:
            directory = private_folder(Path(workdir))
        private_folder(directory / "pki")
        lines: queue_module.Queue[tuple[str, WorkerReport | _Exited]] = queue_module.Queue()
        for group, process in processes.items():
            threading.Thread(target=_reader, args=(process, lines, group), daemon=True).start()
        _start_groups(spec, configs, groups, processes, directory, force=force)
        certified = time.perf_counter()
        deadline = time.monotonic() + timeout + _START_TIMEOUT
        outcomes, errors, launched = _collect(processes, lines, deadline, timeout)
        finished = time.perf_counter()
    finally:
        pool.close()
        if temporary is not None:
            temporary.remove()
    for group in list(errors):
        if group.startswith("crashing-"):
            del errors[group]
    timings = {
        "certificates_seconds": certified - started,
        "launch_seconds": max(0.0, (launched or finished) - certified),
        "wall_seconds": finished - started,
    }
    outcome = sum(outcomes.values(), GroupOutcome())
    if outcome.coordinator is not None:
        # From the workers' start (the engine starts them before it prepares the round) to
        # the plan sent: planning, certificates, processes and registration, overlapped.
        timings["startup_seconds"] = outcome.coordinator.planned_at - started_at
    return outcome, errors, timings


__all__ = [
    "NodeName",
    "RoundInterruptedError",
    "Workers",
    "launch",
    "process_groups",
    "run_in_memory",
    "run_tls_group",
    "terminated_as_error",
]
