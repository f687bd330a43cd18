"""Centred sums: SUM and AVG of values shifted by their bounds' midpoint at the source."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.release_audit import seeded_release_fault
from dpcomm.release.mechanisms import aggregate_sensitivity, centred_sum_sensitivity
from dpcomm.release.noise import noisy_program

TABLE = table_from_arrays(
    "t",
    {
        "k": np.array(["a", "b", "a", "a"], dtype=object),
        "v": np.array([3000.0, 9000.0, 2000.0, 4000.0]),
    },
)
BOUNDS = {"v": (2500.0, 6500.0)}
KEYS = {"k": ["a", "b"]}


def _program(sql: str, **kwargs: object) -> object:
    return noisy_program(
        sql, TABLE, release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS, num_targets=4, **kwargs
    )


@pytest.mark.parametrize(
    ("view", "l1", "l2"),
    [("own-row", 4000.0, 4000.0), ("one-other", 6000.0, 2000.0 * math.sqrt(5.0)),
     ("one-other-shared-node", 6000.0, 2000.0 * math.sqrt(5.0))],
)  # fmt: skip
def test_centred_sensitivity_in_every_view(view: str, l1: float, l2: float) -> None:
    """M = (hi − lo)/2, W = hi − lo: the plain SUM's 2M = 13,000 (own row) falls to 4,000."""
    got = centred_sum_sensitivity([("k",)], 2500.0, 6500.0, views=[view])  # type: ignore[list-item]
    assert got.l1 == pytest.approx(l1) and got.l2 == pytest.approx(l2)
    plain = aggregate_sensitivity("sum", [("k",)], 6500.0, 4000.0, views=["own-row"])
    assert plain.l1 == 13000.0
    assert centred_sum_sensitivity([()], 2500.0, 6500.0).l1 == 4000.0  # one cell: hi − lo


def test_avg_and_sum_beside_a_count_are_centred_and_share_the_count() -> None:
    program = _program("SELECT k, AVG(v) AS m, SUM(v) AS s, COUNT(v) AS c FROM t GROUP BY k")
    query = program.query  # type: ignore[attr-defined]
    assert [c for _, c in query.centres] == [4500.0]
    functions = sorted(n.function for n in program.release.noises)  # type: ignore[attr-defined]
    assert functions == ["count", "sum"]  # one COUNT for AVG's denominator, SUM and COUNT(v)
    assert "4500.0 +" in query.post.sql and "+ 4500.0 *" in query.post.sql
    run = dpcomm.run_sql(
        "SELECT k, AVG(v) AS m, SUM(v) AS s, COUNT(v) AS c FROM t GROUP BY k", TABLE,
        countermeasure=dpcomm.NoCountermeasure(), release=dpcomm.Laplace(1e6), bounds=BOUNDS,
        keys=KEYS, seed=1,
    )  # fmt: skip
    rows = {r["k"]: r for r in run.rows}
    assert rows["a"]["s"] == pytest.approx(3000.0 + 2500.0 + 4000.0, abs=1.0)  # clamped
    assert rows["a"]["m"] == pytest.approx(9500.0 / 3.0, abs=1.0)
    assert rows["b"]["s"] == pytest.approx(6500.0, abs=1.0) and rows["b"]["c"] == 1


def test_a_lone_sum_stays_plain() -> None:
    """Its published value would need a COUNT released for it, which costs more than it saves."""
    program = _program("SELECT k, SUM(v) AS s FROM t GROUP BY k")
    assert program.query.centres == ()  # type: ignore[attr-defined]
    (noise,) = program.release.noises  # type: ignore[attr-defined]
    assert noise.sensitivity.l1 == 19500.0  # 3M under the default view (keys may share a node)


def test_symmetric_bounds_need_no_centre() -> None:
    program = noisy_program(
        "SELECT k, AVG(v) AS m FROM t GROUP BY k", TABLE, release=dpcomm.Laplace(1.0),
        bounds={"v": (-5.0, 5.0)}, keys=KEYS, num_targets=4,
    )  # fmt: skip
    assert program.query.centres == ()


