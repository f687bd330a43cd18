"""Hosts and hard conditions for the deployment tests: namespaces, a lossy link, a busy machine.

The fixtures are made available to every integration test by ``conftest.py``.

* :func:`two_hosts`: two network namespaces joined by a veth pair (host A and host B);
* :func:`lossy_hosts`: two namespaces whose link delays every packet by 100 ms ± 30 ms and
  drops 1% of them: ``tc netem`` on a veth pair where the kernel has it, else a relay of IP
  packets between two TUN devices that does what netem does (the kernel of the project's
  machine is built without netem);
* :func:`slow_hosts`: the same, with a link of 10 Mbit/s that delays every packet by 100 ms
  (``tc netem delay 100ms rate 10mbit``, or the relay);
* :func:`busy_processes`: CPU-bound processes beside a round (an oversubscribed machine);
* :func:`run_on_hosts`: one deployed round with its infrastructure on host A and its sources on
  host B, each host a worker process of the local deployment, assembled into a :class:`Run`.

Everything that needs root, iproute2 or a kernel feature skips, saying why, where it is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import heapq
import os
import random
import select
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpcomm.engine.network.deploy import assemble_run, node_configs
from dpcomm.engine.network.launcher import CredentialPaths, WorkerGroup
from dpcomm.engine.network.names import COORDINATOR
from dpcomm.engine.network.pki import CertificateAuthority, issue_many
from dpcomm.engine.network.records import GroupOutcome, WorkerReport, decode, encode
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.engine.run import prepare

DELAY_SECONDS, JITTER_SECONDS, LOSS = 0.100, 0.030, 0.01


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    """``ip ARGS`` (never raises: the caller reads the return code)."""
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def namespaces_unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can)."""
    if shutil.which("ip") is None:
        return "iproute2 is not installed (make test installs it)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"dpcprobe{os.getpid() % 100000}"
    made = ip("netns", "add", probe)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    ip("netns", "del", probe)
    return None


def _setup(commands: list[list[str]]) -> None:
    for command in commands:
        done = ip(*command)
        if done.returncode != 0:
            pytest.skip(f"cannot set up the hosts' link: ip {' '.join(command)}: {done.stderr}")


@contextlib.contextmanager
def _namespaces(tag: str) -> Iterator[tuple[str, str]]:
    reason = namespaces_unavailable()
    if reason is not None:
        pytest.skip(reason)
    host_a, host_b = f"dpca{tag}", f"dpcb{tag}"
    try:
        _setup([["netns", "add", host_a], ["netns", "add", host_b]])
        _setup([["-n", host, "link", "set", "lo", "up"] for host in (host_a, host_b)])
        yield host_a, host_b
    finally:
        ip("netns", "del", host_a)
        ip("netns", "del", host_b)


def _veth(tag: str, host_a: str, host_b: str, subnet: str) -> None:
    _setup(
        [
            ["link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}"],
            ["link", "set", f"va{tag}", "netns", host_a],
            ["link", "set", f"vb{tag}", "netns", host_b],
            ["-n", host_a, "addr", "add", f"{subnet}.1/24", "dev", f"va{tag}"],
            ["-n", host_b, "addr", "add", f"{subnet}.2/24", "dev", f"vb{tag}"],
            ["-n", host_a, "link", "set", f"va{tag}", "up"],
            ["-n", host_b, "link", "set", f"vb{tag}", "up"],
        ]
    )


@contextlib.contextmanager
def veth_hosts() -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """((host A, its address), (host B, its address)), joined by a veth pair."""
    tag = str(os.getpid() % 100000)
    subnet = f"10.231.{int(tag) % 250}"
    with _namespaces(tag) as (host_a, host_b):
        _veth(tag, host_a, host_b, subnet)
        yield (host_a, f"{subnet}.1"), (host_b, f"{subnet}.2")


# --------------------------------------------------------------------------- a lossy link

_TUNSETIFF, _IFF_TUN, _IFF_NO_PI = 0x400454CA, 0x0001, 0x1000


def _open_tun(name: str) -> int:
    descriptor = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(descriptor, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI))
    return descriptor


@dataclasses.dataclass(frozen=True)
class LinkShape:
    """What a link does to packets: a delay (mean and deviation, s), a loss rate, a rate."""

    delay: float = DELAY_SECONDS
    jitter: float = JITTER_SECONDS
    loss: float = LOSS
    bits_per_second: float | None = None

    def netem(self) -> list[str]:
        """The ``tc qdisc ... netem`` arguments that do the same."""
        arguments = ["delay", f"{self.delay * 1000:g}ms"]
        if self.jitter:
            arguments.append(f"{self.jitter * 1000:g}ms")
        if self.loss:
            arguments += ["loss", f"{self.loss * 100:g}%"]
        if self.bits_per_second:
            arguments += ["rate", f"{self.bits_per_second / 1e6:g}mbit"]
        return arguments


