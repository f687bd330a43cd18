"""The privacy of WHERE: a row that fails the filter is sent exactly as one that passes.

Neighbouring tables that differ only in whether one row passes the WHERE give the observer the
same traffic, run by run (same seed) in every mechanism, and the same exact output
distribution (enumerated on tiny instances): the pair costs nothing (δ(0) = 0). Tables whose
rows differ in the key too are an ordinary neighbouring pair: their exact hockey-stick
divergence stays below the δ the accountant reports.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import dpcomm
from dpcomm.accounting.accountant import account
from dpcomm.accounting.brute_force import output_distribution
from dpcomm.accounting.mechanisms import ScramblerMechanism
from dpcomm.data.table import Table, table_from_arrays
from dpcomm.queries.aggregate import AggregateProgram

pytestmark = pytest.mark.filterwarnings("ignore::dpcomm.errors.DpcommWarning")

SQL = "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t WHERE v > 0 GROUP BY k"


def table(keys: list[str], values: list[int]) -> Table:
    return table_from_arrays(
        "t", {"k": np.array(keys, dtype=object), "v": np.array(values, dtype=np.int64)}
    )


KEYS = ["a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c"]
VALUES = [5, 3, -1, 2, 7, 4, -6, 1, 8, 2, 2, 9]
PASSES = table(KEYS, VALUES)
FAILS = table(KEYS, [-5, *VALUES[1:]])  # row 0 fails the filter, same key


def traffic(run: dpcomm.AggregateRun) -> list[tuple[str, list[int], list[int], list[int], int]]:
    """What the observer sees: per flow, every edge and its message count, and the dummies."""
    return flows_seen(run.run.traffic)


def flows_seen(flows: Any) -> list[tuple[str, list[int], list[int], list[int], int]]:
    """`traffic` of an engine's run (its ``traffic``: one record per flow)."""
    seen = []
    for flow in flows:
        order = np.lexsort((flow.receivers, flow.senders))
        seen.append(
            (
                flow.flow,
                flow.senders[order].tolist(),
                flow.receivers[order].tolist(),
                flow.counts[order].tolist(),
                flow.dummies,
            )
        )
    return seen


COUNTERMEASURES = [
    dpcomm.LocalFlooding(sampling_rate=0.5),
    dpcomm.LocalFlooding(sampling_rate=0.3, num_dummies=2),
    dpcomm.Scramblers(sampling_rate=0.4, batch_size=4, num_dummies=3),
    dpcomm.NoCountermeasure(),
]


def _seeded_runs(data: Table, countermeasure: object, seeds: range) -> list[Any]:
    """Runs of ``dpcomm.run_sql(SQL, data, ...)`` with each seed, through its own steps: the
    program compiled and prepared once (its memory engine, its δ), then one engine run per
    seed (what run_sql runs for that seed; compiling anew each time was most of its cost)."""
    from dpcomm.engine.engines import make_engine
    from dpcomm.pipeline.job import Job, compile_aggregate, prepare

    program = compile_aggregate(
        SQL, data, release=None, countermeasure=countermeasure, num_targets=3
    )
    engine = make_engine("memory")
    prepared = prepare(Job(program, countermeasure, 1e-4, engine, "aggregate", SQL))
    return [
        engine.execute(program, countermeasure, delta=1e-4, seed=seed, prepared=prepared.plan)
        for seed in seeds
    ]


@pytest.mark.parametrize("countermeasure", COUNTERMEASURES, ids=lambda c: type(c).__name__)
def test_a_filtered_out_row_sends_as_if_it_passed(countermeasure: object) -> None:
    """Seed 0 through dpcomm.run_sql, seeds 0 to 19 through its compiled program's runs (seed
    0 checks that they are run_sql's)."""
    runs = [
        dpcomm.run_sql(SQL, data, countermeasure=countermeasure, num_targets=3, seed=0)
        for data in (PASSES, FAILS)
    ]
    assert traffic(runs[0]) == traffic(runs[1])
    assert runs[0].run.privacy == runs[1].run.privacy
    seeded = [_seeded_runs(data, countermeasure, range(20)) for data in (PASSES, FAILS)]
    assert flows_seen(seeded[0][0].traffic) == traffic(runs[0])
    assert flows_seen(seeded[1][0].traffic) == traffic(runs[1])
    for seed, (passing, failing) in enumerate(zip(*seeded, strict=True)):
        assert flows_seen(passing.traffic) == flows_seen(failing.traffic), f"seed {seed}"
        assert passing.privacy == failing.privacy
    # The results do differ: the compute node left the row out.
    exact = [
        dpcomm.run_sql(SQL, data, countermeasure=dpcomm.NoCountermeasure(), num_targets=3).rows
        for data in (PASSES, FAILS)
    ]
    assert exact[0] != exact[1]
    assert [r["n"] for r in exact[0] if r["k"] == "a"] == [3]
    assert [r["n"] for r in exact[1] if r["k"] == "a"] == [2]


