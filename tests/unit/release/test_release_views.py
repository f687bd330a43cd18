"""Which joint view sets a release's sensitivity: the countermeasure and the keys' nodes."""

from __future__ import annotations

import datetime
import math

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import assign_compute_nodes
from dpcomm.release.noise import noisy_program

TABLE = table_from_arrays(
    "t",
    {
        "city": np.array(["é", "b c", "🙂", "", "b c"] * 8, dtype=object),
        "day": np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"] * 10,
                        dtype="datetime64[D]"),
        "n": np.arange(40) % 4,
        "v": np.linspace(-1.0, 1.0, 40),
    },
)  # fmt: skip

SAMPLING = dpcomm.Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=5)
FLOODING = dpcomm.LocalFlooding(sampling_rate=0.2, num_dummies=3)


def bound(sql: str, countermeasure: object, **options: object) -> AggregateProgram:
    return noisy_program(
        sql, TABLE, num_targets=options.pop("num_targets", 20),  # type: ignore[arg-type]
        release=dpcomm.Laplace(1.0), countermeasure=countermeasure, **options,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("countermeasure", "view", "sum_l1"),
    [
        # [-1, 1]: M = 1, W = 2. Each tuple independent: 2M; scramblers with sampling: M + W.
        (FLOODING, "own-row", 2.0),
        (dpcomm.NoCountermeasure(), "own-row", 2.0),
        (dpcomm.Scramblers(sampling_rate=0.0, batch_size=10, num_dummies=5), "own-row", 2.0),
        (dpcomm.Scramblers(sampling_rate=0.2, batch_size=10, capped=True), "own-row", 2.0),
        (SAMPLING, "one-other", 3.0),
        (None, "one-other", 3.0),  # bound before the countermeasure is known: any of them
    ],
)
def test_the_view_follows_the_countermeasure(countermeasure, view, sum_l1):
    # Two keys on T = 20 nodes: the domain's nodes are checked to differ (below), so one key
    # per node.
    keys = {"n": [0, 1]}
    nodes = [assign_compute_nodes(TABLE, ["n"], num_targets=20)[i] for i in (0, 1)]
    assert nodes[0] != nodes[1]
    program = bound(
        "SELECT n, COUNT(*) AS c, SUM(v) AS s FROM t GROUP BY n", countermeasure,
        keys=keys, bounds={"v": (-1.0, 1.0)},
    )  # fmt: skip
    release = program.release
    assert release is not None and release.views == (view,)
    count, total = release.noises
    assert count.sensitivity.l1 == 2.0  # COUNT: 2 in every view with one key per node
    assert total.sensitivity.l1 == sum_l1
    assert total.sensitivity.l2 == pytest.approx(2.0 if view == "own-row" else math.sqrt(5.0))


def test_keys_on_one_node_take_a_third_cell():
    # T = 2 and three keys: two share a node (pigeonhole); COUNT 3, SUM 3M.
    program = bound(
        "SELECT n, COUNT(*) AS c, SUM(v) AS s FROM t GROUP BY n", SAMPLING, num_targets=2,
        keys={"n": [0, 1, 2]}, bounds={"v": (-1.0, 1.0)},
    )  # fmt: skip
    release = program.release
    assert release is not None and release.views == ("one-other-shared-node",)
    assert [n.sensitivity.l1 for n in release.noises] == [3.0, 3.0]


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("city", ["é", "b c", "🙂", ""]),
        ("n", [0, 1, 2, 3]),
        ("day", [datetime.date(2024, 1, d) for d in (1, 2, 3, 4)]),
        ("day", ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]),
    ],
)
@pytest.mark.parametrize("targets", [3, 7, 20])
def test_shared_nodes_are_found_as_the_sources_hash_their_keys(column, values, targets):
    nodes = assign_compute_nodes(TABLE, [column], num_targets=targets)
    keys = np.asarray(TABLE.column(column).values.tolist(), dtype=object)
    owners = {str(k): int(node) for k, node in zip(keys, nodes, strict=True)}
    shared = len(set(owners.values())) < len(owners)
    program = bound(
        f"SELECT {column}, COUNT(*) AS c FROM t GROUP BY {column}", SAMPLING,
        num_targets=targets, keys={column: values},
    )  # fmt: skip
    release = program.release
    assert release is not None
    assert release.views == ("one-other-shared-node" if shared else "one-other",)


