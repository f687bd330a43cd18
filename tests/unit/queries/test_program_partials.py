"""Target steps in parts: target_partials of any split, combined, equal target_outputs.

A distributed engine computes each compute node's output from partials of the partitions of
the sources' rows; the combination must be exactly (==) the output of the whole, whatever the
split (empty pieces too) and the order of the partials, for Aggregate (two grouping sets, one of
them the empty set) and K-means.
"""

from __future__ import annotations

import pickle
from fractions import Fraction

import numpy as np
import pytest
from tests.conftest import same

from dpcomm.data.table import Column, Table
from dpcomm.protocol.roles import TargetStep, target_outputs
from dpcomm.queries.aggregate import AggregateOutput, AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram, as_float32_values

SQL = (
    "SELECT region, COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x), SUM(n), AVG(n), "
    "MAX(n) FROM t GROUP BY GROUPING SETS ((region), ())"
)


def mixed_values_program(rows: int = 300, seed: int = 0) -> AggregateProgram:
    rng = np.random.default_rng(seed)
    regions = np.array(["north", "south", "east", "west", "é"], dtype=object)
    region = regions[rng.integers(0, len(regions), rows)]
    # Magnitudes from 1e-12 to 1e12, and -0.0: a float sum in some order would differ.
    x = rng.normal(size=rows) * 10.0 ** rng.integers(-12, 13, rows)
    x[rng.random(rows) < 0.05] = -0.0
    n = rng.integers(-(2**62), 2**62, rows)
    columns = (
        Column("region", "VARCHAR", region, rng.random(rows) < 0.1),
        Column("x", "DOUBLE", x, rng.random(rows) < 0.1),
        Column("n", "BIGINT", n, rng.random(rows) < 0.1),
    )
    return AggregateProgram.from_sql(SQL, Table("t", columns), num_targets=4)


def random_split(rng: np.random.Generator, rows: int, pieces: int) -> list[np.ndarray]:
    labels = rng.integers(0, pieces, rows)
    return [np.flatnonzero(labels == p) for p in rng.permutation(pieces)]


@pytest.mark.parametrize("seed", range(6))
def test_aggregate_partials_of_any_split_combine_to_the_outputs(seed):
    program = mixed_values_program(seed=seed)
    rng = np.random.default_rng(100 + seed)
    state = program.initial_state()
    table = program.source_rows()
    for flow in program.flow_names:
        tuples = program.carried(flow, table)
        truth = program.route(state, flow, table)
        targets = range(program.targets_of(program.set_index(flow)))
        expected = target_outputs(program, TargetStep(state, 0, flow, targets), tuples, truth)
        pieces = random_split(rng, table.num_rows, int(rng.integers(1, 6)))
        pieces.append(np.zeros(0, dtype=np.int64))  # an empty partition
        partials = [
            program.target_partials(
                TargetStep(state, 0, flow, targets), tuples.take(rows), truth[rows]
            )
            for rows in pieces
        ]
        assert all(set(p) == set(targets) for p in partials)
        combined = program.combine_partials(TargetStep(state, 0, flow, targets), partials)
        assert combined == expected
        # Partials travel (pickled), in another order.
        travelled = [pickle.loads(pickle.dumps(p)) for p in reversed(partials)]
        assert program.combine_partials(TargetStep(state, 0, flow, targets), travelled) == expected


def test_aggregate_outputs_of_the_whole_are_the_nonprivate_result():
    program = mixed_values_program()
    state = program.initial_state()
    table = program.source_rows()
    outputs = {}
    for flow in program.flow_names:
        truth = program.route(state, flow, table)
        targets = range(program.targets_of(program.set_index(flow)))
        produced = target_outputs(
            program, TargetStep(state, 0, flow, targets), program.carried(flow, table), truth
        )
        outputs.update({(flow, t): o for t, o in produced.items()})
    assert program.result(program.merge(state, 0, outputs)) == program.nonprivate_result()


def test_aggregate_targets_without_tuples():
    program = mixed_values_program()
    state = program.initial_state()
    table = program.source_rows()
    for flow in program.flow_names:
        index = program.set_index(flow)
        targets = range(program.targets_of(index))
        nothing = table.take(np.zeros(0, dtype=np.int64))
        none = target_outputs(
            program,
            TargetStep(state, 0, flow, targets),
            program.carried(flow, nothing),
            np.zeros(0, np.int64),
        )
        # No partial at all, or only partials of empty subsets: the outputs of no tuple.
        assert program.combine_partials(TargetStep(state, 0, flow, targets), []) == none
        empty = program.target_partials(
            TargetStep(state, 0, flow, targets),
            program.carried(flow, nothing),
            np.zeros(0, np.int64),
        )
        assert program.combine_partials(TargetStep(state, 0, flow, targets), [empty, empty]) == none
        if program.query.grouping_sets[index]:
            assert all(o == AggregateOutput((), ()) for o in none.values())
        else:
            # The empty grouping set has one row even over no tuples: COUNT(*) = 0.
            (row,) = none[0].rows
            assert none[0].keys == ((),)
            assert row["count_star()"] == 0 and row["sum(x)"] is None


