"""Properties of the cost model (batches, messages, channels) and of the wire encodings."""

from __future__ import annotations

import datetime
import decimal
import math
import warnings
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.conftest import same

from dpcomm.data.table import Column, Table, decimal_of, exact_integers, table_from_arrays
from dpcomm.engine.memory import simulate
from dpcomm.errors import DpcommWarning
from dpcomm.plan.costs import balanced_batch_sizes, num_scramblers
from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.transform import transform
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.codec import ColumnSpec, TableCodec, dumps, loads

# --------------------------------------------------------------------------- balanced batches


@st.composite
def sources_and_batches(draw: st.DrawFn) -> tuple[int, int]:
    """S and n with at most 10^4 batches (the sizes are a tuple of ⌈S/n⌉ ints)."""
    num_sources = draw(st.one_of(st.integers(1, 300), st.integers(1, 10**12)))
    smallest = max(1, num_sources // 10**4)
    batch_size = draw(
        st.one_of(st.integers(smallest, smallest + 300), st.integers(smallest, 10**12))
    )
    return num_sources, batch_size


@settings(max_examples=300, deadline=None)
@given(case=sources_and_batches())
def test_balanced_batch_sizes(case):
    num_sources, batch_size = case
    sizes = balanced_batch_sizes(num_sources, batch_size)
    assert len(sizes) == -(-num_sources // batch_size) == num_scramblers(num_sources, batch_size)
    assert sum(sizes) == num_sources
    assert max(sizes) - min(sizes) <= 1
    assert max(sizes) <= batch_size
    assert min(sizes) >= 1
    assert list(sizes) == sorted(sizes, reverse=True)


# --------------------------------------------------------------------------- messages, channels

GROUP_BYS = (
    "a",
    "b",
    "()",
    "GROUPING SETS ((a), (b))",
    "GROUPING SETS ((a, b), ())",
    "ROLLUP (a, b)",
    "CUBE (a, b)",
)


@st.composite
def aggregate_cases(draw: st.DrawFn) -> tuple[AggregateProgram, Any]:
    rows = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    letters = np.array(["x", "y", "z", "é", ""], dtype=object)
    table = table_from_arrays(
        "t",
        {
            "a": rng.integers(0, draw(st.integers(1, 8)), rows),
            "b": letters[rng.integers(0, len(letters), rows)],
            "v": rng.normal(size=rows),
        },
    )
    compute = draw(st.integers(1, 6))
    sql = f"SELECT COUNT(*), SUM(v) FROM t GROUP BY {draw(st.sampled_from(GROUP_BYS))}"
    program = AggregateProgram.from_sql(sql, table, num_targets=compute)
    sigma = draw(st.sampled_from([0.0, 0.25, 1.0]))
    kind = draw(st.sampled_from(["none", "local", "scramblers"]))
    if kind == "none":
        countermeasure: Any = NoCountermeasure()
    elif kind == "local":
        countermeasure = LocalFlooding(
            sampling_rate=sigma, num_dummies=draw(st.integers(0, compute - 1))
        )
    else:
        batch = draw(st.integers(1, rows + 3))
        capped = draw(st.booleans())
        smallest = min(balanced_batch_sizes(rows, batch))
        limit = (compute - 1) * smallest if capped and compute > 1 else 6
        countermeasure = Scramblers(
            sampling_rate=sigma,
            batch_size=batch,
            num_dummies=draw(st.integers(0, min(limit, 6))),
            capped=capped,
        )
    return program, countermeasure


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=aggregate_cases(), seed=st.integers(0, 2**64))
def test_transform_counts_the_messages_simulate_sends_and_bounds_its_channels(case, seed):
    program, countermeasure = case
    transformed = transform(program.plan, countermeasure)
    with warnings.catch_warnings():
        # σ = 1 and short balanced batches are warned about; both are valid here.
        warnings.simplefilter("ignore", DpcommWarning)
        run = simulate(program, countermeasure, delta=1e-4, seed=seed)
    logged = {flow.flow: flow for flow in run.traffic}
    assert set(logged) == {flow.name for flow in transformed.flows}
    for flow in transformed.flows:
        assert logged[flow.name].messages == flow.messages, flow
        if flow.kind in ("direct", "fixed", "broadcast"):
            assert logged[flow.name].dummies == 0
        if flow.kind == "flood":
            assert logged[flow.name].dummies == flow.messages
    assert run.efficiency.messages == transformed.messages
    bound = transformed.channels_by_role()
    measured = run.efficiency.max_channels_by_role
    assert set(measured) <= set(bound)
    for role, channels in measured.items():
        assert channels <= bound[role], (role, measured, bound)


# --------------------------------------------------------------------------- TableCodec

INT64 = st.integers(-(2**63), 2**63 - 1)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([-0.0, 0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308]),
)
TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "🙂", "👩‍👩‍👧", "été", "日本語", "a\x00b", "^GSPC", "Adj. Close*"]),
)
# DATE values as days, TIMESTAMP values as microseconds (NaT, int64's minimum, included).
DAYS = st.integers(-(10**6), 10**6)
MICROS = st.one_of(st.integers(-(2**62), 2**62), st.just(-(2**63)))
KINDS = {
    "int": ("BIGINT", INT64, np.int64),
    "float": ("DOUBLE", FLOATS, np.float64),
    "bool": ("BOOLEAN", st.booleans(), np.bool_),
    "text": ("VARCHAR", TEXT, object),
    "date": ("DATE", DAYS, "datetime64[D]"),
    "timestamp": ("TIMESTAMP", MICROS, "datetime64[us]"),
    "hugeint": ("HUGEINT", st.integers(-(2**127), 2**127 - 1), "wide"),
    "uhugeint": ("UHUGEINT", st.integers(0, 2**128 - 1), "wide"),
    "ubigint": ("UBIGINT", st.integers(0, 2**64 - 1), "wide"),
    "decimal18": ("DECIMAL(18,2)", st.integers(-(10**18) + 1, 10**18 - 1), "decimal"),
    "decimal38": ("DECIMAL(38,10)", st.integers(-(10**38) + 1, 10**38 - 1), "decimal"),
    "time": ("TIME", st.times(), "time"),
}


