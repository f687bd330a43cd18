"""Reference float sums and means, from Fractions (compared by tests.conftest.canonical)."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from fractions import Fraction

#: NaNs other than math.nan: negative, and with a payload.
NEGATIVE_NAN = struct.unpack(">d", bytes.fromhex("fff8000000000000"))[0]
PAYLOAD_NAN = struct.unpack(">d", bytes.fromhex("7ff8000000000123"))[0]


def is_negative_zero(value: float) -> bool:
    return value == 0 and math.copysign(1.0, value) < 0


def _nearest(exact: Fraction) -> float:
    """``exact`` rounded once to the nearest double (ties to even); beyond the range: ±inf."""
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _special(values: Sequence[float]) -> float | None:
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values:
        return math.inf
    if -math.inf in values:
        return -math.inf
    return None


def reference_sum(values: Sequence[float]) -> float | None:
    """The exact sum rounded once; NaN/inf as IEEE; -0.0 iff every value is -0.0."""
    if not values:
        return None
    special = _special(values)
    if special is not None:
        return special
    exact = sum((Fraction(v) for v in values), Fraction(0))
    if exact == 0:
        return -0.0 if all(is_negative_zero(v) for v in values) else 0.0
    return _nearest(exact)


def reference_mean(values: Sequence[float]) -> float | None:
    """The exact sum divided by the count, rounded once."""
    if not values:
        return None
    special = _special(values)
    if special is not None:
        return special
    exact = sum((Fraction(v) for v in values), Fraction(0))
    if exact == 0:
        return -0.0 if all(is_negative_zero(v) for v in values) else 0.0
    return _nearest(exact / len(values))


def loose(value: object) -> object:
    """A value for ``==`` comparison where NaN equals NaN (0.0 == -0.0 as ``==`` says)."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, tuple):
        return tuple(loose(v) for v in value)
    if isinstance(value, dict):
        return {k: loose(v) for k, v in value.items()}
    if isinstance(value, list):
        return [loose(v) for v in value]
    return value