def test_seeded_fault_calibrates_only_the_centred_sum_to_its_own_row() -> None:
    program = _program("SELECT k, AVG(v) AS m FROM t GROUP BY k")
    faulty = seeded_release_fault(program, "centred-own-row")  # type: ignore[arg-type]
    correct = {n.function: n for n in program.release.noises}  # type: ignore[attr-defined]
    wrong = {n.function: n for n in faulty.release.noises}  # type: ignore[union-attr]
    assert wrong["count"] == correct["count"]
    assert wrong["sum"].sensitivity.l1 == 4000.0 < correct["sum"].sensitivity.l1 == 6000.0
    assert wrong["sum"].epsilon == correct["sum"].epsilon  # it still claims the same share
    with pytest.raises(InvalidParameterError, match="centred SUM"):
        seeded_release_fault(_program("SELECT k, SUM(v) AS s FROM t GROUP BY k"), "centred-own-row")  # type: ignore[arg-type]


def test_tampered_centre_is_refused() -> None:
    from dataclasses import replace

    from dpcomm.release.noise import bind_release

    program = _program("SELECT k, AVG(v) AS m FROM t GROUP BY k")
    query = program.query  # type: ignore[attr-defined]
    moved = replace(query, centres=((query.centres[0][0], 4000.0),))
    with pytest.raises(InvalidParameterError, match="midpoint"):
        bind_release(moved, dpcomm.Laplace(1.0), KEYS, num_targets=4)


def test_nulls_and_filtered_rows_add_nothing_to_the_centred_sum_or_its_count() -> None:
    """A NULL and a row failing the WHERE add (0, 0), a value (x − c, 1); a key without rows
    publishes no AVG (its noisy count is not positive) and SUM = noise + c × noise only.
    With ε2 = 10⁷ the noise is negligible."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "k": ["a", "b", "a", "a", "a", "b"],
            "v": [3000.0, 9000.0, None, 4000.0, 100.0, None],
            "w": [1, 2, 3, 0, 5, 6],
        }
    )
    run = dpcomm.run_sql(
        "SELECT k, AVG(v) AS m, SUM(v) AS s, COUNT(v) AS c, COUNT(*) AS n FROM t "
        "WHERE w > 0 GROUP BY k", frame, countermeasure=dpcomm.NoCountermeasure(),
        release=dpcomm.Laplace(1e7), bounds=BOUNDS, keys={"k": ["a", "b", "z"]}, seed=3,
    )  # fmt: skip
    rows = {r["k"]: r for r in run.rows}
    # a: 3000, NULL, (4000 filtered), 100 → 2500; b: 9000 → 6500, NULL; z: nothing.
    assert (rows["a"]["c"], rows["a"]["n"], rows["b"]["c"], rows["b"]["n"]) == (2, 3, 1, 2)
    assert rows["a"]["s"] == pytest.approx(5500.0, abs=0.1)
    assert rows["a"]["m"] == pytest.approx(2750.0, abs=0.1)
    assert rows["b"]["s"] == pytest.approx(6500.0, abs=0.1)
    assert rows["z"]["c"] == 0 and rows["z"]["m"] is None
    assert rows["z"]["s"] == pytest.approx(0.0, abs=0.1)


def test_equal_bounds_release_the_count_alone() -> None:
    """lo = hi: every value centres to 0, the centred sum has sensitivity 0 and no noise
    (OpenDP accepts scale 0 for d_in 0); SUM = lo × COUNT and AVG = lo exactly."""
    program = noisy_program(
        "SELECT k, AVG(v) AS m, SUM(v) AS s, COUNT(v) AS c FROM t GROUP BY k", TABLE,
        release=dpcomm.Laplace(1.0), bounds={"v": (3000.0, 3000.0)}, keys=KEYS, num_targets=4,
    )  # fmt: skip
    noises = {n.function: n for n in program.release.noises}  # type: ignore[attr-defined]
    assert noises["sum"].sensitivity.l1 == noises["sum"].scale == 0.0
    assert noises["count"].scale == 6.0  # 3 (one-other-shared-node) over ε2/2
    run = dpcomm.run_sql(
        "SELECT k, AVG(v) AS m, SUM(v) AS s, COUNT(v) AS c FROM t GROUP BY k", TABLE,
        countermeasure=dpcomm.NoCountermeasure(), release=dpcomm.Laplace(1.0),
        bounds={"v": (3000.0, 3000.0)}, keys=KEYS, seed=1,
    )  # fmt: skip
    for row in run.rows:
        assert row["s"] == 3000.0 * row["c"]
        assert row["m"] is None if row["c"] <= 0 else row["m"] == 3000.0
