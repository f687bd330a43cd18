"""A packet capture of a whole deployed round: what the observer of the wire sees.

Every TLS 1.3 application-data record that carries a frame has the same length (frame size
+ 17), whatever the frame (sealed real tuple, dummy, ack, control), and the number of such
records on each connection direction matches the frames the nodes report per link, dummies
included: the wire carries every frame the receivers read and nothing the senders did not
report.
"""

from collections import Counter

import pytest
from _capture import TcpdumpCapture
from test_capture_tls import TLS_OVERHEAD

from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, reference_result

# The capture sees all of loopback: another test's round alongside would be counted too.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SQL = "SELECT g1, COUNT(*), AVG(m1) FROM t GROUP BY g1"
CLOSE_ALERT = 19  # an encrypted TLS 1.3 alert record: 2 bytes + inner type + 16-byte tag


def frames_on_the_wire(records, frame_record):
    """Per connection direction, the application-data records of a frame's length.

    After the first frame, every record is a frame or the closing alert.
    """
    captured = []
    for direction, items in records.items():
        lengths = [length for kind, length in items if kind == 23]
        if frame_record not in lengths:
            continue  # a connection refused or closed before any frame (none expected here)
        tail = lengths[lengths.index(frame_record) :]
        others = [n for n in tail if n != frame_record]
        assert all(n == CLOSE_ALERT for n in others), (direction, Counter(tail))
        captured.append(sum(1 for n in tail if n == frame_record))
    return captured


def test_capture_of_a_round_shows_equal_records_matching_the_links(tmp_path):
    pytest.importorskip("scapy")
    reason = TcpdumpCapture.available()
    if reason is not None:
        pytest.skip(reason)
    table = synthetic_table(num_rows=200, seed=5)
    program = AggregateProgram.from_sql(SQL, table, num_targets=4)
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=6)
    # A loaded machine can make the capture lose packets (the kernel says so, or a TCP stream
    # has a hole); such a capture proves nothing either way, so the round is captured again.
    # A frame a receiver read crossed the wire, so a capture with fewer frames than were read
    # missed packets too (the sniffer fell behind without the kernel counting a drop).
    for attempt in range(3):
        with TcpdumpCapture(tmp_path / f"round-{attempt}.pcap") as sniffer:
            engine = NetworkEngine(transport="tls", timeout=60, idle_seconds=10)
            run = engine.execute(program, countermeasure, delta=1e-4, seed=2)
        capture = sniffer.capture()
        if capture.dropped or capture.gaps:
            continue
        wire = run.details.wire
        captured = frames_on_the_wire(capture.records(), wire.frame_size + TLS_OVERHEAD)
        received = sum(link.frames_received for link in wire.links)
        if sum(captured) >= received:
            break
    else:
        pytest.skip(f"the capture lost packets 3 times (kernel drops {capture.dropped})")
    # Every frame a receiver read crossed the wire, and nothing crossed it that a sender did
    # not report (a frame written while its peer was hanging up may be lost in between).
    sent = sum(link.frames for link in wire.links)
    assert received <= sum(captured) <= sent
    # The dummies are on the wire like everything else: data frames are n + d per scrambler.
    data = sum(link.data_frames for link in wire.links if link.sender.startswith("scrambler"))
    assert data == 200 + 4 * 6
    masks = [run.delivered[flow] for flow in program.flow_names]
    assert compare_results(run.result, reference_result(program.query, program.table, masks)) == []
