"""``dpcomm node run``'s exit status: what the round lost beyond --max-left-out, missing outputs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dpcomm.cli.deploy import _round_status
from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import node_configs
from dpcomm.engine.network.records import (
    ComputeFlowOutcome,
    ComputeOutcome,
    CoordinatorOutcome,
    GroupOutcome,
    ResultOutcome,
    RoundSummary,
)
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram


def _coordinator_config(max_left_out: float):
    table = synthetic_table(num_rows=20, seed=1)
    program = AggregateProgram.from_sql("SELECT g1, COUNT(*) FROM t GROUP BY g1", table)
    countermeasure = Scramblers(sampling_rate=0.0, batch_size=10, num_dummies=1)
    spec = RoundSpec.create(
        program,
        countermeasure,
        seed=None,
        idle_seconds=5,
        round_seconds=60,
        max_left_out=max_left_out,
    )
    return node_configs(program, spec)["coordinator"]


def _outcome(*absent: str) -> GroupOutcome:
    coordinator = CoordinatorOutcome(
        committed={},
        lost={},
        refused={},
        result_received=True,
        registration_seconds=1.0,
        planned_at=0.0,
        round_seconds=1.0,
        absent=absent,
    )
    return GroupOutcome(coordinator=coordinator)


@pytest.mark.parametrize(
    ("max_left_out", "absent", "status"),
    [(0.1, ("source-3",), 0), (0.1, ("source-3", "source-4", "source-9"), 1), (0.0, (), 0)],
)
def test_the_coordinator_fails_when_more_sources_were_absent_than_allowed(
    capsys, max_left_out, absent, status
):
    assert _round_status(_coordinator_config(max_left_out), _outcome(*absent)) == status
    error = capsys.readouterr().err
    if status:
        assert error.count("\n") == 1 and "3 of 20 sources never registered" in error
        assert "--max-left-out 0.1" in error
    else:
        assert error == ""


def test_the_coordinator_and_the_result_fail_on_what_the_summary_says(capsys):
    config = _coordinator_config(0.0)
    summary = RoundSummary(20, {"(g1)": 2}, 0.0, ("flow (g1): 2 of 20 sources left out",))
    coordinator = replace(_outcome().coordinator, summary=summary)
    assert _round_status(config, GroupOutcome(coordinator=coordinator)) == 1
    assert capsys.readouterr().err == (
        "dpcomm: error: the round failed: flow (g1): 2 of 20 sources left out\n"
    )
    whole = ResultOutcome(outputs=(), missing=(), summary=RoundSummary(20, {"(g1)": 0}, 0.0))
    assert _round_status(config, GroupOutcome(result=whole)) == 0
    for result, says in [
        (replace(whole, missing=(("(g1)", 1),)), "1 output(s) never arrived"),
        (replace(whole, summary=None), "no summary from the coordinator"),
        (replace(whole, summary=summary), "2 of 20 sources left out"),
    ]:
        assert _round_status(config, GroupOutcome(result=result)) == 1
        assert says in capsys.readouterr().err


def test_a_compute_node_that_gave_up_on_an_output_fails_and_says_why(capsys):
    flow = ComputeFlowOutcome(1, 0, (), 0, 1, undelivered=("gave up on its output to result",))
    compute = ComputeOutcome("compute-0-1", 0, 1, {"(g1)": flow})
    assert _round_status(_coordinator_config(0.0), GroupOutcome(computes=(compute,))) == 1
    err = capsys.readouterr().err
    assert "compute-0-1: flow (g1): gave up on its output to result" in err
