"""Validators shared by the accounting layer; each raises InvalidParameterError."""

from __future__ import annotations

import math
import numbers

import numpy as np

from dpcomm.errors import InvalidParameterError


def _finite_number(name: str, value: object, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(name, allowed, value)
    as_float = float(value)
    if not math.isfinite(as_float):
        raise InvalidParameterError(name, allowed, value)
    return as_float


#: Smallest positive sampling rate accepted: below it scipy's binomial functions overflow,
#: and such a rate is indistinguishable from 0 in any deployment.
MIN_POSITIVE_RATE = 1e-12


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1] (0, or at least 1e-12)."""
    allowed = "a number in [0, 1] (0, or at least 1e-12)"
    as_float = _finite_number(name, value, allowed)
    if not 0.0 <= as_float <= 1.0 or 0.0 < as_float < MIN_POSITIVE_RATE:
        raise InvalidParameterError(name, allowed, value)
    return as_float


def check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int in [minimum, maximum]."""
    allowed = (
        f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InvalidParameterError(name, allowed, value)
    as_int = int(value)
    if as_int < minimum or (maximum is not None and as_int > maximum):
        raise InvalidParameterError(name, allowed, value)
    return as_int


def check_delta(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1)."""
    allowed = "a number in [0, 1)"
    as_float = _finite_number(name, value, allowed)
    if not 0.0 <= as_float < 1.0:
        raise InvalidParameterError(name, allowed, value)
    return as_float


def check_epsilon(name: str, value: object) -> float:
    """Return ``value`` as a finite float >= 0."""
    allowed = "a finite number >= 0"
    as_float = _finite_number(name, value, allowed)
    if as_float < 0.0:
        raise InvalidParameterError(name, allowed, value)
    return as_float


def make_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """A numpy Generator from a Generator, a seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)