def test_a_release_bound_for_independent_tuples_is_refused_on_scramblers_with_sampling():
    program = bound("SELECT n, COUNT(*) AS c FROM t GROUP BY n", FLOODING, keys={"n": [0, 1]})
    from dpcomm.plan.privacy import account_plan
    from dpcomm.release.compose import compose_release

    release = program.release
    assert release is not None
    compose_release(account_plan(program.plan, FLOODING, delta=1e-4), release.noises)
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        compose_release(account_plan(program.plan, SAMPLING, delta=1e-4), release.noises)


def test_the_view_travels_in_the_spec():
    program = bound("SELECT n, COUNT(*) AS c FROM t GROUP BY n", FLOODING, keys={"n": [0, 1]})
    again = AggregateProgram.from_spec(program.to_spec())
    assert again.release == program.release


def test_minus_zero_is_zero_for_its_node_and_its_view():
    # round(-0.3) is -0.0 in DuckDB: one group with 0.0, so one node; a domain {0.0, ...}
    # must be hashed as the rows that hold -0.0 are.
    from dpcomm.queries.groupby import node_of_key

    assert all(node_of_key((-0.0,), t) == node_of_key((0.0,), t) for t in (2, 3, 5, 20))
    rows = table_from_arrays("t", {"z": np.array([-0.3, 0.2, 1.4, -0.2] * 10)})
    program = noisy_program(
        "SELECT round(z) AS r, COUNT(*) AS c FROM t GROUP BY round(z)", rows, num_targets=3,
        release=dpcomm.Laplace(1.0), keys={"r": [0.0, 1.0]}, countermeasure=SAMPLING,
    )  # fmt: skip
    column = program.query.grouping_sets[0][0]
    derived = program.table.column(column).values.tolist()
    nodes = assign_compute_nodes(program.table, [column], num_targets=3)
    assert len({int(n) for k, n in zip(derived, nodes, strict=True) if k == 0.0}) == 1
    owners = {float(k): int(n) for k, n in zip(derived, nodes, strict=True)}
    release = program.release
    assert release is not None
    shared = owners[0.0] == owners[1.0]
    assert release.views == ("one-other-shared-node" if shared else "one-other",)


def test_a_pandas_timestamp_domain_is_taken_as_sharing_a_node():
    # A subclass of datetime (pandas' Timestamp) is not what a source holds: its node is not
    # certain, so the release assumes two keys on one node.
    pd = pytest.importorskip("pandas")
    rows = table_from_arrays(
        "t",
        {"ts": np.array(["2024-01-01T00:00", "2024-01-06T00:00"] * 10, dtype="datetime64[us]")},
    )
    program = noisy_program(
        "SELECT ts, COUNT(*) AS c FROM t GROUP BY ts", rows, num_targets=20,
        release=dpcomm.Laplace(1.0), countermeasure=SAMPLING,
        keys={"ts": list(pd.to_datetime(["2024-01-01", "2024-01-06"]))},
    )  # fmt: skip
    release = program.release
    assert release is not None and release.views == ("one-other-shared-node",)


def test_every_engine_path_refuses_a_release_bound_for_other_traffic(tmp_path):
    from dpcomm.engine.memory import simulate
    from dpcomm.engine.network.deploy import write_deployment

    program = bound("SELECT n, COUNT(*) AS c FROM t GROUP BY n", FLOODING, keys={"n": [0, 1]})
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        simulate(program, SAMPLING, delta=1e-4, seed=1)
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        write_deployment(program, SAMPLING, tmp_path)
    simulate(program, FLOODING, delta=1e-4, seed=1)  # the countermeasure it was bound for
