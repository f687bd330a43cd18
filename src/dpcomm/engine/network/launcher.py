"""Starting the nodes of a round: in one event loop, or in separate processes over TLS.

* :func:`run_in_memory`: every node a coroutine of one event loop, linked by
  :class:`~dpcomm.engine.network.transport.MemoryTransport` (seconds, no sockets);
* :func:`run_tls_group`: the nodes given, in this process, over mutually authenticated TLS 1.3
  (``dpcomm node run`` runs one node this way on its host);
* :func:`launch`: a whole round on this machine: one certificate per node, the coordinator and
  result node in one process, the compute nodes in another, the scramblers in a third (a
  crashing one in its own), the sources in one or two more.

This module and what it imports are all a worker process loads (no accountant, no DuckDB).
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import queue as queue_module
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpcomm.engine.network.faults import exit_process
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.nodes import run_nodes
from dpcomm.engine.network.pki import CertificateAuthority, NodeCredentials, issue_many
from dpcomm.engine.network.spec import DeploymentError, NodeConfig, RoundSpec
from dpcomm.engine.network.tls import TlsTransport
from dpcomm.engine.network.transport import Address, MemoryTransport

#: Sources per OS process (above this, the sources are split over more processes).
SOURCES_PER_PROCESS = 600
_START_TIMEOUT = 60.0


async def _in_memory(configs: list[NodeConfig]) -> dict[str, Any]:
    transport = MemoryTransport()

    async def coordinator() -> Address:
        return [str(COORDINATOR)]

    try:
        return await run_nodes(configs, transport, coordinator_address=coordinator)
    finally:
        await transport.shutdown()


def run_in_memory(configs: list[NodeConfig]) -> dict[str, Any]:
    """Run every node of ``configs`` in one fresh event loop over the in-memory transport."""
    return asyncio.run(_in_memory(configs))


async def _tls_group(
    configs: list[NodeConfig],
    credentials: Mapping[str, NodeCredentials],
    on_listening: Any,
) -> dict[str, Any]:
    advertise = {c.name: c.advertise_host or c.listen_host for c in configs}
    transport = TlsTransport(credentials, advertise=advertise)
    local: asyncio.Future[Address] = asyncio.get_running_loop().create_future()
    hosted = any(c.node == COORDINATOR for c in configs)
    first = configs[0]

    def listening(name: str, address: Address) -> None:
        if name == str(COORDINATOR) and not local.done():
            local.set_result(address)
        if on_listening is not None:
            on_listening(name, address)

    async def coordinator() -> Address:
        if hosted:
            return await asyncio.shield(local)
        return [first.coordinator_host, first.coordinator_port]

    return await run_nodes(
        configs,
        transport,
        coordinator_address=coordinator,
        on_listening=listening,
        crash=exit_process,
    )


def run_tls_group(
    configs: list[NodeConfig],
    credentials: Mapping[str, NodeCredentials],
    *,
    on_listening: Any = None,
) -> dict[str, Any]:
    """Run the nodes ``configs`` in this process over TLS (a fresh event loop)."""
    return asyncio.run(_tls_group(configs, credentials, on_listening))


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

    def on_listening(name: str, address: Address) -> None:
        if name == str(COORDINATOR):
            channel.put(("port", group, int(address[1])))

    try:
        if not any(config.node == COORDINATOR for config in configs):
            port = int(ports.get(timeout=_START_TIMEOUT))
            configs = [replace(config, coordinator_port=port) for config in configs]
        outcome = run_tls_group(configs, credentials, on_listening=on_listening)
        channel.put(("done", group, outcome))
    except BaseException as error:  # reported to the launcher, never lost
        channel.put(("error", group, f"{type(error).__name__}: {error}"))


def process_groups(spec: RoundSpec, configs: Mapping[str, NodeConfig]) -> dict[str, list[str]]:
    """Which nodes share a process: control, compute, scramblers, crashing nodes, sources."""
    names = spec.node_names()
    crashing = [str(n) for n in names if configs[str(n)].faults.crash_after_frames is not None]
    groups: dict[str, list[str]] = {
        "control": [str(COORDINATOR), str(RESULT)],
        "compute": [str(n) for n in names if n.role == "compute"],
        "scramblers": [str(n) for n in names if n.role == "scrambler" and str(n) not in crashing],
    }
    for position, name in enumerate(crashing):
        groups[f"crashing-{position}"] = [name]
    sources = [str(n) for n in names if n.role == "source" and str(n) not in crashing]
    parts = max(1, math.ceil(len(sources) / SOURCES_PER_PROCESS))
    for part in range(parts):
        groups[f"sources-{part}"] = sources[part::parts]
    return {g: members for g, members in groups.items() if members}


def launch(
    spec: RoundSpec,
    configs: Mapping[str, NodeConfig],
    *,
    workdir: str | Path | None,
    timeout: float,
) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, float]]:
    """Certify every node and run the nodes of ``configs`` in separate processes on loopback.

    Returns each process group's outcome, the errors of the groups (a crashing node's process
    is expected to die and is not an error) and the timings.
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
        groups = process_groups(spec, configs)
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
            try:
                message = channel.get(timeout=0.2)
            except queue_module.Empty:
                for group, process in processes.items():
                    done = group in outcomes or group in errors
                    if not done and not process.is_alive() and process.exitcode not in (0, None):
                        errors[group] = f"process exited with status {process.exitcode}"
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
    for group in list(errors):
        if group.startswith("crashing-"):
            del errors[group]
    timings = {
        "certificates_seconds": certified - started,
        "launch_seconds": launched - certified,
        "wall_seconds": finished - started,
    }
    return outcomes, errors, timings


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


__all__ = [
    "NodeName",
    "launch",
    "process_groups",
    "run_in_memory",
    "run_tls_group",
]