def test_aggregate_partials_of_some_targets_only():
    program = mixed_values_program()
    state = program.initial_state()
    table = program.source_rows()
    flow = program.flow_names[0]
    tuples, truth = program.carried(flow, table), program.route(state, flow, table)
    expected = target_outputs(program, TargetStep(state, 0, flow, [1, 3]), tuples, truth)
    halves = np.array_split(np.arange(table.num_rows), 2)
    partials = [
        program.target_partials(TargetStep(state, 0, flow, [1, 3]), tuples.take(rows), truth[rows])
        for rows in halves
    ]
    assert program.combine_partials(TargetStep(state, 0, flow, [1, 3]), partials) == expected
    everything = target_outputs(program, TargetStep(state, 0, flow, range(4)), tuples, truth)
    assert expected == {1: everything[1], 3: everything[3]}


def kmeans_program(seed: int, rows: int = 400, dimension: int = 6) -> KMeansProgram:
    rng = np.random.default_rng(seed)
    # Coordinates over 40 binades: float64 sums of their float32 values are not exact.
    points = rng.normal(size=(rows, dimension)) * 10.0 ** rng.integers(-20, 20, (rows, 1))
    return KMeansProgram(points.astype(np.float32), 5, 2, seed=seed)


@pytest.mark.parametrize("seed", range(6))
def test_kmeans_partials_of_any_split_combine_to_the_outputs(seed):
    program = kmeans_program(seed)
    rng = np.random.default_rng(200 + seed)
    state = program.initial_state()
    flow = program.flow_name(1)
    points = program.source_rows()
    truth = program.route(state, flow, points)
    targets = range(program.num_centroids)
    expected = target_outputs(program, TargetStep(state, 0, flow, targets), points, truth)
    pieces = random_split(rng, len(points), int(rng.integers(1, 6)))
    pieces.append(np.zeros(0, dtype=np.int64))
    partials = [
        program.target_partials(TargetStep(state, 0, flow, targets), points[rows], truth[rows])
        for rows in pieces
    ]
    assert same(program.combine_partials(TargetStep(state, 0, flow, targets), partials), expected)
    travelled = [pickle.loads(pickle.dumps(p)) for p in reversed(partials)]
    assert same(program.combine_partials(TargetStep(state, 0, flow, targets), travelled), expected)


def test_kmeans_new_centroid_is_the_correctly_rounded_mean():
    program = kmeans_program(7)
    state = program.initial_state()
    flow = program.flow_name(1)
    points = program.source_rows()
    truth = program.route(state, flow, points)
    outputs = target_outputs(program, TargetStep(state, 0, flow, range(5)), points, truth)
    for target, centroid in outputs.items():
        members = points[truth == target].astype(np.float64)
        if not len(members):
            assert centroid.tobytes() == state.centroids[target].tobytes()
            continue
        exact = [
            float(sum((Fraction(v) for v in members[:, d].tolist()), Fraction(0)) / len(members))
            for d in range(members.shape[1])
        ]
        assert centroid.tobytes() == as_float32_values(np.array(exact)).tobytes()


def test_kmeans_target_without_points_keeps_its_centroid():
    program = kmeans_program(1)
    state = program.initial_state()
    flow = program.flow_name(1)
    points = program.source_rows()[:10]
    truth = np.zeros(10, dtype=np.int64)  # every point to node 0
    expected = target_outputs(program, TargetStep(state, 0, flow, range(5)), points, truth)
    for target in range(1, 5):
        assert expected[target].tobytes() == state.centroids[target].tobytes()
    assert same(
        program.combine_partials(TargetStep(state, 0, flow, [3]), []), {3: state.centroids[3]}
    )
    partials = [
        program.target_partials(TargetStep(state, 0, flow, [0, 2]), points[:4], truth[:4]),
        program.target_partials(TargetStep(state, 0, flow, [0, 2]), points[4:], truth[4:]),
    ]
    combined = program.combine_partials(TargetStep(state, 0, flow, [0, 2]), partials)
    assert same(combined, {0: expected[0], 2: expected[2]})
