"""Decentralized Aggregate runs against DuckDB, for random queries, data and countermeasures."""

import warnings

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.conftest import canonical_rows, without_grouping_set

from dpcomm.data import Column, Table, diabetes_table
from dpcomm.engine import simulate
from dpcomm.errors import DpcommWarning, InvalidParameterError
from dpcomm.pipeline.runs import run_aggregate
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers, batch_size_counts
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, reference_result

GROUP_COLUMNS = ("a", "b", "c")
MEASURES = ("x", "y")
AGGREGATES = ("COUNT(*)", "COUNT({m})", "SUM({m})", "AVG({m})", "MIN({m})", "MAX({m})")


@st.composite
def tables(draw):
    rows = draw(st.integers(min_value=1, max_value=200))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    rng = np.random.default_rng(seed)
    null_rate = draw(st.sampled_from([0.0, 0.1, 0.5]))

    def nulls():
        return rng.random(rows) < null_rate

    columns = (
        Column("a", "BIGINT", rng.integers(0, draw(st.integers(1, 30)), rows), nulls()),
        Column(
            "b",
            "VARCHAR",
            np.array(rng.choice(["x", "y", "zz", "w"], rows), dtype=object),
            nulls(),
        ),
        Column("c", "BIGINT", rng.integers(-3, 3, rows), nulls()),
        Column("x", "DOUBLE", rng.normal(size=rows) * 100, nulls()),
        Column("y", "BIGINT", rng.integers(-1000, 1000, rows), nulls()),
    )
    fixed = []
    for column in columns:
        values = column.values.copy()
        values[column.is_null] = "" if values.dtype == object else 0
        fixed.append(Column(column.name, column.sql_type, values, column.is_null))
    return Table("t", tuple(fixed))


@st.composite
def queries(draw):
    used = draw(st.lists(st.sampled_from(GROUP_COLUMNS), min_size=1, max_size=3, unique=True))
    shape = draw(st.sampled_from(["plain", "sets", "rollup", "cube"]))
    selected = list(used)
    if shape == "plain":
        group = ", ".join(used)
    elif shape == "rollup":
        group = f"ROLLUP ({', '.join(used)})"
    elif shape == "cube":
        group = f"CUBE ({', '.join(used)})"
    else:
        subsets = draw(
            st.lists(
                st.lists(st.sampled_from(used), max_size=len(used), unique=True),
                min_size=1,
                max_size=3,
            )
        )
        group = "GROUPING SETS (" + ", ".join(f"({', '.join(s)})" for s in subsets) + ")"
        selected = [c for c in used if any(c in s for s in subsets)]
    templates = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4))
    aggregates = []
    for index, template in enumerate(templates):
        text = template.format(m=draw(st.sampled_from(MEASURES)))
        repeated = any(a.split(" AS ")[0] == text for a in aggregates)
        if repeated or draw(st.booleans()):
            text += f" AS v{index}"
        aggregates.append(text)
    return f"SELECT {', '.join([*selected, *aggregates])} FROM t GROUP BY {group}"


countermeasures = st.one_of(
    st.just(NoCountermeasure()),
    st.builds(
        LocalFlooding,
        sampling_rate=st.sampled_from([0.0, 0.3, 0.9, 1.0]),
        num_dummies=st.integers(0, 2),
    ),
    st.builds(
        Scramblers,
        sampling_rate=st.sampled_from([0.0, 0.2, 0.7]),
        batch_size=st.integers(1, 60),
        num_dummies=st.integers(0, 20),
        capped=st.booleans(),
    ),
)


def duckdb_rows(table, sql):
    connection = duckdb.connect()
    table.register(connection, "t")
    relation = connection.sql(sql)
    names = relation.columns
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), sql=queries(), countermeasure=countermeasures, seed=st.integers(0, 99))
def test_decentralized_result_equals_duckdb_over_the_delivered_tuples(
    table, sql, countermeasure, seed
):
    program = AggregateProgram.from_sql(sql, table, num_targets=3)
    if isinstance(countermeasure, Scramblers) and countermeasure.capped:
        smallest = min(batch_size_counts(table.num_rows, countermeasure.batch_size))
        if countermeasure.num_dummies > 2 * smallest and any(program.query.grouping_sets):
            with pytest.raises(InvalidParameterError, match="num_dummies"):
                simulate(program, countermeasure, delta=1e-4, seed=seed)
            return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DpcommWarning)
        run = simulate(program, countermeasure, delta=1e-4, seed=seed)
    masks = [run.delivered[flow] for flow in program.flow_names]
    result = run.result
    assert compare_results(result, reference_result(program.query, program.table, masks)) == []
    if isinstance(countermeasure, NoCountermeasure) or countermeasure.sampling_rate == 0.0:
        assert all(mask.all() for mask in masks)
        direct = duckdb_rows(table, sql)
        got = canonical_rows(without_grouping_set(result))
        assert compare_results(got, canonical_rows(direct)) == []


def test_running_example_matches_duckdb_on_the_whole_table_without_sampling():
    table = diabetes_table()
    sql = "SELECT A, B, AVG(I) FROM diabetes GROUP BY GROUPING SETS ((A), (B))"
    program = AggregateProgram.from_sql(sql, table)
    outcome = run_aggregate(
        program, Scramblers(sampling_rate=0.0, batch_size=100, num_dummies=50), delta=1e-4
    )
    assert outcome.report.utility.tuples_used == {"(A)": table.num_rows, "(B)": table.num_rows}
    direct = duckdb_rows(table.renamed("t"), sql.replace("diabetes", "t"))
    got = canonical_rows(without_grouping_set(outcome.rows))
    assert compare_results(got, canonical_rows(direct)) == []
    for value in outcome.report.utility.mean_relative_error.values():
        assert value == 0.0


def test_a_result_that_is_not_of_the_delivered_tuples_is_flagged():
    """An engine computing the result elsewhere is checked: a lost output does not pass."""
    import dataclasses

    from dpcomm.pipeline.runs import aggregate_run

    program = AggregateProgram.from_sql(
        "SELECT A, COUNT(*) FROM diabetes GROUP BY A", diabetes_table(), num_targets=4
    )
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=5)
    run = simulate(program, countermeasure, delta=1e-4, seed=1)
    baseline = simulate(program, NoCountermeasure(), delta=None, seed=1)
    elsewhere = dataclasses.replace(run, result_computed_here=False)  # as a deployment's
    outcome = aggregate_run(program, elsewhere, baseline)
    assert outcome.report.utility.result_is_of_delivered_tuples is True
    lost = dataclasses.replace(elsewhere, result=run.result[1:])
    with pytest.warns(DpcommWarning, match="differs from the result of the tuples"):
        outcome = aggregate_run(program, lost, baseline)
    assert outcome.report.utility.result_is_of_delivered_tuples is False
    assert outcome.to_dict()["report"]["utility"]["result_is_of_delivered_tuples"] is False
