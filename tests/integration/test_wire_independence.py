"""What the observer of the wire sees on neighbouring tables, and in unseeded rounds.

Neighbouring tables differ in one row, moved to a group of its own. With the same seed, every
link of a flow the report calls data-independent (sources → scramblers, compute → result, and
the control links) must carry the same number of frames in both rounds: before outputs were
padded to a public size, a compute → result link went from 2 to 3 frames. Frames per link are
what the nodes count; ``test_capture_round.py`` checks on a packet capture that those counts
are what crosses the wire.

Without a seed, nobody can predict the traffic: two unseeded rounds of the same table differ,
and neither is the round any seed an observer might try (the old default 0 included).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpcomm.data import synthetic_table
from dpcomm.data.table import Column, Table
from dpcomm.engine.engines import MemoryEngine
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.protocol import roles
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT g1, COUNT(*), SUM(m1), AVG(m1) FROM t GROUP BY g1"
COUNTERMEASURES = {
    "none": NoCountermeasure(),
    "local": LocalFlooding(sampling_rate=0.2, num_dummies=2),
    "scramblers": Scramblers(sampling_rate=0.2, batch_size=20, num_dummies=3),
}


def _neighbours(row: int = 0) -> tuple[Table, Table]:
    table = synthetic_table(num_rows=60, seed=3)
    column = table.column("g1")
    moved = column.values.copy()
    moved[row] = int(moved.max()) + 17  # a group of its own, at some compute node
    changed = Column(column.name, column.sql_type, moved, column.is_null)
    columns = tuple(changed if c.name == "g1" else c for c in table.columns)
    return table, Table(table.name, columns)


def _frames(run: Any) -> dict[tuple[str, str], int]:
    return {(link.sender, link.receiver): link.frames for link in run.details.wire.links}


def _data_dependent(sender: str, receiver: str) -> bool:
    """Links of the data-dependent flows (whose ε the report gives), and their replies."""
    ends = {sender.split("-")[0], receiver.split("-")[0]}
    return "compute" in ends and bool(ends & {"source", "scrambler"})


@pytest.mark.parametrize("name", sorted(COUNTERMEASURES))
def test_data_independent_links_carry_the_same_frames_on_neighbouring_tables(name):
    engine = NetworkEngine(transport="memory", timeout=60, idle_seconds=5)

    def run(table: Table) -> Any:
        program = AggregateProgram.from_sql(SQL, table, num_targets=3)
        return engine.execute(program, COUNTERMEASURES[name], delta=1e-4, seed=11)

    table, _ = _neighbours()
    # Move a row whose tuple is delivered (same seed, same draws) out of a group it shares.
    delivered = next(iter(run(table).delivered.values()))
    groups = table.column("g1").values
    row = next(i for i in range(len(groups)) if delivered[i] and (groups == groups[i]).sum() > 1)
    runs = [run(t) for t in _neighbours(row)]
    first, second = (_frames(run) for run in runs)
    assert len(runs[1].result) == len(runs[0].result) + 1  # the moved row is a new group
    independent = [link for link in first if not _data_dependent(*link)]
    assert any(s.startswith("compute") and r == "result" for s, r in independent)
    for link in independent:
        assert first[link] == second.get(link), link
    assert set(independent) == {link for link in second if not _data_dependent(*link)}


def test_outputs_have_one_size_whatever_the_groups():
    table, neighbour = _neighbours()
    program = AggregateProgram.from_sql(SQL, table, num_targets=3)
    other = AggregateProgram.from_sql(SQL, neighbour, num_targets=3)
    flow = program.flow_names[0]
    run = MemoryEngine().execute(program, NoCountermeasure(), delta=1e-4, seed=1)
    sizes = {len(program.codec.outputs(flow).encode(output)) for output in _outputs(program, run)}
    run = MemoryEngine().execute(other, NoCountermeasure(), delta=1e-4, seed=1)
    sizes |= {len(other.codec.outputs(flow).encode(output)) for output in _outputs(other, run)}
    assert sizes == {program.codec.outputs(flow).size}


def _outputs(program: AggregateProgram, run: Any) -> list[Any]:
    flow = program.flow_names[0]
    rows = program.source_rows()
    truth = program.route(program.initial_state(), flow, rows)
    tuples = program.carried(flow, rows)
    produced = roles.target_outputs(
        program,
        roles.TargetStep(program.initial_state(), 0, flow, range(program.num_targets)),
        tuples,
        truth,
    )
    del run
    return list(produced.values())


def test_an_unseeded_round_is_not_predictable_from_public_parameters():
    table = synthetic_table(num_rows=400, seed=4)
    program = AggregateProgram.from_sql(SQL, table, num_targets=5)
    countermeasure = Scramblers(sampling_rate=0.3, batch_size=40, num_dummies=4)
    engine = MemoryEngine()

    def observed(seed: int | None) -> list[tuple[bytes, bytes, bytes]]:
        """What the observer sees: every edge of every routed flow and its message count."""
        run = engine.execute(program, countermeasure, delta=1e-4, seed=seed)
        return [
            (f.senders.tobytes(), f.receivers.tobytes(), f.counts.tobytes()) for f in run.traffic
        ]

    unseeded = [observed(None) for _ in range(3)]
    guesses = [observed(seed) for seed in range(5)]
    assert observed(0) == guesses[0]  # a seeded round is predictable by whoever knows its seed
    for index, run in enumerate(unseeded):
        for other in unseeded[index + 1 :] + guesses:
            assert run != other


def _text_table(name: str) -> Table:
    groups = np.array(["north", "south", "east", name] * 10, dtype=object)
    amounts = np.arange(40, dtype=np.int64)
    nulls = np.zeros(40, dtype=bool)
    return Table(
        "t",
        (Column("region", "VARCHAR", groups, nulls), Column("amount", "BIGINT", amounts, nulls)),
    )


def test_the_frame_size_does_not_depend_on_the_longest_text_value():
    sql = "SELECT region, COUNT(*), MAX(amount) FROM t GROUP BY region"
    engine = NetworkEngine(transport="memory", timeout=60, idle_seconds=5)
    frame_sizes = set()
    for name in ("west", "a much longer region name, still within the bound"):
        program = AggregateProgram.from_sql(sql, _text_table(name), num_targets=2)
        run = engine.execute(program, NoCountermeasure(), delta=1e-4, seed=1)
        frame_sizes.add(run.details.wire.frame_size)
        assert {r["region"] for r in run.result} >= {"north", name}
    assert len(frame_sizes) == 1


def test_a_text_value_beyond_the_public_bound_is_refused_in_every_engine():
    sql = "SELECT region, COUNT(*) FROM t GROUP BY region"
    with pytest.raises(InvalidParameterError, match=r"column region.*max_text_bytes.*60 bytes"):
        AggregateProgram.from_sql(sql, _text_table("x" * 60), max_text_bytes=50)


def test_compute_nodes_open_the_tuple_only_never_the_sender(monkeypatch):
    """What a compute node decrypts is the encoded tuple: no row index, no sender id."""
    from dpcomm.engine.network import compute

    opened: list[bytes] = []
    original = compute.open_payload

    def spy(*args: Any, **kwargs: Any) -> bytes | None:
        content = original(*args, **kwargs)
        if content is not None:
            opened.append(content)
        return content

    monkeypatch.setattr(compute, "open_payload", spy)
    table = synthetic_table(num_rows=40, seed=8)
    program = AggregateProgram.from_sql(SQL, table, num_targets=3)
    engine = NetworkEngine(transport="memory", timeout=60, idle_seconds=5)
    engine.execute(program, COUNTERMEASURES["scramblers"], delta=1e-4, seed=3)
    flow = program.flow_names[0]
    tuples = program.codec.tuples(flow).encode(program.carried(flow, program.source_rows()))
    # Every plaintext is exactly some row's encoded tuple: were a row index or a sender id
    # in it, it would not be.
    assert opened and set(opened) <= set(tuples)
