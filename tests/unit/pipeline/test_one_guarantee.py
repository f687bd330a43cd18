"""A run's guarantee is computed once: counted calls of the accountant, composition, transform."""

import sys
from collections import Counter

import pytest

import dpcomm
from dpcomm import datasets

SQL = "SELECT g1, COUNT(*) AS c FROM people GROUP BY g1"
SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=5)


@pytest.fixture
def calls(monkeypatch):
    """Every dpcomm module's reference to the functions counted, wrapped to count its calls."""
    import importlib

    import dpcomm.api
    import dpcomm.engine.network.deploy
    import dpcomm.pipeline.charge
    import dpcomm.pipeline.runs  # noqa: F401
    from dpcomm.plan import privacy

    transform = importlib.import_module("dpcomm.plan.transform")
    from dpcomm.release import compose

    counted = Counter()
    originals = {
        "account_plan": privacy.account_plan,
        "compose_release": compose.compose_release,
        "transform": transform.transform,
    }

    def counting(name, function):
        def wrapper(*args, **kwargs):
            counted[name] += 1
            return function(*args, **kwargs)

        return wrapper

    wrappers = {name: counting(name, f) for name, f in originals.items()}
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("dpcomm"):
            continue
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, wrappers[name])
    return counted


def test_a_memory_run_with_release_target_and_budget_accounts_and_composes_once(calls, tmp_path):
    budget = dpcomm.Budget(epsilon=100.0, delta=1e-2, ledger=tmp_path / "ledger.json")
    run = dpcomm.run_sql(
        SQL,
        datasets.synthetic(rows=600, seed=1),
        countermeasure=SCRAMBLERS,
        num_targets=3,
        seed=1,
        release=dpcomm.Laplace(epsilon=1.0),
        keys={"g1": list(range(10))},
        target_epsilon=50.0,
        budget=budget,
    )
    assert run.report.release is not None
    assert calls["account_plan"] == 1
    assert calls["compose_release"] == 1
    assert calls["transform"] == 2  # the run's plan, and its baseline's (no countermeasure)


def test_a_network_run_transforms_its_plan_at_most_twice_in_the_driver(calls):
    run = dpcomm.run_sql(
        SQL,
        datasets.synthetic(rows=200, seed=1),
        countermeasure=SCRAMBLERS,
        num_targets=3,
        seed=1,
        engine=dpcomm.engine.make_engine("network", transport="memory"),
    )
    assert run.report.privacy.epsilon > 0
    assert calls["transform"] <= 2
    assert calls["account_plan"] == 1
