"""A Budget: creating and opening a ledger, charging it, refusing what does not fit."""

import json
import math
import pickle

import pytest

import dpcomm
from dpcomm.budget import Budget, BudgetExceededError, LedgerError
from dpcomm.errors import InvalidParameterError


def charge(budget, epsilon, delta=0.0):
    return budget.charge(epsilon=epsilon, delta=delta, kind="aggregate", query="q", method="m")


def test_the_front_door_exports_it():
    assert dpcomm.Budget is Budget and dpcomm.BudgetExceededError is BudgetExceededError


def test_creating_then_opening(tmp_path):
    path = tmp_path / "l.json"
    created = Budget(epsilon=2.0, delta=1e-5, ledger=path)
    opened = Budget(ledger=str(path))
    assert (opened.epsilon, opened.delta, opened.ledger) == (2.0, 1e-5, path)
    assert created == opened and "ledger=" in repr(opened)
    assert Budget(epsilon=2, delta=1e-5, ledger=path) == created  # the same budget


def test_another_budget_on_an_existing_ledger_is_refused(tmp_path):
    path = tmp_path / "l.json"
    Budget(epsilon=2.0, delta=1e-5, ledger=path)
    before = path.read_bytes()
    with pytest.raises(InvalidParameterError, match="holds") as caught:
        Budget(epsilon=3.0, delta=1e-5, ledger=path)
    assert caught.value.name == "epsilon and delta"
    assert path.read_bytes() == before


def test_opening_a_missing_ledger_says_how_to_create_it(tmp_path):
    with pytest.raises(LedgerError, match="give a budget"):
        Budget(ledger=tmp_path / "missing.json")
    assert not (tmp_path / "missing.json").exists()


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ({"epsilon": -1.0, "delta": 0.0}, "epsilon"),
        ({"epsilon": math.inf, "delta": 0.0}, "epsilon"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0}, "delta"),
        ({"delta": 0.0}, "epsilon"),
    ],
)
def test_invalid_budgets_name_their_parameter(tmp_path, arguments, name):
    with pytest.raises(InvalidParameterError) as caught:
        Budget(**arguments, ledger=tmp_path / "l.json")
    assert caught.value.name == name


@pytest.mark.parametrize("ledger", ["", 3, None])
def test_invalid_ledger_paths(ledger):
    with pytest.raises(InvalidParameterError) as caught:
        Budget(epsilon=1.0, delta=0.0, ledger=ledger)
    assert caught.value.name == "ledger"


def test_a_directory_or_a_missing_directory_is_not_a_ledger(tmp_path):
    for ledger in (tmp_path, tmp_path / "no" / "l.json"):
        with pytest.raises(InvalidParameterError, match="ledger"):
            Budget(epsilon=1.0, delta=0.0, ledger=ledger)


def test_charges_add_up_until_the_budget(tmp_path):
    budget = Budget(epsilon=1.0, delta=1e-5, ledger=tmp_path / "l.json")
    charge(budget, 0.5, 5e-6)
    charge(budget, 0.5, 5e-6)
    assert budget.remaining() == (0.0, 0.0)
    before = budget.ledger.read_bytes()
    with pytest.raises(BudgetExceededError, match="exceeds the budget") as caught:
        charge(budget, 1e-9)
    assert budget.ledger.read_bytes() == before
    assert caught.value.spent.charges == 2 and "\n" not in str(caught.value)
    assert [c.epsilon for c in budget.charges()] == [0.5, 0.5]


def test_an_infinite_epsilon_is_refused(tmp_path):
    budget = Budget(epsilon=1e6, delta=0.5, ledger=tmp_path / "l.json")
    before = budget.ledger.read_bytes()
    with pytest.raises(BudgetExceededError, match="ε = inf"):
        charge(budget, math.inf, 1e-4)
    assert budget.ledger.read_bytes() == before


def test_a_charge_must_be_numbers(tmp_path):
    budget = Budget(epsilon=1.0, delta=0.5, ledger=tmp_path / "l.json")
    for epsilon, delta in ((math.nan, 0.0), (-1.0, 0.0), (0.1, 2.0), ("1", 0.0)):
        with pytest.raises(InvalidParameterError):
            charge(budget, epsilon, delta)


def test_a_budget_changed_under_it_is_an_error(tmp_path):
    path = tmp_path / "l.json"
    budget = Budget(epsilon=1.0, delta=0.0, ledger=path)
    path.unlink()
    Budget(epsilon=5.0, delta=0.0, ledger=path)
    with pytest.raises(LedgerError, match="changed"):
        charge(budget, 0.5)