def test_the_network_engine_sends_a_filtered_out_row_too() -> None:
    scramblers = dpcomm.Scramblers(sampling_rate=0.4, batch_size=4, num_dummies=3)
    runs = [
        dpcomm.run_sql(SQL, data, countermeasure=scramblers, num_targets=3, seed=3, engine=engine)
        for data in (PASSES, FAILS)
        for engine in ("memory", "network")
    ]
    assert traffic(runs[0]) == traffic(runs[1]) == traffic(runs[2]) == traffic(runs[3])
    assert runs[0].rows == runs[1].rows
    assert runs[2].rows == runs[3].rows != runs[0].rows


def _routes(data: Table, num_targets: int = 2) -> list[int]:
    program = AggregateProgram.from_sql(SQL, data, num_targets=num_targets)
    flow = program.flow_names[0]
    return [int(t) for t in program.route(program.initial_state(), flow, program.table)]


def _hockey_stick(p: dict[object, float], q: dict[object, float], epsilon: float) -> float:
    """max over both directions of Σ_o max(0, P(o) − e^ε Q(o))."""
    outcomes = set(p) | set(q)
    forward = sum(max(0.0, p.get(o, 0.0) - math.exp(epsilon) * q.get(o, 0.0)) for o in outcomes)
    backward = sum(max(0.0, q.get(o, 0.0) - math.exp(epsilon) * p.get(o, 0.0)) for o in outcomes)
    return max(forward, backward)


def test_enumeration_filter_only_neighbours_are_indistinguishable() -> None:
    """Three sources, one scrambler (n = 3, T = 2, d = 1): the exact output distributions."""
    passes = table(["x", "y", "x"], [1, 1, 1])
    fails = table(["x", "y", "x"], [-1, 1, 1])
    assert _routes(passes) == _routes(fails)
    mechanism = ScramblerMechanism(num_targets=2, sampling_rate=0.3, batch_size=3, num_dummies=1)
    p = output_distribution(mechanism, _routes(passes))
    q = output_distribution(mechanism, _routes(fails))
    assert _hockey_stick(p, q, 0.0) == pytest.approx(0.0, abs=1e-15)


def test_enumeration_filter_and_key_neighbours_within_the_reported_bound() -> None:
    """A row that fails the filter and changes its key: an ordinary neighbour (Section 4)."""
    passes = table(["x", "y", "x"], [1, 1, 1])
    routes = _routes(passes)
    other_key = next(
        k
        for k in ("x", "y", "z", "w", "v")
        if _routes(table([k, "y", "x"], [1, 1, 1]))[0] != routes[0]
    )
    moved = table([other_key, "y", "x"], [-1, 1, 1])
    assert _routes(moved)[0] != routes[0] and _routes(moved)[1:] == routes[1:]
    mechanism = ScramblerMechanism(num_targets=2, sampling_rate=0.3, batch_size=3, num_dummies=1)
    p = output_distribution(mechanism, routes)
    q = output_distribution(mechanism, _routes(moved))
    report = account(mechanism, delta=1e-4, monte_carlo_samples=0)
    assert _hockey_stick(p, q, report.guarantee.epsilon) <= report.guarantee.delta + 1e-12
    assert _hockey_stick(p, q, 0.0) > 0  # the key change is visible without noise bound