@st.composite
def tables(draw: st.DrawFn) -> Table:
    rows = draw(st.integers(0, 12))
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=6))
    columns = []
    for index, kind in enumerate(kinds):
        sql_type, values, dtype = KINDS[kind]
        drawn = draw(st.lists(values, min_size=rows, max_size=rows))
        is_null = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)
        if dtype == "wide":
            # NULL slots hold 0, as the reader leaves them: int64 whenever the values fit.
            array = exact_integers([0 if n else v for v, n in zip(drawn, is_null, strict=True)])
        elif dtype in ("decimal", "time"):
            array = np.empty(rows, dtype=object)
            scale = 2 if sql_type == "DECIMAL(18,2)" else 10
            array[:] = [decimal_of(v, scale) for v in drawn] if dtype == "decimal" else drawn
        elif kind in ("date", "timestamp"):
            array = np.array(drawn, dtype=np.int64).view(dtype)
        elif kind == "text":
            array = np.empty(rows, dtype=object)
            array[:] = drawn
        else:
            array = np.array(drawn, dtype=dtype)
        name = draw(st.sampled_from(["c", "Adj. Close*", "^GSPC", "émoji 🙂", "x y"]))
        columns.append(Column(f"{name}{index}", sql_type, array, is_null))
    return Table("data", tuple(columns))


def float_bits(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float64).view(np.uint64)


@settings(max_examples=200, deadline=None)
@given(table=tables())
def test_table_codec_round_trip(table):
    codec = TableCodec(tuple(ColumnSpec.of(c) for c in table.columns))
    payloads = codec.encode(table)
    assert len(payloads) == table.num_rows
    assert all(len(p) == codec.size for p in payloads)
    # The public description of the columns travels too.
    assert TableCodec(tuple(ColumnSpec.from_dict(c.to_dict()) for c in codec.columns)) == codec
    decoded = codec.decode(payloads, name="data")
    assert decoded.column_names == table.column_names
    for before, after in zip(table.columns, decoded.columns, strict=True):
        assert after.sql_type == before.sql_type
        assert after.values.dtype == before.values.dtype
        assert np.array_equal(after.is_null, before.is_null)
        keep = ~before.is_null
        if before.values.dtype.kind == "f":
            # Exact bits: −0.0, infinities and NaN payloads included.
            assert np.array_equal(float_bits(after.values[keep]), float_bits(before.values[keep]))
        elif before.values.dtype.kind == "M":
            assert np.array_equal(
                after.values[keep].view(np.int64), before.values[keep].view(np.int64)
            )
        else:
            after_values, before_values = after.values[keep].tolist(), before.values[keep].tolist()
            assert after_values == before_values
            # DECIMAL values keep their scale (12.30, not 12.3).
            assert [str(v) for v in after_values] == [str(v) for v in before_values]


