"""A real deployment on loopback: separate processes, mutual TLS 1.3, sealed fixed-size frames.

The same program with the same seed gives the in-memory engine's run (the engine contract, over
real TLS between processes); faults (replayed, malformed and unauthenticated frames, a scrambler
killed mid-forward, a late source) are dropped, counted and accounted as run.
"""

import json
import math

import numpy as np
import pytest
from engine_contract import MECHANISMS, same_run

from dpcomm.data import load_mnist5k, synthetic_table
from dpcomm.engine.memory import simulate
from dpcomm.engine.network.deploy import Faults, NetworkEngine, node_configs
from dpcomm.engine.network.names import NodeName
from dpcomm.engine.network.spec import NodeConfig, RoundSpec
from dpcomm.errors import DpcommWarning
from dpcomm.pipeline.charge import deployment_privacy
from dpcomm.pipeline.report import privacy_report
from dpcomm.pipeline.runs import run_aggregate
from dpcomm.plan import Scramblers, account_plan
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, reference_result
from dpcomm.queries.kmeans import KMeansProgram

SQL = (
    "SELECT g1, g2, COUNT(*), AVG(m1), SUM(m2), MIN(m1) FROM synthetic "
    "GROUP BY GROUPING SETS ((g1), (g2))"
)
COUNTERMEASURE = Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=5)
SEED = 11
#: Sources of the fault-free round: 3 scramblers of 50 per grouping set.
ROWS = 150

pytestmark = pytest.mark.slow


def program_of(rows):
    table = synthetic_table(num_rows=rows, seed=3)
    return AggregateProgram.from_sql(SQL, table, num_targets=5)


def tls(**options):
    settings = {"transport": "tls", "timeout": 90, "idle_seconds": 20, **options}
    return NetworkEngine(**settings)


@pytest.fixture(scope="module")
def clean():
    program = program_of(ROWS)
    outcome = run_aggregate(program, COUNTERMEASURE, delta=1e-4, seed=SEED, engine=tls())
    return program, outcome


def test_configs_round_trip_and_carry_only_public_parameters():
    program = program_of(20)
    spec = RoundSpec.create(
        program,
        COUNTERMEASURE,
        round_id=7,
        seed=None,
        idle_seconds=5,
        round_seconds=30,
    )
    configs = node_configs(program, spec)
    source = configs["source-7"]
    assert NodeConfig.from_json(source.to_json()) == source
    assert json.loads(configs["scrambler-1-0"].to_json())["name"] == "scrambler-1-0"
    assert json.loads(source.to_json())["round"]["seed"] is None
    # A source's config holds its own row only: decoded, it is that row of the table.
    rows = spec.public_program.codec.rows.decode([bytes.fromhex(source.row)])
    expected = program.table.take(np.array([7]))
    for column in rows.columns:
        assert column.values.tolist() == expected.column(column.name).values.tolist()
    assert {str(n) for n in spec.node_names()} == set(configs)
    assert (
        spec.node_id(NodeName.parse("compute-1-2"))
        == spec.transformed.routed.node_id_offsets["compute(g2)"] + 2
    )


def test_a_round_over_tls_is_the_memory_run(clean):
    program, outcome = clean
    run = outcome.run
    assert run.details.errors == {}
    assert run.details.lost_scramblers == ()
    same_run(simulate(program, COUNTERMEASURE, delta=1e-4, seed=SEED), run)
    masks = [run.delivered[flow] for flow in program.flow_names]
    assert compare_results(run.result, reference_result(program.query, program.table, masks)) == []
    # R_σ with σ = 0.2 and T = 5 keeps about 84% of the tuples.
    for mask in masks:
        assert 0.7 * ROWS < mask.sum() < 0.97 * ROWS
    planned = privacy_report(account_plan(program.plan, COUNTERMEASURE, delta=1e-4))
    assert outcome.report.privacy == planned


def test_every_frame_has_the_same_length_and_the_wire_carries_the_plan(clean):
    _, outcome = clean
    wire = outcome.report.details.wire
    assert wire.frame_lengths_observed == (wire.frame_size,)
    for link in wire.links:
        assert link.bytes == link.frames * wire.frame_size
        assert link.frames_received <= link.frames
    # Sources -> scramblers and scramblers -> targets: S + (S + k·d) per grouping set.
    scramblers = ROWS // COUNTERMEASURE.batch_size
    assert wire.data_frames == 2 * (ROWS + ROWS + scramblers * COUNTERMEASURE.num_dummies)
    assert wire.max_data_channels_by_role["source"] == 2
    assert wire.dropped_total == 0
    assert outcome.report.to_dict()["wire"]["frame_lengths_observed"] == [wire.frame_size]


