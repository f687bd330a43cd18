"""The compute nodes' numpy computation against DuckDB on random tables, queries and masks."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.conftest import canonical_rows, without_grouping_set

from dpcomm.data.table import Column, Table, decimal_of, table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.groupby import (
    assign_compute_nodes,
    compare_results,
    evaluate,
    evaluate_grouping_set,
    group_ids,
    grouping_set_sql,
    partition_keys,
    reference_result,
)
from dpcomm.queries.sql import BoundAggregate, bind_sql, scratch_connection

GROUP_COLUMNS = ("g1", "g2", "g3", "flag")
NUMERIC_COLUMNS = ("x", "y", "d", "g1")
STRINGS = np.array(["a", "b", "B", "é", ""], dtype=object)


def decimals(units: np.ndarray) -> np.ndarray:
    """DECIMAL(·,2) values of ``units`` hundredths, as the table holds them."""
    values = np.empty(len(units), dtype=object)
    values[:] = [decimal_of(int(u), 2) for u in units]
    return values


def random_table(seed: int, num_rows: int, null_rate: float) -> Table:
    rng = np.random.default_rng(seed)

    def nulls() -> np.ndarray:
        return rng.random(num_rows) < null_rate

    def filled(values: np.ndarray, mask: np.ndarray, filler: Any) -> np.ndarray:
        values = values.copy()
        values[mask] = filler
        return values

    columns = []
    for name, sql_type, values, filler in [
        ("g1", "BIGINT", rng.integers(-3, 4, num_rows), 0),
        ("g2", "VARCHAR", STRINGS[rng.integers(0, len(STRINGS), num_rows)], ""),
        ("g3", "INTEGER", rng.integers(0, 2, num_rows) * 1000, 0),
        ("flag", "BOOLEAN", rng.random(num_rows) < 0.5, False),
        ("x", "DOUBLE", rng.integers(-200, 201, num_rows) / 4.0, 0.0),
        ("d", "DECIMAL(9,2)", decimals(rng.integers(-4000, 4001, num_rows) * 25), Decimal(0)),
    ]:
        mask = nulls()
        columns.append(Column(name, sql_type, filled(values, mask, filler), mask))
    # BIGINT values near 2**62 make int64 sums overflow: the exact fallback must kick in.
    huge = rng.random(num_rows) < 0.2
    y = np.where(huge, rng.integers(2**61, 2**62, num_rows), rng.integers(-50, 51, num_rows))
    y = np.where(rng.random(num_rows) < 0.5, y, -y)
    y_null = nulls()
    columns.append(Column("y", "BIGINT", np.where(y_null, 0, y).astype(np.int64), y_null))
    return Table("data", tuple(columns))


@st.composite
def group_by_clauses(draw: st.DrawFn) -> str:
    def names(min_size: int, max_size: int) -> list[str]:
        return draw(st.lists(st.sampled_from(GROUP_COLUMNS), min_size=min_size, max_size=max_size))

    elements = []
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["column", "sets", "rollup", "cube", "empty"]))
        if kind == "column":
            elements.append(names(1, 1)[0])
        elif kind == "empty":
            elements.append("()")
        elif kind == "rollup":
            elements.append(f"ROLLUP ({', '.join(names(1, 2))})")
        elif kind == "cube":
            elements.append(f"CUBE ({', '.join(names(1, 2))})")
        else:
            sets = [f"({', '.join(names(0, 3))})" for _ in range(draw(st.integers(1, 3)))]
            elements.append(f"GROUPING SETS ({', '.join(sets)})")
    return ", ".join(elements)


@st.composite
def queries(draw: st.DrawFn) -> str:
    group_by = draw(group_by_clauses())
    used = [c for c in GROUP_COLUMNS if c in group_by]
    selected = draw(st.lists(st.sampled_from(used), unique=True)) if used else []
    specs = draw(
        st.lists(
            st.one_of(
                st.just(("count", "*")),
                st.tuples(st.just("count"), st.sampled_from((*NUMERIC_COLUMNS, "g2", "flag"))),
                st.tuples(
                    st.sampled_from(["sum", "avg", "min", "max"]), st.sampled_from(NUMERIC_COLUMNS)
                ),
            ),
            min_size=0 if selected else 1,
            max_size=4,
            unique=True,
        )
    )
    items = list(selected)
    for index, (function, column) in enumerate(specs):
        spelled = function.upper() if index % 2 else function
        alias = f" AS agg{index}" if draw(st.booleans()) else ""
        items.append(f"{spelled}({column}){alias}")
    draw(st.randoms()).shuffle(items)
    return f"SELECT {', '.join(items)} FROM data GROUP BY {group_by}"


def raw_duckdb(bound: BoundAggregate, table: Table) -> list[dict[str, object]]:
    with scratch_connection() as connection:
        table.register(connection, bound.table_name)
        rows = connection.execute(bound.sql).fetchall()
    return [dict(zip(bound.output_names, row, strict=True)) for row in rows]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sql=queries(),
    seed=st.integers(0, 2**32 - 1),
    num_rows=st.integers(0, 300),
    null_rate=st.sampled_from([0.0, 0.1, 0.5]),
    keep_rate=st.sampled_from([0.0, 0.3, 0.9, 1.0]),
)
def test_evaluate_matches_duckdb(
    sql: str, seed: int, num_rows: int, null_rate: float, keep_rate: float
) -> None:
    table = random_table(seed, num_rows, null_rate)
    bound = bind_sql(sql, table)
    rng = np.random.default_rng(seed + 1)
    masks = [rng.random(num_rows) < keep_rate for _ in range(bound.num_grouping_sets)]
    assert (
        compare_results(evaluate(bound, table, masks), reference_result(bound, table, masks)) == []
    )
    everything = [np.ones(num_rows, dtype=bool)] * bound.num_grouping_sets
    full = without_grouping_set(evaluate(bound, table, everything))
    raw = raw_duckdb(bound, table)
    assert compare_results(canonical_rows(full), canonical_rows(raw)) == []
    assert (
        compare_results(
            canonical_rows(without_grouping_set(reference_result(bound, table, everything))),
            canonical_rows(raw),
        )
        == []
    )


@pytest.fixture
def table() -> Table:
    return Table(
        "D",
        (
            Column("A", "BIGINT", np.array([1, 2, 1, 0, 5]), np.array([0, 0, 0, 1, 0], bool)),
            Column(
                "B",
                "VARCHAR",
                np.array(["x", "y", "", "x", "y"], dtype=object),
                np.array([0, 0, 1, 0, 0], bool),
            ),
            Column(
                "I", "DOUBLE", np.array([1.5, 2.0, 0.0, 4.0, 1.0]), np.array([0, 0, 1, 0, 0], bool)
            ),
        ),
    )


def test_running_example(table: Table) -> None:
    bound = bind_sql("SELECT A, B, AVG(I) FROM D GROUP BY GROUPING SETS ((A), (B))", table)
    everything = np.ones(5, dtype=bool)
    rows = evaluate(bound, table, [everything, everything])
    assert rows == [
        {"A": 1, "B": None, "avg(I)": 1.5, "grouping_set": "(A)"},
        {"A": 2, "B": None, "avg(I)": 2.0, "grouping_set": "(A)"},
        {"A": 5, "B": None, "avg(I)": 1.0, "grouping_set": "(A)"},
        {"A": None, "B": None, "avg(I)": 4.0, "grouping_set": "(A)"},
        {"A": None, "B": "x", "avg(I)": 2.75, "grouping_set": "(B)"},
        {"A": None, "B": "y", "avg(I)": 1.5, "grouping_set": "(B)"},
        {"A": None, "B": None, "avg(I)": None, "grouping_set": "(B)"},
    ]


def test_evaluate_grouping_set_over_a_subset(table: Table) -> None:
    bound = bind_sql("SELECT B, count(*), count(I) AS n, min(I) FROM D GROUP BY B", table)
    rows = evaluate_grouping_set(bound, table, 0, np.array([1, 0, 1, 0, 0], bool))
    assert rows == [
        {"B": "x", "count_star()": 1, "n": 1, "min(I)": 1.5},
        {"B": None, "count_star()": 1, "n": 0, "min(I)": None},
    ]
    assert evaluate_grouping_set(bound, table, 0, np.zeros(5, bool)) == []


def test_empty_grouping_set_over_no_rows_gives_one_row(table: Table) -> None:
    bound = bind_sql("SELECT A, count(*), sum(I) FROM D GROUP BY ROLLUP (A)", table)
    nothing = [np.zeros(5, dtype=bool)] * 2
    expected = [{"A": None, "count_star()": 0, "sum(I)": None, "grouping_set": "()"}]
    assert evaluate(bound, table, nothing) == expected
    assert reference_result(bound, table, nothing) == expected


def test_all_true_reference_equals_raw_sql(table: Table) -> None:
    bound = bind_sql("SELECT B, A, max(I), count(*) AS n FROM D GROUP BY CUBE (A, B)", table)
    everything = [np.ones(5, dtype=bool)] * bound.num_grouping_sets
    raw = raw_duckdb(bound, table)
    assert (
        compare_results(
            canonical_rows(without_grouping_set(reference_result(bound, table, everything))),
            canonical_rows(raw),
        )
        == []
    )
    full = without_grouping_set(evaluate(bound, table, everything))
    assert compare_results(canonical_rows(full), canonical_rows(raw)) == []


def test_integer_sums_are_exact_beyond_int64() -> None:
    big = 2**62
    table = table_from_arrays("T", {"k": np.array([1, 1, 1, 2]), "v": np.array([big, big, big, 3])})
    bound = bind_sql("SELECT k, sum(v), avg(v), min(v), max(v) FROM T GROUP BY k", table)
    rows = evaluate(bound, table, [np.ones(4, dtype=bool)])
    assert rows[0]["sum(v)"] == 3 * big
    assert isinstance(rows[0]["sum(v)"], int)
    assert rows[0]["avg(v)"] == float(big)
    assert rows[1] == {"k": 2, "sum(v)": 3, "avg(v)": 3.0, "min(v)": 3, "max(v)": 3}
    assert compare_results(rows, reference_result(bound, table, [np.ones(4, dtype=bool)])) == []


def test_grouping_set_sql_fills_nulls_with_duckdb(table: Table) -> None:
    bound = bind_sql("SELECT A, B, count(*) FROM D GROUP BY GROUPING SETS ((A), (A, B))", table)
    sql = grouping_set_sql(bound, 0)
    assert "GROUPING SETS" in sql
    assert "HAVING" in sql
    assert "ORDER BY" in sql
    assert "HAVING" not in grouping_set_sql(bound, 1)


def test_grouping_set_sql_is_rewritten_once_per_query_and_set(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlglot

    from dpcomm.queries import groupby

    parsed: list[str] = []
    parse_one = sqlglot.parse_one

    def counted(sql: str, **kwargs: Any) -> Any:
        parsed.append(sql)
        return parse_one(sql, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", counted)
    groupby._grouping_set_sql.cache_clear()
    bound = bind_sql("SELECT A, count(*) AS n FROM D GROUP BY GROUPING SETS ((A), ())", table)
    first = [grouping_set_sql(bound, index) for index in (0, 1)]
    assert [grouping_set_sql(bound, index) for index in (0, 1)] == first
    assert len(parsed) == 2
    # Another output name is another query: rewritten, under its own name.
    renamed = bind_sql("SELECT A, count(*) AS m FROM D GROUP BY GROUPING SETS ((A), ())", table)
    assert grouping_set_sql(renamed, 0) == first[0].replace('"n"', '"m"')
    assert len(parsed) == 3


def test_masks_are_validated(table: Table) -> None:
    bound = bind_sql("SELECT A, count(*) FROM D GROUP BY GROUPING SETS ((A), ())", table)
    with pytest.raises(InvalidParameterError, match="one mask per grouping set"):
        evaluate(bound, table, [np.ones(5, dtype=bool)])
    with pytest.raises(InvalidParameterError, match="boolean mask"):
        evaluate(bound, table, [np.ones(5, dtype=int)] * 2)
    with pytest.raises(InvalidParameterError, match="boolean mask"):
        evaluate(bound, table, [np.ones(4, dtype=bool)] * 2)
    with pytest.raises(InvalidParameterError, match="set_index"):
        evaluate_grouping_set(bound, table, 2, np.ones(5, dtype=bool))
    other = table_from_arrays("D", {"A": np.array(["u"] * 5, dtype=object)})
    with pytest.raises(InvalidParameterError, match="schema"):
        evaluate(bound, other, [np.ones(5, dtype=bool)] * 2)


def test_group_ids_factorizes_with_nulls_last(table: Table) -> None:
    ids, keys = group_ids(table, ["B", "A"], np.ones(5, dtype=bool))
    assert ids.tolist() == [0, 2, 4, 1, 3]
    assert keys.column_names == ("B", "A")
    b, a = keys.columns
    assert [None if n else v for v, n in zip(b.values, b.is_null, strict=True)] == [
        "x",
        "x",
        "y",
        "y",
        None,
    ]
    assert [None if n else v for v, n in zip(a.values, a.is_null, strict=True)] == [
        1,
        None,
        2,
        5,
        1,
    ]
    ids, keys = group_ids(table, ["A"], np.array([0, 1, 0, 1, 1], bool))
    assert ids.tolist() == [0, 2, 1]
    ids, keys = group_ids(table, [], np.ones(5, dtype=bool))
    assert ids.tolist() == [0] * 5
    assert keys.columns == ()


def test_group_ids_with_wide_integer_range() -> None:
    values = np.array([10**15, -(10**15), 7, 10**15, 7])
    table = table_from_arrays("T", {"k": values, "j": np.array([1, 1, 1, 1, 2])})
    ids, keys = group_ids(table, ["k", "j"], np.ones(5, dtype=bool))
    assert ids.tolist() == [3, 0, 1, 3, 2]
    assert keys.column("k").values.tolist() == [-(10**15), 7, 7, 10**15]
    assert keys.column("j").values.tolist() == [1, 1, 2, 1]


def test_partition_keys_is_deterministic_and_data_independent(table: Table) -> None:
    _, keys = group_ids(table, ["B", "A"], np.ones(5, dtype=bool))
    nodes = partition_keys(keys, 3)
    assert nodes.dtype == np.int64
    assert len(nodes) == keys.num_rows
    assert ((nodes >= 0) & (nodes < 3)).all()
    # The node of a key does not depend on which other keys (rows) are present.
    _, fewer = group_ids(table, ["B", "A"], np.array([1, 0, 0, 0, 1], bool))
    alone = dict(zip(map(tuple, _key_rows(keys)), nodes.tolist(), strict=True))
    for row, node in zip(_key_rows(fewer), partition_keys(fewer, 3).tolist(), strict=True):
        assert alone[tuple(row)] == node
    # NULL is a key of its own, distinct from the filler value.
    null_key = Table("K", (Column("A", "BIGINT", np.array([0, 0]), np.array([True, False])),))
    many = [partition_keys(null_key, c).tolist() for c in range(2, 40)]
    assert any(pair[0] != pair[1] for pair in many)
    assert partition_keys(Table("K", ()), 7).tolist() == [0]
    per_row = assign_compute_nodes(table, ["B", "A"], num_targets=3)
    ids, _ = group_ids(table, ["B", "A"], np.ones(5, dtype=bool))
    assert per_row.tolist() == nodes[ids].tolist()
    assert assign_compute_nodes(table, [], num_targets=3).tolist() == [0] * 5
    with pytest.raises(InvalidParameterError):
        partition_keys(keys, 0)


def test_partition_keys_spreads_keys() -> None:
    values = np.arange(1000)
    table = table_from_arrays("T", {"k": values})
    _, keys = group_ids(table, ["k"], np.ones(1000, dtype=bool))
    counts = np.bincount(partition_keys(keys, 4), minlength=4)
    assert counts.min() > 200


def _key_rows(keys: Table) -> list[list[object]]:
    columns = [
        [None if n else v for v, n in zip(c.values.tolist(), c.is_null, strict=True)]
        for c in keys.columns
    ]
    return [list(row) for row in zip(*columns, strict=True)]


def test_compare_results() -> None:
    assert compare_results([{"a": 1, "b": 0.1 + 0.2}], [{"a": 1, "b": 0.3}]) == []
    assert compare_results([{"a": None}], [{"a": None}]) == []
    assert compare_results([{"a": 1.5}], [{"a": Decimal("1.50")}]) == []
    assert compare_results([{"a": 3}], [{"a": Decimal("3")}]) == []
    assert compare_results([{"a": float("nan")}], [{"a": float("nan")}]) == []
    assert compare_results([{"a": 2**63 + 1}], [{"a": 2**63}]) != []
    assert compare_results([{"a": None}], [{"a": 0}]) != []
    assert compare_results([{"a": True}], [{"a": 1}]) != []
    assert compare_results([{"a": "x"}], [{"a": "y"}]) != []
    assert compare_results([{"a": 1.0}], [{"a": 1.001}]) != []
    assert compare_results([{"a": 1.0}], [{"a": 1.001}], rel_tol=0.01) == []
    assert compare_results([{"a": 1}], [{"b": 1}]) != []
    assert len(compare_results([{"a": 1}], [])) == 1
    with pytest.raises(InvalidParameterError):
        compare_results([], [], rel_tol=-1.0)
