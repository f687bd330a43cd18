"""A budget's ledger: the charges never exceed it, and a refused charge changes no byte."""

import tempfile
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings, strategies as st

from dpcomm.budget import Budget, BudgetExceededError

epsilons = st.floats(min_value=0.0, max_value=10.0, allow_nan=False) | st.just(float("inf"))
deltas = st.floats(min_value=0.0, max_value=1e-3)


@settings(max_examples=60, deadline=None)
@given(
    budget_epsilon=st.floats(min_value=0.0, max_value=10.0),
    budget_delta=st.floats(min_value=0.0, max_value=1e-3),
    charges=st.lists(st.tuples(epsilons, deltas), max_size=12),
)
def test_charges_never_exceed_the_budget(budget_epsilon, budget_delta, charges):
    with tempfile.TemporaryDirectory() as folder:
        budget = Budget(epsilon=budget_epsilon, delta=budget_delta, ledger=Path(folder) / "l")
        admitted = []
        for epsilon, delta in charges:
            before = budget.ledger.read_bytes()
            try:
                budget.charge(epsilon=epsilon, delta=delta, kind="k", query="q", method="m")
            except BudgetExceededError:
                assert budget.ledger.read_bytes() == before
            else:
                admitted.append((epsilon, delta))
            stored = [(c.epsilon, c.delta) for c in budget.charges()]
            assert stored == admitted
            assert sum(Fraction(e) for e, _ in stored) <= Fraction(budget_epsilon)
            assert sum(Fraction(d) for _, d in stored) <= Fraction(budget_delta)
        # A charge is refused only when it would not fit (the filter is not stricter).
        left_epsilon, left_delta = budget.remaining()
        assert left_epsilon >= 0.0 and left_delta >= 0.0
