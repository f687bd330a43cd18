"""How column values are held, travel and print: exact types, refusals, output text."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

import numpy as np
import pytest

from dpcomm._json import json_ready
from dpcomm.cli.execute import _fmt
from dpcomm.data.table import (
    Column,
    Table,
    decimal_of,
    decimal_scale,
    exact_integers,
    read_table,
    table_from_arrays,
    value_kind,
)
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.codec import CodecError, ColumnSpec, TableCodec
from dpcomm.queries.groupby import partition_keys


def objects(*values: object) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


@pytest.mark.parametrize(
    ("sql_type", "kind"),
    [
        ("BIGINT", "int"),
        ("UTINYINT", "int"),
        ("UBIGINT", "wideint"),
        ("HUGEINT", "wideint"),
        ("UHUGEINT", "wideint"),
        ("DECIMAL(18,2)", "decimal"),
        ("DECIMAL(38, 10)", "decimal"),
        ("FLOAT", "float"),
        ("DATE", "date"),
        ("TIME", "time"),
        ("TIMESTAMP_MS", "timestamp"),
        ("INTEGER[]", None),
        ("BLOB", None),
        ("TIMESTAMP WITH TIME ZONE", None),
        ("TIMESTAMP_NS", None),
        ("STRUCT(a INTEGER)", None),
    ],
)
def test_value_kinds(sql_type, kind):
    assert value_kind(sql_type) == kind


def test_exact_numbers():
    assert decimal_scale("DECIMAL(38,10)") == (38, 10)
    assert str(decimal_of(1230, 2)) == "12.30"
    assert str(decimal_of(-1, 10)) == "-1E-10" and decimal_of(-1, 10) == Decimal("-0.0000000001")
    wide = 10**38 - 1
    assert decimal_of(wide, 10) == Decimal("9999999999999999999999999999.9999999999")
    assert exact_integers([1, -2]).dtype == np.int64
    assert exact_integers([2**64 - 1, 1]).tolist() == [2**64 - 1, 1]
    assert exact_integers([2**64 - 1]).dtype == object


def test_a_decimal_column_holds_decimals_not_floats():
    with pytest.raises(InvalidParameterError, match="DECIMAL"):
        Column("d", "DECIMAL(9,2)", np.array([0.01]), np.zeros(1, dtype=bool))
    with pytest.raises(InvalidParameterError, match="HUGEINT"):
        Column("h", "HUGEINT", np.array([1.0]), np.zeros(1, dtype=bool))


def test_table_from_arrays_types_dates_and_timestamps():
    days = np.array(["2024-01-02", "1999-12-31"], dtype="datetime64[D]")
    table = table_from_arrays(
        "t", {"day": days, "at": days.astype("datetime64[s]"), "x": np.array([1, 2])}
    )
    assert [c.sql_type for c in table.columns] == ["DATE", "TIMESTAMP", "BIGINT"]
    assert table.column("day").values.tolist()[0] == datetime.date(2024, 1, 2)
    assert table.column("at").values.dtype == np.dtype("datetime64[us]")


def test_read_table_names_the_files_it_reads(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("[]")
    with pytest.raises(InvalidParameterError, match=r"\.csv, \.tsv \(optionally \.gz or \.zst\)"):
        read_table(path)


def test_codec_refuses_what_it_cannot_carry_exactly():
    unsupported = Column("tags", "INTEGER[]", objects("[1, 2]"), np.zeros(1, dtype=bool))
    with pytest.raises(InvalidParameterError, match=r'column "tags".*INTEGER\[\]'):
        ColumnSpec.of(unsupported)
    finer = Column("d", "DECIMAL(9,2)", objects(Decimal("0.001")), np.zeros(1, dtype=bool))
    with pytest.raises(InvalidParameterError, match="at most 2 decimals"):
        TableCodec((ColumnSpec.of(finer),)).encode(Table("t", (finer,)))
    times = Column("tm", "TIME", objects(datetime.time(1)), np.zeros(1, dtype=bool))
    codec = TableCodec((ColumnSpec.of(times),))
    day = 86_400_000_000
    with pytest.raises(CodecError, match="TIME value"):
        codec.decode([b"\x01" + day.to_bytes(8, "big")])


def test_equal_decimal_keys_go_to_one_compute_node():
    values = objects(Decimal("12.3"), Decimal("12.30"))
    keys = Table("k", (Column("d", "DECIMAL(9,2)", values, np.zeros(2, dtype=bool)),))
    nodes = partition_keys(keys, 1000)
    assert nodes[0] == nodes[1]


def test_text_and_json_output_tell_values_apart():
    assert _fmt(-math.inf) == "-inf" and _fmt(math.inf) == "inf"
    assert _fmt(Decimal("-1E-10")) == "-0.0000000001"
    assert _fmt(datetime.time(1, 2, 3, 250000)) == "01:02:03.25"
    assert _fmt(datetime.datetime(2024, 1, 2, 3, 4, 5, 500000)) == "2024-01-02 03:04:05.5"
    assert _fmt(datetime.date(2024, 1, 2)) == "2024-01-02"
    assert json_ready([math.nan, math.inf, -math.inf, None]) == ["NaN", "inf", "-inf", None]
    assert json_ready(Decimal("12.30")) == "12.30"
    assert json_ready(2**70) == 2**70
