"""``account`` runs the valid methods by default; printed formulas and Monte Carlo on request."""

import pytest

from dpcomm.accounting import ScramblerMechanism, account
from dpcomm.errors import InvalidParameterError

UNCAPPED = ScramblerMechanism(num_targets=20, sampling_rate=0.2, batch_size=30, num_dummies=10)
CAPPED = ScramblerMechanism(
    num_targets=20, sampling_rate=0.5, batch_size=30, num_dummies=10, capped=True
)


@pytest.mark.parametrize("mechanism", [UNCAPPED, CAPPED])
def test_default_is_the_valid_methods_and_the_same_answer(mechanism):
    default = account(mechanism, delta=1e-4)
    every = account(mechanism, delta=1e-4, all_methods=True, monte_carlo_samples=50)
    assert {r.status for r in default.methods} == {"valid"}
    assert "printed" in {r.status for r in every.methods}
    assert default.guarantee == every.guarantee
    assert default.lower_bound == every.lower_bound
    valid = {r.name: r.value for r in every.methods if r.status == "valid"}
    assert {r.name: r.value for r in default.methods} == valid


def test_monte_carlo_only_when_asked():
    assert account(UNCAPPED, delta=1e-4).method_values()["monte-carlo"] is None
    report = account(UNCAPPED, delta=1e-4, monte_carlo_samples=50)
    statuses = {r.name: r.status for r in report.methods}
    assert statuses["monte-carlo"] == statuses["monte-carlo-upper"] == "estimate"
    assert "bennett-printed" not in statuses
    assert report.guarantee.method == "exact"


def test_all_methods_must_be_a_bool():
    with pytest.raises(InvalidParameterError, match="all_methods"):
        account(UNCAPPED, delta=1e-4, all_methods="yes")
