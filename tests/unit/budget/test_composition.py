"""The basic composition filter: exact sums, never admitting by a rounding error."""

import math
from fractions import Fraction

from dpcomm.budget.composition import admits, exact_sum, spent


def test_a_charge_that_fits_exactly_is_admitted():
    assert admits((1.0, 1e-5), [(0.5, 5e-6)], (0.5, 5e-6))


def test_a_charge_beyond_epsilon_or_delta_is_refused():
    assert not admits((1.0, 1e-5), [(0.5, 0.0)], (math.nextafter(0.5, 1.0), 0.0))
    assert not admits((1.0, 1e-5), [(0.0, 1e-5)], (0.0, 1e-12))


def test_rounding_never_admits_a_charge():
    # 0.1 + 0.2 > 0.3 exactly (as floats' exact values): refused, though 0.1 + 0.2 == 0.3 is
    # False in floats too, the exact sum decides.
    assert not admits((0.3, 0.0), [(0.1, 0.0)], (0.2, 0.0))
    total = 0.1 + 0.2
    assert admits((total, 0.0), [(0.1, 0.0)], (0.2, 0.0)) == (
        Fraction(0.1) + Fraction(0.2) <= Fraction(total)
    )


def test_infinite_or_nan_charges_are_never_admitted():
    assert not admits((1e300, 0.5), [], (math.inf, 0.0))
    assert not admits((1e300, 0.5), [], (math.nan, 0.0))


def test_spent_is_rounded_up():
    result = spent([(0.1, 0.0)] * 3)
    assert Fraction(result.epsilon) >= exact_sum([0.1] * 3)
    assert result.charges == 3 and result.delta == 0.0
