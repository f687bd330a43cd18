"""Packet capture on loopback (scapy, no libpcap) and TLS record extraction, for the tests."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Capture:
    """TCP payload bytes per direction (src port, dst port), in arrival order."""

    streams: dict[tuple[int, int], bytearray] = field(
        default_factory=lambda: defaultdict(bytearray)
    )

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
