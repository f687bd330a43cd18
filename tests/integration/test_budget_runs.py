"""A budget across queries: run_sql, kmeans and ``dpcomm run --ledger`` charge one ledger.

The charge is the run's reported plan guarantee (a deployment's at its weakest batches), made
before the run; a run beyond the budget
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
    "run",
    "aggregate",
    "--sql",
    CLI_QUERY,
    "--mechanism",
    "scrambler",
    "--batch",
    "100",
    "--dummies",
    "50",
    "--sampling",
    "0.2",
    "--delta",
    "1e-4",
]  # fmt: skip (no seed: a ledger refuses a seed it already charged)


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
    assert charges[0].kind == "aggregate" and charges[0].query == QUERY
    assert budget.spent().charges == 2


def test_a_refused_query_leaves_the_ledger_byte_identical(tmp_path, people, monkeypatch):
    budget = Budget(epsilon=3.0, delta=1e-3, ledger=tmp_path / "population.json")
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=1, budget=budget)
    before = budget.ledger.read_bytes()

    def never(*args, **kwargs):
        raise AssertionError("a refused query must not run")

    monkeypatch.setattr("dpcomm.pipeline.runs.run_aggregate", never)
    with pytest.raises(BudgetExceededError, match="nothing ran"):
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=2, budget=budget)
    assert budget.ledger.read_bytes() == before


def test_a_run_of_infinite_epsilon_is_refused(tmp_path, people):
    budget = Budget(epsilon=100.0, delta=0.5, ledger=tmp_path / "population.json")
    before = budget.ledger.read_bytes()
    with pytest.raises(BudgetExceededError, match="ε = inf"):
        dpcomm.run_sql(QUERY, people, countermeasure=dpcomm.NoCountermeasure(), budget=budget)
    assert budget.ledger.read_bytes() == before


def test_a_deployment_is_charged_before_it_runs_at_its_weakest_batches(tmp_path, monkeypatch):
    """Late sources can shrink a deployment's batches: it is charged for any batch it can run,
    before its round starts, and reports no more. Refused, nothing runs (the network engine
    over its in-memory transport: the same nodes as a TLS round)."""
    from dpcomm.engine.network.deploy import NetworkEngine
    from dpcomm.pipeline.charge import deployment_privacy

    people = datasets.synthetic(rows=60, seed=1)
    scramblers = dpcomm.Scramblers(sampling_rate=0.2, batch_size=20, num_dummies=5)
    network = NetworkEngine(transport="memory", timeout=60, idle_seconds=5)
    budget = Budget(epsilon=4.0, delta=1e-3, ledger=tmp_path / "population.json")
    run = dpcomm.run_sql(
        QUERY, people, countermeasure=scramblers, seed=1, engine=network, budget=budget
    )
    [charge] = budget.charges()
    worst = deployment_privacy(run.program.plan, scramblers, delta=1e-4).guarantee
    assert (charge.epsilon, charge.delta) == (worst.epsilon, worst.delta)
    assert run.report.privacy.epsilon < charge.epsilon  # every batch full: the plan's ε
    assert "every batch size a deployment can run" in charge.method
    before = budget.ledger.read_bytes()

    def never(*args, **kwargs):
        raise AssertionError("a refused deployment must not start")

    monkeypatch.setattr(NetworkEngine, "execute", never)
    with pytest.raises(BudgetExceededError, match="nothing ran"):
        dpcomm.run_sql(QUERY, people, countermeasure=scramblers, engine=network, budget=budget)
    assert budget.ledger.read_bytes() == before


def test_an_engine_object_of_unknown_kind_or_a_bad_budget_is_refused(tmp_path, people):
    budget = Budget(epsilon=100.0, delta=0.5, ledger=tmp_path / "population.json")

    class Elsewhere:
        name = "elsewhere"
        reads_row_sources = False

        def execute(self, program, countermeasures, **options):
            raise AssertionError("never runs")

        def baseline(self, program, *, seed=None):
            raise AssertionError("never runs")

    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, engine=Elsewhere(), budget=budget)
    assert caught.value.name == "engine"
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, budget=str(budget.ledger))
    assert caught.value.name == "budget"


def test_kmeans_charges_the_same_ledger(tmp_path, people):
    budget = Budget(epsilon=10.0, delta=1e-3, ledger=tmp_path / "population.json")
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=1, budget=budget)
    points = np.random.default_rng(0).normal(size=(300, 2))
    starts = [[-1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]  # public: a budget covers every source
    run = dpcomm.kmeans(
        points, k=3, iterations=2, countermeasure=SCRAMBLERS, seed=2, budget=budget,
        init_points=starts,
    )  # fmt: skip
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


def test_a_ledger_refuses_a_seed_it_already_charged(tmp_path, people, cli):
    """Two runs of one seed draw the same coins (the same redirections, the same dummies):
    their guarantees do not compose, so the second is refused before it runs."""
    budget = Budget(epsilon=10.0, delta=1e-3, ledger=tmp_path / "population.json")
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=7, budget=budget)
    before = budget.ledger.read_bytes()
    with pytest.raises(InvalidParameterError, match="seed"):
        dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=7, budget=budget)
    assert budget.ledger.read_bytes() == before
    assert [c.seed for c in budget.charges()] == [7]
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, seed=8, budget=budget)
    dpcomm.run_sql(QUERY, people, countermeasure=SCRAMBLERS, budget=budget)  # fresh entropy
    assert [c.seed for c in budget.charges()] == [7, 8, None]
    refused = cli(*CLI_RUN, "--seed", "8", "--ledger", budget.ledger)
    assert refused.status != 0 and "--seed" in refused.err and refused.err.count("\n") == 1
    shown = cli("budget", "--ledger", budget.ledger)
    assert shown.status == 0 and "seed:           7" in shown.out


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


def test_on_several_hosts_the_coordinator_charges_before_the_round(tmp_path, cli, monkeypatch):
    """`node run --role coordinator --ledger` charges before it starts the round (refused:
    nothing runs, the ledger byte for byte as it was); no other node takes a ledger."""
    from dpcomm.engine.network import launcher
    from dpcomm.engine.network.spec import DeploymentError

    out = tmp_path / "deployment"
    status, _, err = cli(
        "deploy", "configs", "--sql", "SELECT g1, COUNT(*) FROM t GROUP BY g1",
        "--synthetic", "20", "--targets", "3", "--mechanism", "scrambler", "--batch", "10",
        "--dummies", "5", "--sampling", "0.2", "--out", out,
    )  # fmt: skip
    assert status == 0, err

    def node(role, name, *more):
        pki = out / "pki"
        return cli(
            "node", "run", "--role", role, "--config", out / "configs" / f"{name}.json",
            "--ssl-certfile", pki / f"{name}.pem", "--ssl-keyfile", pki / f"{name}.key",
            "--ssl-ca-certfile", pki / "ca.pem", *more,
        )  # fmt: skip

    ledger = tmp_path / "population.json"
    Budget(epsilon=4.0, delta=1e-3, ledger=ledger)
    refused = node("scrambler", "scrambler-0-0", "--ledger", ledger)
    assert refused.status == 2 and "--role coordinator" in refused.err
    seen = []

    def round_stub(configs, credentials):
        seen.append(len(Budget(ledger=ledger).charges()))  # charged before the round
        raise DeploymentError("stub: the round is not run here")

    monkeypatch.setattr(launcher, "run_tls_group", round_stub)
    first = node("coordinator", "coordinator", "--ledger", ledger, "--delta", "1e-5")
    assert seen == [1] and "charged ε" in first.err and "stub" in first.err
    [charge] = Budget(ledger=ledger).charges()
    assert charge.delta == 1e-5 and "(round " in charge.query
    before = ledger.read_bytes()
    second = node("coordinator", "coordinator", "--ledger", ledger)  # 2 × ε ≈ 2.5 > 4
    assert second.status != 0 and "refused by the budget" in second.err and seen == [1]
    assert ledger.read_bytes() == before


def test_a_charge_records_the_query_as_written_and_the_delta_it_uses(tmp_path, people):
    """Local flooding is pure (Theorem 1) and a Laplace release too: δ = 0 is charged, though
    the run reports its guarantee at δ = 1e-4; a budget of δ = 0 admits it."""
    budget = Budget(epsilon=10.0, delta=0.0, ledger=tmp_path / "population.json")
    sql = "SELECT g1, AVG(m1) AS mean FROM people WHERE g2 > 0 GROUP BY g1"
    local = dpcomm.LocalFlooding(sampling_rate=0.5, num_dummies=2)
    run = dpcomm.run_sql(
        sql, people, countermeasure=local, num_targets=4, seed=1, budget=budget,
        release=dpcomm.Laplace(epsilon=1.0), bounds={"m1": (0, 10)},
        keys={"g1": list(range(10))},
    )  # fmt: skip
    [charge] = budget.charges()
    assert charge.query == sql and charge.engine == "memory" and charge.delta == 0.0
    assert run.report.release.composed_delta == 1e-4
    assert run.report.release.epsilon_total <= charge.epsilon
    assert charge.countermeasure == {
        "mechanism": "local",
        "sampling_rate": 0.5,
        "batch_size": None,
        "num_dummies": 2,
        "capped": False,
    }
    assert charge.release["mechanism"] == "laplace" and charge.release["epsilon"] == 1.0
    assert charge.release["bounds"] == {"m1": [0.0, 10.0]}
    assert charge.release["keys"]["g1"] == [str(v) for v in range(10)]
    assert "theorem-1" in charge.method and "laplace release" in charge.method


def test_a_calibration_at_delta_zero_runs_and_is_charged_pure(tmp_path, people):
    sql = "SELECT g1, COUNT(*) AS n FROM people GROUP BY g1"
    keys = {"g1": list(range(20))}
    plan = dpcomm.calibrate(sql, people, epsilon=1.0, delta=0.0, release="laplace", keys=keys)
    assert plan.delta == 0.0 and plan.split.composition.delta == 0.0
    budget = Budget(epsilon=1.0, delta=0.0, ledger=tmp_path / "population.json")
    run = dpcomm.run_sql(sql, people, countermeasure=plan, budget=budget, seed=1)
    [charge] = budget.charges()
    assert (charge.epsilon, charge.delta) == (run.report.release.epsilon_total, 0.0)
    assert charge.epsilon <= 1.0
    assert run.report.privacy.delta == 0.0
    with pytest.raises(InvalidParameterError) as caught:
        dpcomm.calibrate(sql, people, epsilon=1.0, delta=0.0, release="gaussian")
    assert caught.value.name == "delta" and "never pure" in str(caught.value)


def test_the_cli_shows_what_was_charged_and_refuses_an_edited_ledger(tmp_path, cli):
    ledger = tmp_path / "population.json"
    sql = "SELECT g1, COUNT(*) AS n FROM t WHERE g2 > 1 GROUP BY g1"
    run = [
        "run", "aggregate", "--synthetic", "300", "--sql", sql, "--targets", "4",
        "--mechanism", "local", "--sampling", "0.5", "--dummies", "2", "--release", "laplace",
        "--release-epsilon", "1", "--keys", "g1=0,1,2,3,4", "--seed", "1", "--ledger", ledger,
    ]  # fmt: skip
    first = cli(*run, "--budget-epsilon", "3", "--budget-delta", "0")
    assert first.status == 0, first.err
    assert "δ = 0;" in first.err  # charged δ = 0 (pure traffic, Laplace release)
    shown = cli("budget", "--ledger", ledger)
    assert shown.status == 0, shown.err
    for text in (
        f"query:          {sql}",
        "countermeasure: local sampling σ=0.5, flooding d=2",
        "release:        laplace ε2 = 1, δ2 = 0; keys g1 (5 values)",
        "aggregate on memory",
        "method:         theorem-2(",
    ):
        assert text in shown.out, shown.out
    # Someone raises the budget's ε from 3 to 100 in an editor: refused in one line.
    document = json.loads(ledger.read_text())
    document["budget"]["epsilon"] = 100.0
    ledger.write_text(json.dumps(document, indent=2))
    edited = ledger.read_bytes()
    for refused in (cli(*run), cli("budget", "--ledger", ledger)):
        assert refused.status != 0 and refused.err.count("\n") == 1
        assert str(ledger) in refused.err and "--accept-edits" in refused.err
    assert ledger.read_bytes() == edited
    accepted = cli("budget", "--ledger", ledger, "--accept-edits", "--json")
    assert accepted.status == 0, accepted.err
    assert json.loads(accepted.out)["budget"]["epsilon"] == 100.0
    assert "accepted ledger" in accepted.err
    again = cli(*run[:-4], "--seed", "2", "--ledger", ledger)  # a seed not charged yet
    assert again.status == 0, again.err
    assert len(Budget(ledger=ledger).charges()) == 2
