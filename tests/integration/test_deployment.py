"""A real deployment on loopback: separate processes, mutual TLS 1.3, sealed fixed-size frames."""

import json

import numpy as np
import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import Faults, deploy_local, node_configs, round_spec
from dpcomm.engine.network.runtime_spec import NodeConfig, decode_tuple, encode_tuple
from dpcomm.engine.runs import privacy_report
from dpcomm.plan import Scramblers, account_plan
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, reference_result

SQL = (
    "SELECT g1, g2, COUNT(*), AVG(m1), SUM(m2), MIN(m1) FROM synthetic "
    "GROUP BY GROUPING SETS ((g1), (g2))"
)
COUNTERMEASURE = Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=5)
SEED = 11


def program_of(rows):
    table = synthetic_table(num_rows=rows, seed=3)
    return AggregateProgram.from_sql(SQL, table, num_compute_nodes=5)


@pytest.fixture(scope="module")
def clean():
    program = program_of(300)
    report = deploy_local(
        program, COUNTERMEASURE, delta=1e-4, seed=SEED, timeout=90, collect_seconds=20
    )
    return program, report


def test_tuple_encoding_round_trips():
    program = program_of(20)
    spec = round_spec(program, COUNTERMEASURE, seed=0)
    configs = node_configs(program, spec)
    row = configs["source-7"].row
    payload = encode_tuple(spec, 1, 7, row)
    index, flow, values = decode_tuple(spec, payload)
    assert (index, flow) == (7, 1)
    assert values == {name: row[name] for name in spec.flows[1].carried}
    assert NodeConfig.from_json(configs["source-7"].to_json()) == configs["source-7"]
    assert json.loads(configs["scrambler-1-0"].to_json())["role"] == "scrambler"


@pytest.mark.slow
def test_round_equals_duckdb_over_delivered_tuples(clean):
    program, report = clean
    assert report.errors == {}
    assert report.lost_scramblers == ()
    masks = report.masks(program.table.num_rows)
    expected = reference_result(program.query, program.table, masks)
    assert compare_results(report.result, expected) == []
    # R_σ with σ = 0.2 and T = 5 keeps about 84% of the tuples.
    for mask in masks:
        assert 0.7 * 300 < mask.sum() < 0.97 * 300


@pytest.mark.slow
def test_privacy_report_is_the_accountants(clean):
    program, report = clean
    assert report.privacy == privacy_report(account_plan(program.plan, COUNTERMEASURE, delta=1e-4))


@pytest.mark.slow
def test_every_frame_has_the_same_length_and_counts_match_the_simulator(clean):
    _, report = clean
    assert report.frame_lengths == (report.frame_size,)
    assert all(link.bytes == link.frames * report.frame_size for link in report.links)
    assert all(link.frames == link.frames_received for link in report.links)
    # Sources -> scramblers and scramblers -> targets: S + (S + k·d) per grouping set.
    assert report.data_frames == report.simulated["data_messages"] == 2 * (300 + 300 + 6 * 5)
    assert report.wire_summary()["max_data_channels_by_role"]["source"] == 2
    assert report.dropped_total() == 0
    assert all(s["received"] == s["members"] for s in report.scramblers.values())


@pytest.mark.slow
def test_replayed_malformed_and_unauthenticated_frames_are_dropped(clean):
    program, first = clean
    faults = Faults(replay_sources=(3, 4), malformed_sources=(5,), unauthenticated_sources=(6,))
    report = deploy_local(
        program,
        COUNTERMEASURE,
        delta=1e-4,
        seed=SEED,
        timeout=90,
        collect_seconds=20,
        faults=faults,
    )
    assert report.errors == {}
    # Each replay is dropped twice: once per grouping set's scrambler.
    assert report.dropped_total("replay") == 4
    assert report.dropped_total("magic") + report.dropped_total("padding") >= 2
    assert report.dropped_total("handshake") >= 2
    # Same seed, same draws: the replays changed nothing.
    assert report.delivered == first.delivered
    assert compare_results(report.result, first.result) == []


@pytest.mark.slow
def test_killed_scrambler_loses_its_batch_whole_and_late_source_is_left_out():
    program = program_of(200)
    victim = 5  # scrambler-1-1: second scrambler of grouping set (g2)
    late = 17
    report = deploy_local(
        program,
        COUNTERMEASURE,
        delta=1e-4,
        seed=SEED,
        timeout=60,
        collect_seconds=3,
        kill_scrambler=victim,
        faults=Faults(late_sources=(late,)),
    )
    assert report.lost_scramblers == ("scrambler-1-1",)
    assert "scrambler-1-1" not in report.committed
    assert "scrambler-1-1" not in report.scramblers  # it died before reporting
    assert all(late in rows for rows in report.left_out_sources.values())
    masks = report.masks(program.table.num_rows)
    assert not masks[0][late] and not masks[1][late]
    # None of the dead scrambler's sources reached (g2); none was counted twice.
    spec_members = _members_of(report, program, flow=1, scrambler="scrambler-1-1")
    assert spec_members.size > 0 and not masks[1][spec_members].any()
    assert masks[0][spec_members].sum() > 0.6 * len(spec_members)
    # Compute nodes of (g2) held part of its batch (it died mid-forward) and discarded it.
    held = [node for node, senders in report.discarded.items() if "scrambler-1-1" in senders]
    assert held and all(node.startswith("compute-1-") for node in held)
    expected = reference_result(program.query, program.table, masks)
    assert compare_results(report.result, expected) == []
    for rows in report.delivered.values():
        assert len(rows) == len(set(rows))
    # The guarantee is that of the batches as run: the late source's scramblers batched
    # n − 1 sources and the dead one counts as a batch of one, so it is weaker than planned.
    planned = privacy_report(account_plan(program.plan, COUNTERMEASURE, delta=1e-4))
    assert report.privacy["epsilon"] != "inf"
    assert report.privacy["epsilon"] > planned["epsilon"]
    sizes = {
        part["batch_size"] for cluster in report.privacy["clusters"] for part in cluster["parts"]
    }
    assert 1 in sizes and COUNTERMEASURE.batch_size - 1 in sizes


def _members_of(report, program, *, flow, scrambler):
    """Sources of a scrambler: those whose (flow) frame went to it (from the measured links)."""
    members = [
        int(link.sender.split("-")[1])
        for link in report.links
        if link.receiver == scrambler and link.sender.startswith("source-")
    ]
    return np.array(sorted(members), dtype=np.int64)
