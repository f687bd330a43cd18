"""A budget across queries: run_sql, kmeans and ``dpcomm run --ledger`` charge one ledger.

The charge is the run's reported plan guarantee, made before the run; a run beyond the budget
(or of ε = inf) is refused before anything runs and leaves the ledger byte for byte; two
concurrent runs (two processes) charge it twice.
"""

import json
import multiprocessing
import subprocess
import sys

import numpy as np
import pytest

import dpcomm
from dpcomm import datasets
from dpcomm.budget import Budget, BudgetExceededError
from dpcomm.errors import InvalidParameterError

QUERY = "SELECT g1, COUNT(*) FROM people GROUP BY g1"
SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=20)
CLI_QUERY = "SELECT A, COUNT(*) FROM diabetes GROUP BY A"
CLI_RUN = [
    "run", "aggregate", "--sql", CLI_QUERY, "--mechanism", "scrambler", "--batch", "100",
    "--dummies", "50", "--sampling", "0.2", "--delta", "1e-4", "--seed", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def people():
    return datasets.synthetic(rows=2000, seed=1)


def test_run_sql_charges_what_the_run_reports(tmp_path, people):
    budget = Budget(epsilon=6.0, delta=1e-3, ledger=tmp_path / "population.json")
    first = dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=1, budget=budget)
    second = dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=2, budget=budget)
    charges = budget.charges()
    assert [(c.epsilon, c.delta) for c in charges] == [
        (run.report.privacy.epsilon, run.report.privacy.delta) for run in (first, second)
    ]
    assert charges[0].method == first.report.privacy.method
    assert charges[0].kind == "aggregate" and charges[0].query == first.program.query.sql
    assert budget.spent().charges == 2


def test_a_refused_query_leaves_the_ledger_byte_identical(tmp_path, people, monkeypatch):
    budget = Budget(epsilon=3.0, delta=1e-3, ledger=tmp_path / "population.json")
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=1, budget=budget)
    before = budget.ledger.read_bytes()

    def never(*args, **kwargs):
        raise AssertionError("a refused query must not run")

    monkeypatch.setattr("dpcomm.engine.runs.run_aggregate", never)
    with pytest.raises(BudgetExceededError, match="nothing ran"):
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=2, budget=budget)
    assert budget.ledger.read_bytes() == before


def test_a_run_of_infinite_epsilon_is_refused(tmp_path, people):
    budget = Budget(epsilon=100.0, delta=0.5, ledger=tmp_path / "population.json")
    before = budget.ledger.read_bytes()
    with pytest.raises(BudgetExceededError, match="ε = inf"):
        dpcomm.run_sql(QUERY, people, countermeasure=dpcomm.NoCountermeasure(), budget=budget)
    assert budget.ledger.read_bytes() == before


def test_a_deployment_cannot_be_charged_before_it_runs(tmp_path, people):
    budget = Budget(epsilon=100.0, delta=0.5, ledger=tmp_path / "population.json")
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, engine="network", budget=budget)
    assert caught.value.name == "engine"
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, budget=str(budget.ledger))
    assert caught.value.name == "budget"


def test_kmeans_charges_the_same_ledger(tmp_path, people):
    budget = Budget(epsilon=10.0, delta=1e-3, ledger=tmp_path / "population.json")
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=1, budget=budget)
    points = np.random.default_rng(0).normal(size=(300, 2))
    run = dpcomm.kmeans(points, k=3, iterations=2, countermeasure=SCRAMBLERS, seed=1, budget=budget)
    charges = budget.charges()
    assert [c.kind for c in charges] == ["aggregate", "kmeans"]
    assert (charges[1].epsilon, charges[1].delta) == (
        run.report.privacy.epsilon,
        run.report.privacy.delta,
    )
    assert "k = 3" in charges[1].query and "300 points" in charges[1].query


def test_a_cli_run_with_a_ledger(tmp_path, cli):
    ledger = tmp_path / "population.json"
    outcome = cli(*CLI_RUN, "--json", "--ledger", ledger, "--budget-epsilon", "4",
                  "--budget-delta", "1e-3")  # fmt: skip
    assert outcome.status == 0, outcome.err
    report = json.loads(outcome.out)["report"]["privacy"]
    document = json.loads(ledger.read_text())
    assert document["budget"] == {"epsilon": 4.0, "delta": 1e-3, "composition": "basic"}
    assert [(c["epsilon"], c["delta"]) for c in document["charges"]] == [
        (report["epsilon"], report["delta"])
    ]
    assert "charged ε" in outcome.err
    before = ledger.read_bytes()
    refused = cli(*CLI_RUN, "--ledger", ledger)  # ε ≈ 2.3 twice exceeds 4
    assert refused.status != 0 and "refused by the budget" in refused.err
    assert refused.err.count("\n") == 1 and ledger.read_bytes() == before
    shown = cli("budget", "--ledger", ledger, "--json")
    assert shown.status == 0 and json.loads(shown.out)["spent"]["epsilon"] == report["epsilon"]


def _charge_many(path, count):
    budget = Budget(ledger=path)
    for index in range(count):
        budget.charge(epsilon=0.01, delta=0.0, kind="k", query=f"q{index}", method="m")


def test_concurrent_processes_charge_every_time(tmp_path):
    path = tmp_path / "population.json"
    Budget(epsilon=100.0, delta=0.0, ledger=path)
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_charge_many, args=(path, 10)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert len(Budget(ledger=path).charges()) == 40


def test_two_concurrent_cli_runs_charge_the_ledger_twice(tmp_path):
    ledger = tmp_path / "population.json"
    Budget(epsilon=10.0, delta=1e-3, ledger=ledger)
    command = [sys.executable, "-m", "dpcomm", *CLI_RUN, "--ledger", str(ledger)]
    runs = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
    assert len(Budget(ledger=ledger).charges()) == 2
