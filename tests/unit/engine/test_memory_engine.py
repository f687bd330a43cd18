"""The in-memory engine (the vectorized simulator): traffic, delivered tuples, metrics, seeds."""

import numpy as np
import pytest

from dpcomm.data import table_from_arrays
from dpcomm.engine import simulate
from dpcomm.engine.traffic import channel_degrees, sorted_unique
from dpcomm.errors import BalancedBatchesWarning, DpcommWarning, InvalidParameterError
from dpcomm.pipeline.runs import run_aggregate
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT a, b, COUNT(*), AVG(x) FROM t GROUP BY GROUPING SETS ((a), (b))"


def make_program(rows=1000, compute=5, seed=0, sql=SQL):
    rng = np.random.default_rng(seed)
    table = table_from_arrays(
        "t",
        {
            "a": rng.integers(0, 12, rows),
            "b": rng.integers(0, 4, rows),
            "x": rng.normal(size=rows),
        },
    )
    return AggregateProgram.from_sql(sql, table, num_targets=compute)


def messages_of(run, suffix):
    return sum(f.messages for f in run.traffic if f.flow.endswith(suffix))


def test_no_countermeasure_sends_one_message_per_source_and_grouping_set():
    program = make_program()
    run = simulate(program, NoCountermeasure(), delta=1e-4, seed=0)
    assert run.tuples_used() == {"(a)": 1000, "(b)": 1000}
    # 2 × 1000 source messages, then one message from each compute node to the result.
    assert run.efficiency.messages == 2000 + 2 * 5
    assert run.efficiency.dummy_messages == 0
    assert run.efficiency.max_channels_by_role["source"] == 2
    # Every true edge is what the observer sees: the pattern reveals the data.
    edges = run.flow_traffic("(a)")
    targets = program.route(program.initial_state(), "(a)", program.table)
    offsets = run.transformed.routed.node_id_offsets
    assert np.array_equal(edges.receivers - offsets["compute(a)"], targets)
    assert np.array_equal(edges.senders - offsets["sources"], np.arange(1000))
    assert run.result == program.nonprivate_result()


def test_scramblers_traffic_matches_the_paper_counts():
    program = make_program(rows=1050)
    countermeasure = Scramblers(sampling_rate=0.3, batch_size=100, num_dummies=7)
    with pytest.warns(DpcommWarning, match="11 balanced batches of 95 or 96 sources"):
        run = simulate(program, countermeasure, delta=1e-4, seed=1)
    scramblers = 11  # balanced: 5 of 96 and 6 of 95 sources
    for flow in ("(a)", "(b)"):
        assert messages_of(run, f"{flow} (to scramblers)") == 1050
        assert messages_of(run, f"{flow} (scrambled)") == 1050 + scramblers * 7
        assert sorted(run.transformed.batches[flow]) == [95] * 6 + [96] * 5
    assert run.transformed.num_scramblers() == 2 * scramblers
    # The cost model counts the very messages the run sent.
    assert {f.name: f.messages for f in run.transformed.flows} == {
        f.flow: f.messages for f in run.traffic
    }
    # Each scrambler talks to its n sources and at most T = 5 compute nodes.
    assert run.efficiency.max_channels_by_role["scrambler"] <= 96 + 5
    assert run.efficiency.max_channels_by_role["source"] == 2


def test_delivered_share_is_one_minus_sigma_plus_sigma_over_t():
    program = make_program(rows=20_000, compute=5)
    run = simulate(program, LocalFlooding(sampling_rate=0.5, num_dummies=2), delta=0, seed=2)
    expected = 1 - 0.5 + 0.5 / 5
    for used in run.tuples_used().values():
        assert abs(used / 20_000 - expected) < 0.02
    # Flooding: d dummies per source on top of the first message.
    assert messages_of(run, "(a) (flooding)") == 2 * 20_000


def test_runs_are_reproducible_from_the_seed():
    program = make_program()
    countermeasure = Scramblers(sampling_rate=0.4, batch_size=50, num_dummies=5)
    first = simulate(program, countermeasure, delta=1e-4, seed=7)
    second = simulate(program, countermeasure, delta=1e-4, seed=7)
    other = simulate(program, countermeasure, delta=1e-4, seed=8)
    for name in first.delivered:
        assert np.array_equal(first.delivered[name], second.delivered[name])
    assert first.result == second.result
    assert all(
        np.array_equal(a.counts, b.counts)
        for a, b in zip(first.traffic, second.traffic, strict=True)
    )
    assert any(not np.array_equal(first.delivered[n], other.delivered[n]) for n in first.delivered)


def test_empty_grouping_set_goes_straight_to_its_single_compute_node():
    program = make_program(sql="SELECT a, SUM(x) FROM t GROUP BY ROLLUP (a)")
    run = simulate(
        program, Scramblers(sampling_rate=0.5, batch_size=100, num_dummies=5), delta=1e-4, seed=0
    )
    assert run.tuples_used()["()"] == 1000
    assert run.privacy.cluster("()").guarantee.epsilon == 0.0
    assert "() (scrambled)" not in {f.flow for f in run.traffic}


def test_extra_consents_keep_the_utility():
    program = make_program(rows=1000, compute=5)
    run = simulate(program, LocalFlooding(sampling_rate=0.5), delta=0, seed=0)
    keep = 1 - 0.5 + 0.5 / 5
    assert run.extra_consents() == int(np.ceil(1000 / keep)) - 1000


def test_documented_outcomes_are_warned():
    program = make_program(rows=50)
    with pytest.warns(DpcommWarning, match="sampling_rate σ = 1"):
        simulate(program, LocalFlooding(sampling_rate=1.0), delta=0, seed=0)
    with pytest.warns(BalancedBatchesWarning, match="1 batch of 50 sources"):
        run = simulate(program, Scramblers(sampling_rate=0.2, batch_size=100), delta=1e-4, seed=0)
    assert run.privacy.cluster("(a)").parts[0].mechanism.batch_size == 50
    # A plan above the target is refused before anything runs (one line naming the target).
    with pytest.raises(InvalidParameterError, match=r"^invalid target_epsilon: .*nothing ran"):
        simulate(
            make_program(rows=100),
            Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=2),
            delta=1e-4,
            seed=0,
            target_epsilon=0.5,
        )


def test_channel_degrees_and_sorted_unique():
    class Flow:
        def __init__(self, senders, receivers, counts):
            self.senders = np.array(senders)
            self.receivers = np.array(receivers)
            self.counts = np.array(counts)

    flows = [Flow([0, 0, 1], [2, 2, 2], [1, 1, 3]), Flow([2], [0], [1])]
    assert channel_degrees(flows, 3).tolist() == [1, 1, 2]
    assert sorted_unique(np.array([3, 1, 3, 2, 1])).tolist() == [1, 2, 3]


def test_run_report_holds_every_metric():
    program = make_program()
    outcome = run_aggregate(
        program, Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10), delta=1e-4
    )
    report = outcome.report
    document = report.to_dict()
    assert set(document) >= {"privacy", "utility", "efficiency", "countermeasure", "seed"}
    assert set(document["efficiency"]) >= {
        "messages",
        "messages_nonprivate",
        "bytes",
        "bytes_nonprivate",
        "max_channels_per_node",
        "mean_channels_per_node",
        "extra_consents",
    }
    assert report.utility.groups_missing >= 0
    assert report.privacy.epsilon > 0
    dependent = [c.cluster for c in report.privacy.clusters if c.data_dependent]
    assert dependent == ["(a)", "(b)"]
    assert outcome.baseline.privacy is None  # the non-private baseline is not accounted
