"""What a release publishes: counts ≥ 0, the raw values kept, totals consistent on request."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.program import public_program
from dpcomm.release.noise import noisy_program

TABLE = table_from_arrays(
    "t",
    {
        "a": np.array(["x", "y", "x", "x"] * 5, dtype=object),
        "b": np.array(["p", "q"] * 10, dtype=object),
        "v": np.linspace(0.0, 1.0, 20),
    },
)
SQL = "SELECT a, b, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY ROLLUP(a, b)"
KEYS = {"a": ["x", "y", "z"], "b": ["p", "q"]}


def _program(**options):
    return noisy_program(
        SQL, TABLE, release=dpcomm.Laplace(0.3), keys=KEYS, bounds={"v": (0.0, 1.0)}, **options
    )


def _exact(program):
    from dpcomm.engine.memory import simulate

    exact = program.without_release()
    return exact.core_result(simulate(exact, dpcomm.NoCountermeasure(), delta=None, seed=0).state)


def test_counts_are_published_non_negative_and_the_raw_values_kept():
    program = _program()
    release = program.release
    raw = release.released_rows(program.query, _exact(program))
    count = release.noises[0].output
    raw[1][0][count] = -7
    published = release.published_rows(program.query, raw)
    assert raw[1][0][count] == -7  # the raw rows are not modified
    assert all(r[count] >= 0 and isinstance(r[count], int) for rows in published for r in rows)
    assert published[1][0][count] == 0


def test_consistent_totals_add_up_and_travel_in_the_spec():
    program = _program(consistent_totals=True)
    release = program.release
    assert release.consistent_totals and public_program(program).release == release
    count, total = (n.output for n in release.noises)
    for _ in range(5):
        published = release.published_rows(
            program.query, release.released_rows(program.query, _exact(program))
        )
        (grand,), by_a, cells = published
        for column, integer in ((count, True), (total, False)):
            assert grand[column] == pytest.approx(sum(r[column] for r in by_a))
            for parent in by_a:
                children = [r[column] for r in cells if r["a"] == parent["a"]]
                assert parent[column] == pytest.approx(sum(children))
            if integer:
                assert all(isinstance(r[column], int) and r[column] >= 0 for r in cells)


def test_consistent_totals_need_a_finest_grouping_set_with_public_keys():
    with pytest.raises(InvalidParameterError, match="consistent_totals"):
        noisy_program(
            "SELECT a, b, COUNT(*) AS n FROM t GROUP BY GROUPING SETS ((a), (b))",
            TABLE, release=dpcomm.Laplace(1.0), keys=KEYS, consistent_totals=True,
        )  # fmt: skip
    with pytest.raises(InvalidParameterError, match="consistent_totals"):
        noisy_program(
            "SELECT a, COUNT(*) AS n FROM t GROUP BY ROLLUP(a)", TABLE,
            release=dpcomm.Laplace(1.0), key_selection_delta=1e-6, consistent_totals=True,
        )  # fmt: skip
    with pytest.raises(InvalidParameterError, match="consistent_totals"):
        dpcomm.run_sql(SQL, TABLE, countermeasure=dpcomm.NoCountermeasure(), consistent_totals=True)
    assert replace(_program().release, consistent_totals=False) == _program().release
