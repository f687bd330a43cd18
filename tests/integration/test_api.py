"""dpcomm.run_sql on every kind of input gives the same run as run_aggregate; bad input errors."""

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import dpcomm
from dpcomm.data import diabetes_table, write_table
from dpcomm.engine.report import run_aggregate
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT A, B, COUNT(*), AVG(I) FROM diabetes GROUP BY GROUPING SETS ((A), (B))"
CHOSEN = dpcomm.Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=20)


@pytest.fixture(scope="module")
def expected():
    program = AggregateProgram.from_sql(SQL, diabetes_table(), num_compute_nodes=5)
    return run_aggregate(program, CHOSEN, delta=1e-4, seed=4)


def inputs(tmp_path):
    frame = dpcomm.datasets.diabetes()
    csv, parquet = tmp_path / "d.csv", tmp_path / "d.parquet"
    write_table(diabetes_table(), csv)
    write_table(diabetes_table(), parquet)
    return {
        "pandas": frame,
        "arrow": pa.Table.from_pandas(frame, preserve_index=False),
        "duckdb": duckdb.from_df(frame),
        "csv": str(csv),
        "parquet": parquet,
    }


def test_every_input_gives_the_same_run(expected, tmp_path):
    for kind, data in inputs(tmp_path).items():
        run = dpcomm.run_sql(SQL, data, countermeasure=CHOSEN, compute_nodes=5, delta=1e-4, seed=4)
        frame = pd.DataFrame(expected.result, columns=list(run.result.columns))
        pd.testing.assert_frame_equal(run.result, frame, obj=kind)
        assert list(run.result.columns) == ["A", "B", "count_star()", "avg(I)"]
        assert run.report.privacy.epsilon == expected.report["privacy"]["epsilon"]
        assert run.report.utility == expected.report["utility"]
        assert run.report.to_dict()["privacy"]["delta"] == 1e-4


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: dpcomm.run_sql(SQL, 42, countermeasure=CHOSEN), "data"),
        (
            lambda: dpcomm.run_sql(SQL, dpcomm.datasets.diabetes(), countermeasure="x"),
            "countermeasure",
        ),
        (
            lambda: dpcomm.run_sql(
                SQL, dpcomm.datasets.diabetes(), countermeasure=CHOSEN, engine="spark"
            ),
            "engine",
        ),
        (
            lambda: dpcomm.kmeans(
                [[0.0], [1.0]], k=1, iterations=1, countermeasure=CHOSEN, labels=[0]
            ),
            "labels",
        ),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(InvalidParameterError) as caught:
        call()
    assert caught.value.name == name