def _views(data: Table, countermeasure: object, seeds: range) -> list[tuple[int, ...]]:
    """What the observer counts per run: messages into each node of the plan, in node order.

    The runs are ``dpcomm.run_sql``'s (its memory engine, its delta), compiled and prepared
    once (`_seeded_runs`): only the seed differs from run to run.
    """
    from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure

    assert isinstance(countermeasure, LocalFlooding | NoCountermeasure)
    views = []
    for run in _seeded_runs(data, countermeasure, seeds):
        received: dict[int, int] = {}
        for flow in run.traffic:
            for receiver, count in zip(flow.receivers.tolist(), flow.counts.tolist(), strict=True):
                received[receiver] = received.get(receiver, 0) + count
        views.append(tuple(received.get(node, 0) for node in sorted(received)))
    return views


def _empirical_epsilon(first: list[tuple[int, ...]], second: list[tuple[int, ...]]) -> float:
    """A 95%-confidence lower bound on ε from two samples of views (the audit's method).

    The event is the view most over-represented in the first half of the first sample against
    the first half of the second; its frequencies are estimated on the second halves
    (one-sided Clopper-Pearson bounds, Bonferroni over the two directions).
    """
    from collections import Counter

    from scipy import stats

    half = len(first) // 2
    best = 0.0
    for a, b in ((first, second), (second, first)):
        select_a, select_b = Counter(a[:half]), Counter(b[:half])
        event = max(select_a, key=lambda v: select_a[v] - select_b.get(v, 0))
        trials = len(a) - half
        hits_a = sum(v == event for v in a[half:])
        hits_b = sum(v == event for v in b[half:])
        low_a = stats.beta.ppf(0.0125, hits_a, trials - hits_a + 1) if hits_a else 0.0
        high_b = stats.beta.ppf(0.9875, hits_b + 1, trials - hits_b) if hits_b < trials else 1.0
        if low_a > 0:
            best = max(best, math.log(low_a / high_b))
    return best


@pytest.mark.parametrize(
    "countermeasure",
    [dpcomm.LocalFlooding(sampling_rate=0.5), dpcomm.NoCountermeasure()],
    ids=lambda c: type(c).__name__,
)
def test_empirical_audit_of_a_filter_only_neighbour(countermeasure: object) -> None:
    """Independent runs on D and on D' (row 0 fails the filter): no ε is detectable, even
    without a countermeasure; the same audit detects a row that changes its key."""
    runs = 80
    passes = _views(PASSES, countermeasure, range(runs))
    fails = _views(FAILS, countermeasure, range(1000, 1000 + runs))
    assert _empirical_epsilon(passes, fails) == 0.0
    if isinstance(countermeasure, dpcomm.NoCountermeasure):
        moved_key = next(
            k
            for k in ("b", "c", "d", "e")
            if _routes(table([k, *KEYS[1:]], VALUES), 3)[0] != _routes(PASSES, 3)[0]
        )
        moved = table([moved_key, *KEYS[1:]], VALUES)
        other = _views(moved, countermeasure, range(2000, 2000 + runs))
        assert _empirical_epsilon(passes, other) > 2.0  # the audit has the power to see it


FILTER_SQL = "SELECT k, COUNT(*) FILTER (WHERE v > 0) AS n, SUM(v) FILTER (v > 0) FROM t GROUP BY k"


@pytest.mark.parametrize("countermeasure", COUNTERMEASURES[2:], ids=lambda c: type(c).__name__)
def test_a_row_a_filter_leaves_out_sends_as_if_it_passed(countermeasure: object) -> None:
    """FILTER (WHERE ...) is a per-aggregate WHERE: the traffic does not depend on it."""
    for seed in range(5):
        runs = [
            dpcomm.run_sql(
                FILTER_SQL, data, countermeasure=countermeasure, num_targets=3, seed=seed
            )
            for data in (PASSES, FAILS)
        ]
        assert traffic(runs[0]) == traffic(runs[1]), f"seed {seed}"
        assert runs[0].run.privacy == runs[1].run.privacy
    # the same traffic as the query without FILTER, run with the same seed
    filtered, plain = (
        dpcomm.run_sql(sql, PASSES, countermeasure=countermeasure, num_targets=3, seed=0)
        for sql in (FILTER_SQL, "SELECT k, COUNT(*) AS n, SUM(v) FROM t GROUP BY k")
    )
    assert traffic(filtered) == traffic(plain)
    exact = [
        dpcomm.run_sql(FILTER_SQL, data, countermeasure=dpcomm.NoCountermeasure(), num_targets=3)
        for data in (PASSES, FAILS)
    ]
    assert exact[0].rows != exact[1].rows
