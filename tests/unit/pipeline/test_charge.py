"""What a budget charges before a run: a deployment at the weakest batches it can run."""

from __future__ import annotations

import pytest

import dpcomm
from dpcomm.budget import Budget, BudgetExceededError
from dpcomm.data import synthetic_table
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.pipeline.charge import charge_round, deployment_privacy, guarantee_to_charge
from dpcomm.plan import account_plan
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.noise import noisy_program
from dpcomm.release.report import release_report

SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=5)
SQL = "SELECT g1, g2, COUNT(*) FROM t GROUP BY GROUPING SETS ((g1), (g2))"


@pytest.fixture(scope="module")
def program() -> AggregateProgram:
    return AggregateProgram.from_sql(SQL, synthetic_table(num_rows=30, seed=1), num_targets=4)


def test_no_round_reports_more_than_the_deployment_charge(program) -> None:
    charged = deployment_privacy(program.plan, SCRAMBLERS, delta=1e-4).guarantee
    planned = account_plan(program.plan, SCRAMBLERS, delta=1e-4).guarantee
    assert charged.epsilon > planned.epsilon  # late sources can weaken a round
    flows = program.flow_names
    # Batches as late, absent or dead-scrambler rounds leave them (3 scramblers per flow).
    outcomes = [(10, 10, 10), (10, 10, 9), (10, 4, 1), (1, 1, 1), (10, 7, 3), (2, 10, 10)]
    for first, second in zip(outcomes, reversed(outcomes), strict=True):
        sizes = {
            flows[0]: {m: first.count(m) for m in set(first)},
            flows[1]: {m: second.count(m) for m in set(second)},
        }
        ran = account_plan(program.plan, SCRAMBLERS, delta=1e-4, batch_sizes=sizes).guarantee
        assert ran.epsilon <= charged.epsilon + 1e-12 and ran.delta <= charged.delta


def test_a_released_deployment_is_charged_traffic_and_release_at_worst() -> None:
    table = synthetic_table(num_rows=30, seed=1)
    program = noisy_program(
        "SELECT g1, COUNT(*) FROM t GROUP BY g1", table, num_targets=4,
        release=dpcomm.Laplace(1.0), keys={"g1": list(range(10))},
    )  # fmt: skip
    charged = guarantee_to_charge(program, SCRAMBLERS, delta=1e-4, deployed=True)
    assert "release" in charged.method and "every batch size" in charged.method
    for sizes in ({10: 3}, {10: 2, 1: 1}):
        ran = account_plan(program.plan, SCRAMBLERS, delta=1e-4, batch_sizes={"(g1)": sizes})
        reported = release_report(program, ran)
        assert reported.epsilon_total <= charged.epsilon + 1e-12
        assert reported.composed_delta <= charged.delta
    simulated = guarantee_to_charge(program, SCRAMBLERS, delta=1e-4)
    assert simulated.epsilon < charged.epsilon and simulated.method.endswith("release")


def test_without_scramblers_a_deployment_is_charged_its_plan(program) -> None:
    flooding = dpcomm.LocalFlooding(sampling_rate=0.5, num_dummies=1)
    assert (
        deployment_privacy(program.plan, flooding, delta=1e-4).guarantee
        == account_plan(program.plan, flooding, delta=1e-4).guarantee
    )


def test_a_capped_scrambler_too_small_to_run_is_not_charged(program) -> None:
    capped = dpcomm.Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=10, capped=True)
    # d = 10 > (T − 1)·m = 3m for m <= 3: such a scrambler sends nothing.
    runnable = dict.fromkeys(range(4, 11), 1)
    expected = account_plan(
        program.plan, capped, delta=1e-4, batch_sizes=dict.fromkeys(program.flow_names, runnable)
    )
    assert deployment_privacy(program.plan, capped, delta=1e-4).guarantee == expected.guarantee


def test_the_coordinator_charges_a_round_before_it_runs(program, tmp_path) -> None:
    spec = RoundSpec.create(program, SCRAMBLERS, seed=None, idle_seconds=1, round_seconds=10)
    budget = Budget(epsilon=8.0, delta=1e-3, ledger=tmp_path / "population.json")
    charge = charge_round(budget, spec, delta=1e-4)
    expected = guarantee_to_charge(program, SCRAMBLERS, delta=1e-4, deployed=True)
    assert (charge.epsilon, charge.delta) == (expected.epsilon, expected.delta)
    assert charge.kind == "aggregate" and f"(round {spec.round_id})" in charge.query
    before = budget.ledger.read_bytes()
    with pytest.raises(BudgetExceededError, match="nothing ran"):
        charge_round(budget, spec, delta=1e-4)  # twice ε > 8
    assert budget.ledger.read_bytes() == before
