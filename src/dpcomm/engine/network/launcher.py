"""Starting the nodes of a round: in one event loop, or in separate processes over TLS.

* :func:`run_in_memory`: every node a coroutine of one event loop, linked by
  :class:`~dpcomm.engine.network.transport.MemoryTransport` (seconds, no sockets);
* :func:`run_tls_group`: the nodes given, in this process, over mutually authenticated TLS 1.3
  (``dpcomm node run`` runs one node this way on its host);
* :func:`launch`: a whole round on this machine: one certificate per node, the coordinator and
  result node in one process, the compute nodes in another, the scramblers in a third (a
  crashing one in its own), the sources in one or two more; each process a fresh interpreter
  running :mod:`dpcomm.engine.network.worker`, which imports only what its nodes run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import queue as queue_module
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
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


def _temporary_directory() -> Path:
    """A private temporary directory, in memory (``/dev/shm``) where the system has one.

    It holds every node's private key for the round: in memory it never reaches a disk, and
    writing a thousand keys there takes a fraction of the time.
    """
    memory = Path("/dev/shm")
    base = str(memory) if memory.is_dir() and os.access(memory, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="dpcomm-deploy-", dir=base))


def _group_file(
    path: Path,
    spec: RoundSpec,
    configs: list[NodeConfig],
    credentials: Mapping[str, NodeCredentials],
) -> None:
    configs_data = []
    for config in configs:
        data = dataclasses.asdict(config)
        del data["round"]
        configs_data.append(data)
    group = {
        "round": spec.to_dict(),
        "configs": configs_data,
        "credentials": {
            c.name: [
                str(credentials[c.name].cert_path),
                str(credentials[c.name].key_path),
                str(credentials[c.name].ca_path),
            ]
            for c in configs
        },
    }
    path.write_text(json.dumps(group))


def _reader(
    process: subprocess.Popen[str], lines: queue_module.Queue[tuple[str, Any]], group: str
) -> None:
    """Forward the JSON lines a worker writes (its port, its outcome) to ``lines``."""
    assert process.stdout is not None
    for line in process.stdout:
        try:
            lines.put((group, json.loads(line)))
        except ValueError:
            lines.put((group, {"log": line.rstrip()}))
    lines.put((group, {"exit": process.wait()}))


def launch(
    spec: RoundSpec,
    configs: Mapping[str, NodeConfig],
    *,
    workdir: str | Path | None,
    timeout: float,
) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, float]]:
    """Certify every node and run the nodes of ``configs`` in worker processes on loopback.

    Each process group is a fresh interpreter running :mod:`dpcomm.engine.network.worker`.
    Returns each group's outcome, the errors of the groups (a crashing node's process is
    expected to die and is not an error) and the timings.
    """
    started = time.perf_counter()
    temporary = workdir is None
    directory = Path(workdir) if workdir is not None else _temporary_directory()
    processes: dict[str, subprocess.Popen[str]] = {}
    try:
        groups = process_groups(spec, configs)
        lines: queue_module.Queue[tuple[str, Any]] = queue_module.Queue()
        # The workers start first: their interpreters import while the nodes are certified.
        for group in groups:
            process = subprocess.Popen(
                [sys.executable, "-m", "dpcomm.engine.network.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            processes[group] = process
            threading.Thread(target=_reader, args=(process, lines, group), daemon=True).start()
        pki = directory / "pki"
        authority = CertificateAuthority.create(pki, overwrite=True)
        credentials = issue_many(authority, list(configs), pki)
        certified = time.perf_counter()
        for group, members in groups.items():
            path = directory / f"group-{group}.json"
            _group_file(path, spec, [configs[n] for n in members], credentials)
            stdin = processes[group].stdin
            assert stdin is not None
            stdin.write(f"{path}\n")
            stdin.flush()
        deadline = time.monotonic() + timeout + _START_TIMEOUT
        outcomes: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        exited: set[str] = set()
        launched = None
        while len(exited) < len(groups):
            try:
                group, message = lines.get(timeout=0.5)
            except queue_module.Empty:
                if time.monotonic() > deadline:
                    raise DeploymentError(f"the round did not finish within {timeout} s") from None
                continue
            if "port" in message and launched is None:
                launched = time.perf_counter()
                for other, process in processes.items():
                    if other != group and process.stdin is not None:
                        process.stdin.write(f"{int(message['port'])}\n")
                        process.stdin.flush()
            elif "outcome" in message:
                outcomes[group] = message["outcome"]
            elif "error" in message:
                errors[group] = str(message["error"])
            elif "exit" in message:
                exited.add(group)
                if message["exit"] != 0 and group not in outcomes and group not in errors:
                    errors[group] = f"process exited with status {message['exit']}"
            if launched is None and errors:
                raise DeploymentError(
                    f"process {next(iter(errors))} failed: {next(iter(errors.values()))}"
                )
        finished = time.perf_counter()
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(Exception):
                process.wait(timeout=5.0)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(Exception):
                        stream.close()
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)
    for group in list(errors):
        if group.startswith("crashing-"):
            del errors[group]
    timings = {
        "certificates_seconds": certified - started,
        "launch_seconds": (launched or finished) - certified,
        "wall_seconds": finished - started,
    }
    return outcomes, errors, timings


__all__ = [
    "NodeName",
    "launch",
    "process_groups",
    "run_in_memory",
    "run_tls_group",
]
