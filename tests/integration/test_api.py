"""dpcomm.run_sql on every kind of input gives the same run as run_aggregate; bad input errors."""

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import dpcomm
from dpcomm.data import diabetes_table, write_table
from dpcomm.data.frames import result_frame
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.runs import AggregateRun, run_aggregate
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT A, B, COUNT(*), AVG(I) FROM diabetes GROUP BY GROUPING SETS ((A), (B))"
CHOSEN = dpcomm.Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=20)


@pytest.fixture(scope="module")
def expected():
    program = AggregateProgram.from_sql(SQL, diabetes_table(), num_targets=5)
    return run_aggregate(program, CHOSEN, delta=1e-4, seed=4)


def inputs(tmp_path):
    frame = dpcomm.datasets.diabetes()
    csv, parquet = tmp_path / "d.csv", tmp_path / "d.parquet"
    write_table(diabetes_table(), csv)
    write_table(diabetes_table(), parquet)
    return {
        "pandas": frame,
        "arrow": pa.Table.from_pandas(frame, preserve_index=False),
        "polars": pl.from_pandas(frame),
        "duckdb": duckdb.from_df(frame),
        "csv": str(csv),
        "parquet": parquet,
    }


def test_every_input_gives_the_same_run(expected, tmp_path):
    for kind, data in inputs(tmp_path).items():
        run = dpcomm.run_sql(SQL, data, countermeasure=CHOSEN, num_targets=5, delta=1e-4, seed=4)
        query = expected.program.query
        frame = result_frame(expected.rows, query.result_names, query.result_types)
        assert isinstance(run, AggregateRun)  # the object the CLI prints
        pd.testing.assert_frame_equal(run.result, frame, obj=kind)
        assert list(run.result.columns) == ["A", "B", "count_star()", "avg(I)", "grouping_set"]
        assert run.rows == expected.rows
        assert run.report.privacy == expected.report.privacy
        assert run.report.utility == expected.report.utility
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


@pytest.mark.parametrize(
    ("sources", "targets", "grouping_sets", "query"),
    [
        (500, 10, 1, "SELECT g1, COUNT(*) FROM t GROUP BY g1"),
        (1000, 5, 2, "SELECT g1, g2, SUM(m1) FROM t GROUP BY GROUPING SETS ((g1), (g2))"),
    ],
)
def test_a_calibrated_countermeasure_runs_with_the_calibrated_epsilon(
    sources, targets, grouping_sets, query
):
    plan = dpcomm.calibrate(
        sources=sources,
        num_targets=targets,
        grouping_sets=grouping_sets,
        epsilon=2.0 if grouping_sets > 1 else 1.0,
        delta=1e-4,
    )
    assert plan.epsilon <= (2.0 if grouping_sets > 1 else 1.0)
    assert plan.extra_consents == plan.sources_recruited - sources >= 0
    assert plan.pareto.iloc[0]["network_load_messages"] == plan.network_load_messages
    assert plan.pareto["network_load_messages"].is_monotonic_increasing
    table = dpcomm.datasets.synthetic(rows=plan.sources_recruited, seed=3)
    run = dpcomm.run_sql(
        query,
        table,
        countermeasure=plan.countermeasure,
        num_targets=targets,
        delta=1e-4,
        seed=5,
    )
    assert run.report.privacy.epsilon == pytest.approx(plan.epsilon, rel=1e-9)
    assert run.report.efficiency.messages == plan.network_load_messages


def test_a_kmeans_calibration_runs_with_the_calibrated_epsilon():
    plan = dpcomm.calibrate(sources=600, num_targets=3, iterations=2, epsilon=1.5, delta=1e-4)
    points = dpcomm.datasets.mnist5k().points[: plan.sources_recruited]
    run = dpcomm.kmeans(points, k=3, iterations=2, countermeasure=plan.countermeasure, seed=2)
    assert plan.epsilon <= 1.5
    assert run.report.privacy.epsilon == pytest.approx(plan.epsilon, rel=1e-9)


def test_an_infeasible_calibration_names_the_python_parameter():
    with pytest.raises(dpcomm.DpcommError, match=r"relax max_channels by \d+"):
        dpcomm.calibrate(sources=50, num_targets=3, epsilon=1.0, delta=1e-4, max_channels=3)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"grouping_sets": 2, "iterations": 2}, "grouping_sets/iterations"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"min_utility": 1.5}, "min_utility"),
        ({"sources": 0}, "sources"),
    ],
)
def test_bad_calibration_input_names_the_parameter(options, name):
    arguments = {"sources": 100, "num_targets": 5, "epsilon": 1.0, "delta": 1e-4, **options}
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.calibrate(**arguments)
    assert caught.value.name == name


def test_polars_with_nulls_dates_and_text_equals_duckdb():
    import datetime

    frame = pl.DataFrame(
        {
            "city name": ["Lyon", None, "Paris", "Lyon", "Nice", None] * 20,
            "day": [datetime.date(2024, 1, 1 + i % 3) for i in range(120)],
            "amount": [1.5, None, 2.25, 3.0, None, 4.0] * 20,
        }
    )
    sql = 'SELECT "city name", day, COUNT(*), SUM(amount) FROM t GROUP BY "city name", day'
    run = dpcomm.run_sql(sql, frame, countermeasure=dpcomm.NoCountermeasure(), num_targets=3)
    t = frame.to_arrow()  # noqa: F841 (read by DuckDB's replacement scan)
    expected = duckdb.sql(sql).df()
    key = ["city name", "day"]
    got = run.result.sort_values(key, na_position="first").reset_index(drop=True)
    want = expected.sort_values(key, na_position="first").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)
