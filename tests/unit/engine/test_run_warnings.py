"""The warnings of a run: said once per run, only when they matter, from the caller's line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.engine import simulate
from dpcomm.errors import BalancedBatchesWarning, DpcommWarning, InvalidParameterError, warn
from dpcomm.plan import LocalFlooding, Scramblers
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT a, b, COUNT(*), AVG(x) FROM t GROUP BY GROUPING SETS ((a), (b))"


def make_table(rows: int):
    rng = np.random.default_rng(0)
    return table_from_arrays(
        "t",
        {
            "a": rng.integers(0, 12, rows),
            "b": rng.integers(0, 4, rows),
            "x": rng.normal(size=rows),
        },
    )


def make_program(rows: int) -> AggregateProgram:
    return AggregateProgram.from_sql(SQL, make_table(rows), num_targets=5)


def test_balanced_batches_are_said_once_per_run_with_both_epsilons():
    # 1,050 sources, n = 100: 11 batches of 95 or 96 in each of the two grouping sets.
    with pytest.warns(BalancedBatchesWarning) as record:
        run = simulate(
            make_program(1050), Scramblers(sampling_rate=0.3, batch_size=100), delta=1e-4, seed=1
        )
    assert len(record) == 1
    message = str(record[0].message)
    assert "clusters (a), (b): n = 100, 1050 senders: 11 balanced batches of 95 or 96 sources" in (
        message
    )
    assert f"the plan's ε = {run.privacy.guarantee.epsilon:.4g} at δ = 0.0001, not the " in message


def test_nothing_is_said_when_the_batches_leave_epsilon_as_asked():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DpcommWarning)
        # n divides S: 10 batches of exactly 100.
        simulate(make_program(1000), Scramblers(sampling_rate=0.3, batch_size=100), delta=1e-4)
        # 50 sources, n = 7: 8 batches of 6 or 7, but pure ε is that of σ's local randomizer
        # whatever the batch size.
        program = make_program(50)
        countermeasure = Scramblers(sampling_rate=0.5, batch_size=7, num_dummies=0)
        run = simulate(program, countermeasure, delta=0.0, seed=0)
    assert sorted(set(run.transformed.batches["(a)"])) == [6, 7]


def test_the_warning_points_at_the_callers_line():
    table = make_table(1050)
    with pytest.warns(BalancedBatchesWarning) as record:
        dpcomm.run_sql(
            SQL, table, countermeasure=Scramblers(sampling_rate=0.2, batch_size=100), seed=1
        )
    assert len(record) == 1
    assert record[0].filename == __file__
    # Above a target ε the plan is refused before it runs (no warning to point anywhere).
    with pytest.raises(InvalidParameterError, match="nothing ran"):
        simulate(
            make_program(100),
            LocalFlooding(sampling_rate=0.2),
            delta=1e-4,
            target_epsilon=0.5,
        )


def test_warn_skips_every_frame_of_the_package():
    def user_code() -> int:
        with pytest.warns(DpcommWarning) as record:
            warn("from the library")
        return record[0].lineno

    # Called from a test (outside the package), the caller's own line is the test's.
    line = user_code()
    assert line == user_code.__code__.co_firstlineno + 2


def test_a_target_epsilon_is_the_epsilon_asked_for():
    program = make_program(1050)
    countermeasure = Scramblers(sampling_rate=0.3, batch_size=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DpcommWarning)
        run = simulate(program, countermeasure, delta=1e-4, target_epsilon=1e3)
    epsilon = run.privacy.guarantee.epsilon
    with pytest.raises(InvalidParameterError, match="nothing ran") as refused:
        simulate(program, countermeasure, delta=1e-4, target_epsilon=epsilon / 2)
    assert refused.value.name == "target_epsilon"