LOSSY = LinkShape()
SLOW = LinkShape(delay=0.100, jitter=0.0, loss=0.0, bits_per_second=10e6)


class PacketRelay:
    """What ``tc netem`` does (`LinkShape`: by default delay 100ms 30ms loss 1%), between two
    TUN devices.

    Every IP packet read from one device is dropped with probability ``loss`` or written to the
    other after a delay drawn from N(delay, jitter) (at least 0; packets may overtake each
    other, as with netem's jitter), and, with a rate, after the packets before it in its
    direction went out at that rate. Counts what it relayed and dropped.
    """

    def __init__(self, first: int, second: int, *, seed: int = 0, shape: LinkShape = LOSSY) -> None:
        self.ends = {first: second, second: first}
        self.random = random.Random(seed)
        self.shape = shape
        self.relayed = 0
        self.dropped = 0
        self._busy_until = {first: 0.0, second: 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="packet-relay", daemon=True)

    def __enter__(self) -> PacketRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _departure(self, out: int, now: float, size: int) -> float:
        """When a packet of ``size`` bytes read now leaves for ``out``."""
        shape = self.shape
        sent = now
        if shape.bits_per_second:
            sent = max(now, self._busy_until[out]) + size * 8 / shape.bits_per_second
            self._busy_until[out] = sent
        return sent + max(0.0, self.random.gauss(shape.delay, shape.jitter))

    def _run(self) -> None:
        queue: list[tuple[float, int, int, bytes]] = []
        order = 0
        while not self._stop.is_set():
            wait = 0.01 if not queue else max(0.0, min(0.01, queue[0][0] - time.monotonic()))
            readable, _, _ = select.select(list(self.ends), [], [], wait)
            now = time.monotonic()
            for end in readable:
                with contextlib.suppress(OSError):
                    packet = os.read(end, 65535)
                    if self.shape.loss and self.random.random() < self.shape.loss:
                        self.dropped += 1
                        continue
                    order += 1
                    out = self.ends[end]
                    departure = self._departure(out, now, len(packet))
                    heapq.heappush(queue, (departure, order, out, packet))
            while queue and queue[0][0] <= now:
                _, _, out, packet = heapq.heappop(queue)
                with contextlib.suppress(OSError):
                    os.write(out, packet)
                    self.relayed += 1


@dataclasses.dataclass(frozen=True)
class LossyHosts:
    """Two hosts (namespace, address) and how their link is made lossy."""

    host_a: tuple[str, str]
    host_b: tuple[str, str]
    how: str
    relay: PacketRelay | None = None


def _netem(host: str, device: str, shape: LinkShape) -> bool:
    command = ["netns", "exec", host, "tc", "qdisc", "add", "dev", device, "root", "netem"]
    return ip(*command, *shape.netem()).returncode == 0


@contextlib.contextmanager
def shaped_link(shape: LinkShape = LOSSY) -> Iterator[LossyHosts]:
    """Two hosts whose link is shaped as ``shape`` (tc netem, else a TUN relay)."""
    tag = str(os.getpid() % 100000)
    subnet = f"10.232.{int(tag) % 250}"
    with _namespaces(tag) as (host_a, host_b):
        if shutil.which("tc") is not None:
            _veth(tag, host_a, host_b, subnet)
            if _netem(host_a, f"va{tag}", shape) and _netem(host_b, f"vb{tag}", shape):
                yield LossyHosts((host_a, f"{subnet}.1"), (host_b, f"{subnet}.2"), "tc netem")
                return
            ip("-n", host_a, "link", "del", f"va{tag}")
        if not os.path.exists("/dev/net/tun"):
            pytest.skip("neither tc netem nor /dev/net/tun is available for a shaped link")
        ends = []
        for host, end, mine, theirs in (
            (host_a, f"ta{tag}", f"{subnet}.1", f"{subnet}.2"),
            (host_b, f"tb{tag}", f"{subnet}.2", f"{subnet}.1"),
        ):
            ends.append(_open_tun(end))
            _setup(
                [
                    ["link", "set", end, "netns", host],
                    ["-n", host, "addr", "add", mine, "peer", theirs, "dev", end],
                    ["-n", host, "link", "set", end, "up"],
                ]
            )
        try:
            with PacketRelay(*ends, shape=shape) as relay:
                hosts = LossyHosts((host_a, f"{subnet}.1"), (host_b, f"{subnet}.2"), "TUN relay")
                yield dataclasses.replace(hosts, relay=relay)
        finally:
            for end in ends:
                os.close(end)