def test_table_codec_keeps_the_types_duckdb_gives_a_table():
    import duckdb

    from dpcomm.data.table import table_from_relation

    connection = duckdb.connect()
    relation = connection.sql(
        "SELECT * FROM (VALUES "
        "(1::BIGINT, -0.0::DOUBLE, TRUE, 'é🙂', DATE '1990-02-05', "
        "TIMESTAMP '2001-02-03 04:05:06'),"
        "(NULL, 'NaN'::DOUBLE, NULL, '', NULL, NULL),"
        "(-9223372036854775808, 'inf'::DOUBLE, FALSE, NULL, DATE '0001-01-01', NULL)"
        ") AS t(i, f, b, s, d, ts)"
    )
    table = table_from_relation(relation, "t")
    connection.close()
    codec = TableCodec(tuple(ColumnSpec.of(c) for c in table.columns))
    decoded = codec.decode(codec.encode(table))
    for before, after in zip(table.columns, decoded.columns, strict=True):
        assert (after.sql_type, after.values.dtype) == (before.sql_type, before.values.dtype)
        assert np.array_equal(after.is_null, before.is_null)
    assert decoded.column("d").values[0] == np.datetime64("1990-02-05")
    assert decoded.column("d").values.tolist()[0] == datetime.date(1990, 2, 5)
    assert decoded.column("s").values.tolist()[:2] == ["é🙂", ""]
    assert math.copysign(1.0, decoded.column("f").values[0]) == -1.0
    assert math.isnan(decoded.column("f").values[1])
    assert decoded.column("i").values[2] == -(2**63)


def test_table_codec_carries_duckdbs_exact_numbers():
    import duckdb

    from dpcomm.data.table import table_from_relation

    relation = duckdb.connect().sql(
        "SELECT * FROM (VALUES "
        "(18446744073709551615::UBIGINT, (-170141183460469231731687303715884105728)::HUGEINT, "
        "12.30::DECIMAL(18,2), 99999999999999999999999999999.999999999::DECIMAL(38,9), "
        "TIME '23:59:59.999999'), (NULL, 1, (-0.01)::DECIMAL(18,2), NULL, TIME '00:00:00')"
        ") AS t(u, h, c, d, tm)"
    )
    table = table_from_relation(relation, "t")
    codec = TableCodec(tuple(ColumnSpec.of(c) for c in table.columns))
    assert [c.width for c in codec.columns] == [18, 18, 9, 18, 9]
    decoded = codec.decode(codec.encode(table))
    rows = [tuple(c.values.tolist()[i] for c in decoded.columns) for i in range(2)]
    assert [str(v) for v in rows[0]] == [str(v) for v in relation.fetchall()[0]]
    assert rows[1][1:4] == (1, decimal.Decimal("-0.01"), decimal.Decimal(0))
    assert decoded.column("u").is_null.tolist() == [False, True]
    assert str(rows[0][2]) == "12.30"


# --------------------------------------------------------------------------- tagged JSON

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**200), 2**200),
    st.sampled_from([2**63, -(2**63) - 1, 10**400, -(10**400)]),
    FLOATS,
    st.dates(),
    st.datetimes(),
    st.datetimes(
        timezones=st.sampled_from(
            [datetime.UTC, datetime.timezone(-datetime.timedelta(hours=5, minutes=30))]
        )
    ),
    st.timedeltas(),
    st.times(),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.decimals(places=30, allow_nan=False, allow_infinity=False),
    TEXT,
)
KEYS = st.one_of(
    st.text(max_size=6),
    st.integers(),
    st.dates(),
    st.tuples(st.text(max_size=3), st.integers()),
    st.none(),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=VALUES)
def test_tagged_json_round_trip(value):
    data = dumps(value)
    assert isinstance(data, bytes)
    assert same(loads(data), value)


def test_tagged_json_round_trip_of_edge_values():
    values = [
        [math.nan, -0.0, math.inf, -math.inf, 5e-324, 0.1 + 0.2],
        {(("a", 1)): [decimal.Decimal("-0.000"), decimal.Decimal("1E+3")]},
        {datetime.date(1, 1, 1): datetime.datetime(9999, 12, 31, 23, 59, 59, 999_999)},
        [2**64, -(2**64) - 12345, 3**500, 10**5000, -(7**9000)],
        {"numbers": np.arange(5, dtype=np.int64).tolist(), "": None, "🙂": True},
    ]
    for value in values:
        assert same(loads(dumps(value)), value), value
    arrays = loads(dumps({"a": np.array([[1.5, -0.0], [np.nan, 2.0]])}))["a"]
    assert arrays.dtype == np.float64 and arrays.shape == (2, 2)
    assert np.array_equal(float_bits(arrays), float_bits(np.array([[1.5, -0.0], [np.nan, 2.0]])))