def test_replayed_malformed_and_unauthenticated_frames_are_dropped(clean):
    program, first = clean
    faults = Faults(replay_sources=(3, 4), malformed_sources=(5,), unauthenticated_sources=(6,))
    outcome = run_aggregate(
        program, COUNTERMEASURE, delta=1e-4, seed=SEED, engine=tls(faults=faults)
    )
    run = outcome.run
    assert run.details.errors == {}
    dropped = run.details.wire.dropped

    def total(reason):
        return sum(counts.get(reason, 0) for counts in dropped.values())

    # Each replay is dropped twice: once per grouping set's scrambler.
    assert total("replay") == 4
    assert total("magic") + total("padding") >= 2
    assert total("handshake") >= 2
    # Same seed, same draws: the replays changed nothing.
    same_run(first.run, run)


def test_killed_scrambler_loses_its_batch_whole_and_late_source_is_left_out():
    # 40 sources in scramblers of 20, two per grouping set: every source reaches its
    # scramblers within T even on a loaded machine (with 200 sources in scramblers of 50, a
    # loaded 2-core machine closed windows for inactivity before every source had sent).
    program = program_of(40)
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=20, num_dummies=5)
    victim = 3  # scrambler-1-1: the second scrambler of grouping set (g2)
    late = 7
    faults = Faults(kill_scrambler=victim, late_sources=(late,))
    planned = privacy_report(account_plan(program.plan, countermeasure, delta=1e-4))
    # The plan meets a target of its own ε; the batches as run do not, and the run says so.
    with pytest.warns(DpcommWarning, match="batches smaller than planned ran"):
        outcome = run_aggregate(
            program,
            countermeasure,
            delta=1e-4,
            seed=SEED,
            engine=tls(timeout=60, idle_seconds=6, faults=faults),
            target_epsilon=planned.epsilon,
        )
    run = outcome.run
    assert run.details.lost_scramblers == ("scrambler-1-1",)
    assert all(late in rows for rows in run.details.left_out_sources.values())
    assert not run.delivered["(g1)"][late] and not run.delivered["(g2)"][late]
    # None of the dead scrambler's sources reached (g2); none was counted twice.
    reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
    links = run.details.wire.links
    members = sorted(
        NodeName.parse(link.sender).index
        for link in links
        if link.receiver == "scrambler-1-1" and link.sender.startswith("source-")
    )
    assert members and not run.delivered["(g2)"][members].any()
    # Its members are left out with the late source, and the round says it failed.
    assert set(members) <= set(run.details.left_out_sources["(g2)"])
    assert any("sources were left out" in f for f in run.details.failures)
    assert run.delivered["(g1)"][members].sum() > 0.6 * len(members)
    # Everything else is the memory run's: the faults only took tuples out.
    for flow in ("(g1)", "(g2)"):
        assert not (run.delivered[flow] & ~reference.delivered[flow]).any()
    masks = [run.delivered[flow] for flow in program.flow_names]
    assert compare_results(run.result, reference_result(program.query, program.table, masks)) == []
    # The guarantee is that of the batches as run: the late source's scramblers batched
    # n − 1 sources, so it is weaker than planned; the dead one is accounted at the size its
    # acknowledged members give (every member was acknowledged before it died mid-forward).
    privacy = outcome.report.privacy
    assert math.isfinite(privacy.epsilon) and privacy.epsilon > planned.epsilon
    g2 = next(c for c in privacy.clusters if "(g2)" in c.cluster)
    g2_sizes = {part.batch_size: part.instances for part in g2.parts}
    assert sum(g2_sizes.values()) == 40 // countermeasure.batch_size  # every scrambler, once
    dead_size = len([m for m in members if m != late])
    assert dead_size in g2_sizes and max(g2_sizes) <= countermeasure.batch_size
    assert min(g2_sizes) < countermeasure.batch_size  # the late source's scramblers
    # What a budget charges a deployment before it runs bounds what this round reports.
    charged = deployment_privacy(program.plan, countermeasure, delta=1e-4).guarantee
    assert privacy.epsilon <= charged.epsilon and privacy.delta <= charged.delta


def test_kmeans_over_tls_is_the_memory_run():
    digits = load_mnist5k()
    program = KMeansProgram(digits.train_images[:90], 4, 2, seed=1)
    countermeasure = MECHANISMS["scramblers"]
    run = tls(timeout=90, idle_seconds=15).execute(program, countermeasure, delta=1e-4, seed=3)
    assert run.details.errors == {}
    same_run(simulate(program, countermeasure, delta=1e-4, seed=3), run)
    wire = run.details.wire
    assert wire.frame_lengths_observed == (wire.frame_size,)
    assert wire.frame_size > 784 * 4