def test_the_error_pickles(tmp_path):
    budget = Budget(epsilon=1.0, delta=0.0, ledger=tmp_path / "l.json")
    with pytest.raises(BudgetExceededError) as caught:
        charge(budget, 2.0)
    again = pickle.loads(pickle.dumps(caught.value))
    assert str(again) == str(caught.value) and again.epsilon == 2.0


def _raise_budget(path, epsilon):
    """Edit the ledger as someone with an editor would: its budget's ε."""
    document = json.loads(path.read_text())
    document["budget"]["epsilon"] = epsilon
    path.write_text(json.dumps(document, indent=2))


def test_a_hand_edited_budget_is_refused_until_its_edits_are_accepted(tmp_path):
    path = tmp_path / "l.json"
    budget = Budget(epsilon=1.0, delta=1e-5, ledger=path)
    charge(budget, 0.5)
    _raise_budget(path, 100.0)
    edited = path.read_bytes()
    for opening in (lambda: Budget(ledger=path), lambda: charge(budget, 0.1)):
        with pytest.raises(LedgerError, match="edited by hand") as caught:
            opening()
        assert "\n" not in str(caught.value) and str(path) in str(caught.value)
        assert "--accept-edits" in str(caught.value)
    assert path.read_bytes() == edited  # nothing written
    with pytest.raises(InvalidParameterError) as caught:
        Budget(epsilon=1.0, delta=1e-5, ledger=path, accept_edits=True)  # not what it holds now
    assert caught.value.name == "epsilon and delta" and path.read_bytes() == edited
    accepted = Budget(ledger=path, accept_edits=True)
    assert accepted.epsilon == 100.0 and Budget(ledger=path).spent().epsilon == 0.5
    with pytest.raises(InvalidParameterError) as caught:
        Budget(ledger=path, accept_edits="yes")
    assert caught.value.name == "accept_edits"


def test_a_charge_records_what_it_was_for(tmp_path):
    budget = Budget(epsilon=3.0, delta=1e-5, ledger=tmp_path / "l.json")
    countermeasure = {"mechanism": "local", "sampling_rate": 0.1, "batch_size": None,
                      "num_dummies": 2, "capped": False}  # fmt: skip
    release = {"mechanism": "laplace", "epsilon": 1.0, "delta": 0.0, "bounds": {"x": [0, 1]},
               "keys": {}, "key_selection_delta": None}  # fmt: skip
    made = budget.charge(
        epsilon=1.5, delta=0.0, kind="aggregate",
        query="SELECT a, SUM(x) FROM t WHERE b GROUP BY a",
        method="theorem-2(theorem-1)", countermeasure=countermeasure, release=release,
        engine="memory",
    )  # fmt: skip
    [stored] = Budget(ledger=budget.ledger).charges()
    assert stored == made
    assert (stored.countermeasure, stored.release, stored.engine) == (
        countermeasure,
        release,
        "memory",
    )


def test_a_ledger_with_two_hard_links_is_refused(tmp_path):
    """Each name would lock its own sidecar and be replaced by its own file: a fork."""
    path = tmp_path / "population.json"
    Budget(epsilon=1.0, delta=0.0, ledger=path).charge(
        epsilon=0.5, delta=0.0, kind="k", query="q", method="m"
    )
    alias = tmp_path / "alias.json"
    alias.hardlink_to(path)
    before = path.read_bytes()
    for name in (path, alias):
        with pytest.raises(LedgerError, match="2 hard links") as error:
            Budget(ledger=name).charge(epsilon=0.5, delta=0.0, kind="k", query="q", method="m")
        assert "\n" not in str(error.value)
    assert path.read_bytes() == before == alias.read_bytes()


def test_a_charge_records_its_seed_and_a_seed_is_charged_once(tmp_path):
    budget = Budget(epsilon=1.0, delta=0.0, ledger=tmp_path / "population.json")
    budget.charge(epsilon=0.1, delta=0.0, kind="k", query="q", method="m", seed=3)
    budget.charge(epsilon=0.1, delta=0.0, kind="k", query="q", method="m")
    with pytest.raises(InvalidParameterError, match="seed"):
        budget.charge(epsilon=0.1, delta=0.0, kind="k", query="q", method="m", seed=3)
    reread = Budget(ledger=budget.ledger).charges()
    assert [c.seed for c in reread] == [3, None]
    stored = json.loads(budget.ledger.read_text())["charges"]
    assert stored[0]["seed"] == 3 and "seed" not in stored[1]  # an unseeded charge as before
