"""Packet capture on loopback and TLS record extraction, for the tests.

:class:`TcpdumpCapture` runs tcpdump (libpcap's kernel ring buffer keeps every packet of a busy
round) and parses the pcap with scapy; :class:`LoopbackSniffer` sniffs with scapy alone, which
is enough for a few connections but drops packets under load.
"""

from __future__ import annotations

import re
import select
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Capture:
    """TCP payload bytes per direction (src port, dst port), in arrival order.

    ``gaps`` counts places where a direction's captured segments do not join up (the capture
    lost a packet) and ``dropped`` the packets the kernel dropped: a capture with either proves
    nothing, and a test should capture again.
    """

    streams: dict[tuple[int, int], bytearray] = field(
        default_factory=lambda: defaultdict(bytearray)
    )
    gaps: int = 0
    dropped: int = 0

    def records(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        """TLS records per direction: (content type, length); incomplete tails dropped."""
        result = {}
        for key, data in self.streams.items():
            records, position = [], 0
            while position + 5 <= len(data):
                kind, length = data[position], int.from_bytes(data[position + 3 : position + 5])
                if position + 5 + length > len(data):
                    break
                records.append((kind, length))
                position += 5 + length
            result[key] = records
        return result


class LoopbackSniffer:
    """Capture TCP on ``lo`` for the given ports (or every port when ``ports`` is None)."""

    def __init__(self, ports: set[int] | None = None) -> None:
        from scapy.all import TCP, AsyncSniffer

        self._tcp = TCP
        self.ports = ports
        self._sniffer = AsyncSniffer(iface="lo", lfilter=self._keep, store=True)

    def _keep(self, packet: object) -> bool:
        if self._tcp not in packet:  # type: ignore[operator]
            return False
        if self.ports is None:
            return True
        segment = packet[self._tcp]  # type: ignore[index]
        return bool({segment.sport, segment.dport} & self.ports)

    def __enter__(self) -> LoopbackSniffer:
        self._sniffer.start()
        time.sleep(0.5)  # the socket is open once start() returns; let it settle
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(0.5)
        self.packets = self._sniffer.stop()

    def capture(self) -> Capture:
        """Reassemble each direction's payload by TCP sequence number (loopback: no loss)."""
        segments: dict[tuple[int, int], dict[int, bytes]] = defaultdict(dict)
        for packet in self.packets:
            segment = packet[self._tcp]
            payload = bytes(segment.payload)
            if payload:
                segments[(segment.sport, segment.dport)][segment.seq] = payload
        result = Capture()
        for key, parts in segments.items():
            for sequence in sorted(parts):
                result.streams[key] += parts[sequence]
        return result


def _reassemble(packets: object) -> Capture:
    from scapy.all import TCP

    segments: dict[tuple[int, int], dict[int, bytes]] = defaultdict(dict)
    for packet in packets:  # type: ignore[attr-defined]
        if TCP not in packet:
            continue
        segment = packet[TCP]
        payload = bytes(segment.payload)
        if payload:
            segments[(segment.sport, segment.dport)][segment.seq] = payload
    result = Capture()
    for key, parts in segments.items():
        expected = None
        for sequence in sorted(parts):
            if expected is not None and sequence != expected:
                result.gaps += 1
            result.streams[key] += parts[sequence]
            expected = (sequence + len(parts[sequence])) % (1 << 32)
    return result


class TcpdumpCapture:
    """Capture every TCP packet on ``lo`` into a pcap file with tcpdump."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dropped = 0
        self._process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> str | None:
        """None when tcpdump can capture here, else the reason it cannot."""
        if shutil.which("tcpdump") is None:
            return "tcpdump is not installed (make test installs it)"
        probe = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-w", "/dev/null"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)
        if probe.poll() is not None:  # it exited at once: it cannot capture here
            _, error = probe.communicate()
            message = error.decode().strip().splitlines()
            return f"tcpdump cannot capture on lo: {message[-1] if message else probe.returncode}"
        probe.send_signal(signal.SIGINT)
        probe.communicate(timeout=10)
        return None

    def __enter__(self) -> TcpdumpCapture:
        self._process = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-s", "0", "-B", "65536", "-U", "-w", str(self.path), "tcp"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # tcpdump says "listening on lo" once the capture runs; wait for it (10 s at most).
        assert self._process.stderr is not None
        ready, _, _ = select.select([self._process.stderr], [], [], 10)
        if ready:
            self._process.stderr.readline()
        time.sleep(0.3)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._process is not None
        # tcpdump may lag behind the kernel's ring buffer on a loaded machine: wait until the
        # file has stopped growing before stopping it (what it had not read would be lost).
        last, steady, deadline = -1, 0, time.monotonic() + 15
        while steady < 5 and time.monotonic() < deadline:
            size = self.path.stat().st_size if self.path.exists() else 0
            steady = steady + 1 if size == last else 0
            last = size
            time.sleep(0.2)
        self._process.send_signal(signal.SIGINT)
        try:
            _, error = self._process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            _, error = self._process.communicate()
        text = error or b""
        found = re.search(rb"(\d+) packets? dropped by kernel", text)
        self.dropped = int(found.group(1)) if found else 0

    def capture(self) -> Capture:
        """The pcap's TCP payloads, reassembled per direction."""
        from scapy.all import rdpcap

        result = _reassemble(rdpcap(str(self.path)))
        result.dropped = self.dropped
        return result