def lossy_link() -> contextlib.AbstractContextManager[LossyHosts]:
    """Two hosts whose link delays packets by 100 ms ± 30 ms and loses 1% of them."""
    return shaped_link(LOSSY)


@pytest.fixture
def two_hosts() -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """Fixture: :func:`veth_hosts`."""
    with veth_hosts() as hosts:
        yield hosts


@pytest.fixture
def lossy_hosts() -> Iterator[LossyHosts]:
    """Fixture: :func:`lossy_link`."""
    with lossy_link() as hosts:
        yield hosts


@pytest.fixture
def slow_hosts() -> Iterator[LossyHosts]:
    """Fixture: two hosts over a link of 10 Mbit/s and 100 ms (`SLOW`)."""
    with shaped_link(SLOW) as hosts:
        yield hosts


# --------------------------------------------------------------------------- a busy machine


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` CPU-bound processes, running until the block ends."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait()


# --------------------------------------------------------------------------- a round on two hosts


def run_on_hosts(
    program: Any,
    countermeasure: Any,
    *,
    seed: int,
    host_a: tuple[str, str],
    host_b: tuple[str, str],
    directory: Path,
    idle_seconds: float = 30.0,
    timeout: float = 300.0,
    on_host_b: tuple[str, ...] = ("source",),
) -> Any:
    """One round: coordinator, result, compute nodes and scramblers on host A, sources on B.

    ``on_host_b`` names the roles placed on host B (never the coordinator's). Each host is a
    worker process of the local deployment (``python -m dpcomm.engine.network.worker``)
    started in its namespace; B learns the coordinator's port from A's report, as the
    launcher's workers do. Returns the :class:`Run`.
    """
    (namespace_a, address_a), (namespace_b, address_b) = host_a, host_b
    started = time.perf_counter()
    prepared = prepare(program, countermeasure, delta=1e-4)
    spec = RoundSpec.create(
        program,
        countermeasure,
        seed=seed,
        idle_seconds=idle_seconds,
        round_seconds=timeout,
    )
    configs = node_configs(program, spec, coordinator_host=address_a)
    authority = CertificateAuthority.create(directory / "pki")
    issue_many(authority, list(configs), directory / "pki")
    groups: dict[str, list[Any]] = {namespace_a: [], namespace_b: []}
    for config in configs.values():
        on_b = config.node.role in on_host_b and config.node != COORDINATOR
        address = address_b if on_b else address_a
        placed = dataclasses.replace(config, listen_host=address, advertise_host=address)
        groups[namespace_b if on_b else namespace_a].append(placed)
    files = {}
    for namespace, placed in groups.items():
        group = WorkerGroup(
            round=spec,
            nodes=tuple(c.settings for c in placed),
            credentials={
                c.name: CredentialPaths(
                    str(directory / "pki" / f"{c.name}.pem"),
                    str(directory / "pki" / f"{c.name}.key"),
                    str(directory / "pki" / "ca.pem"),
                )
                for c in placed
            },
        )
        files[namespace] = directory / f"{namespace}.json"
        files[namespace].write_bytes(encode(group))
    assert any(c.node == COORDINATOR for c in groups[namespace_a])
    command = [sys.executable, "-m", "dpcomm.engine.network.worker"]
    processes = {
        namespace: subprocess.Popen(
            ["ip", "netns", "exec", namespace, *command, str(files[namespace])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for namespace in (namespace_a, namespace_b)
    }
    try:
        first = decode(processes[namespace_a].stdout.readline().encode(), WorkerReport)
        assert first.port is not None, first
        processes[namespace_b].stdin.write(f"{first.port}\n")
        processes[namespace_b].stdin.flush()
        outcome, errors = GroupOutcome(), {}
        for namespace, process in processes.items():
            stdout, stderr = process.communicate(timeout=timeout + 60)
            report = decode(stdout.strip().splitlines()[-1].encode(), WorkerReport)
            if report.outcome is None:
                errors[namespace] = f"{report.error} {stderr[-2000:]}"
            else:
                outcome = outcome + report.outcome
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
            process.communicate()  # (closes its pipes, also after a failure)
    return assemble_run(
        program,
        spec,
        prepared,
        countermeasure,
        outcome,
        errors,
        delta=1e-4,
        seed=seed,
        seconds=time.perf_counter() - started,
        timings={"wall_seconds": time.perf_counter() - started},
    )
