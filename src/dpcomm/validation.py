"""The parameter checks of every package (layer 0): each returns the value or raises.

Every check raises `dpcomm.errors.InvalidParameterError` with a one-line message naming
the parameter, what is allowed and the value given. Seeds are checked in one place,
`check_seed`, so that the same bad seed gets the same message wherever it is given
(a run, a deployment, a synthetic table, a dataset split, the initial centroids of K-means).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from dpcomm.errors import InvalidParameterError

#: Smallest positive sampling rate accepted: below it scipy's binomial functions overflow,
#: and such a rate is indistinguishable from 0 in any deployment.
MIN_POSITIVE_RATE = 1e-12

#: Largest seed accepted: the randomness derivation encodes a seed on 16 bytes
#: (`dpcomm.protocol.randomness`).
MAX_SEED = (1 << 127) - 1

#: What `check_seed` accepts, as its message says it.
SEED_ALLOWED = "an integer in [0, 2^127 - 1]"

#: Largest count of nodes or clusters of one kind a plan may have (targets T of a cluster,
#: K-means' iterations I, grouping sets G; the CLI's count options too): far beyond any
#: deployment, and small enough that a per-node array of that many entries is megabytes (a
#: billion targets was an eight-gigabyte array per role, and the end of the process).
MAX_COUNT = 1_000_000

#: Largest number of sources S a plan may have (the planner's S, the rows of a synthetic table).
MAX_SOURCES = 1_000_000_000_000

#: Largest ε accepted as a target (``account(epsilon=...)``, the planner's ε): the bounds
#: compute e^ε and its square, finite doubles only below ε ≈ 354; and an (ε, δ) guarantee at
#: ε = 200 (e^200 ≈ 7·10^86) already says nothing about what an observer learns.
MAX_EPSILON = 200.0


def _finite_number(name: str, value: object, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(name, allowed, value)
    as_float = float(value)
    if not math.isfinite(as_float):
        raise InvalidParameterError(name, allowed, value)
    return as_float


def _integer(name: str, value: object, allowed: str) -> int:
    """``value`` as an int: an Integral (not a bool) or a float with an integral value."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise InvalidParameterError(name, allowed, value)
    return int(value)


def _allowed_range(
    above: float | None, at_least: float | None, below: float | None, at_most: float | None
) -> str:
    """``"a number in (0, 1]"``, ``"a finite number > 0"``, ... for the bounds given."""
    low, low_bracket, low_sign = (above, "(", ">") if above is not None else (at_least, "[", ">=")
    high, high_bracket, high_sign = (below, ")", "<") if below is not None else (at_most, "]", "<=")
    if low is not None and high is not None:
        return f"a number in {low_bracket}{low:g}, {high:g}{high_bracket}"
    if low is not None:
        return f"a finite number {low_sign} {low:g}"
    if high is not None:
        return f"a finite number {high_sign} {high:g}"
    return "a finite number"


def check_number(
    name: str,
    value: object,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
) -> float:
    """Return ``value`` as a finite float within the bounds given (none: any finite number).

    ``above``/``at_least`` is the lower bound, excluded/included; ``below``/``at_most`` the
    upper one. The message says the range: ``"a number in (0, 1]"``, ``"a finite number > 0"``.
    """
    if above is not None and at_least is not None:
        raise TypeError("check_number takes at most one of above and at_least")
    if below is not None and at_most is not None:
        raise TypeError("check_number takes at most one of below and at_most")
    allowed = _allowed_range(above, at_least, below, at_most)
    as_float = _finite_number(name, value, allowed)
    if (
        (above is not None and not as_float > above)
        or (at_least is not None and not as_float >= at_least)
        or (below is not None and not as_float < below)
        or (at_most is not None and not as_float <= at_most)
    ):
        raise InvalidParameterError(name, allowed, value)
    return as_float


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1] (0, or at least 1e-12)."""
    allowed = "a number in [0, 1] (0, or at least 1e-12)"
    as_float = _finite_number(name, value, allowed)
    if not 0.0 <= as_float <= 1.0 or 0.0 < as_float < MIN_POSITIVE_RATE:
        raise InvalidParameterError(name, allowed, value)
    return as_float


def check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int in [minimum, maximum] (an integral float is accepted)."""
    allowed = (
        f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
    )
    as_int = _integer(name, value, allowed)
    if as_int < minimum or (maximum is not None and as_int > maximum):
        raise InvalidParameterError(name, allowed, value)
    return as_int


def check_delta(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1)."""
    return check_number(name, value, at_least=0.0, below=1.0)


def check_epsilon(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, `MAX_EPSILON`]."""
    return check_number(name, value, at_least=0.0, at_most=MAX_EPSILON)


def check_seed(value: object, *, name: str = "seed") -> int:
    """Return ``value`` as a seed: an integer in [0, 2^127 − 1] (an integral float is accepted).

    The one seed check of dpcomm. Where a parameter also accepts None (fresh entropy) or a
    numpy Generator, the caller lets those through and checks everything else here.
    """
    as_int = _integer(name, value, SEED_ALLOWED)
    if not 0 <= as_int <= MAX_SEED:
        raise InvalidParameterError(name, SEED_ALLOWED, value)
    return as_int


def make_rng(rng: np.random.Generator | int | None, *, name: str = "rng") -> np.random.Generator:
    """A numpy Generator from a Generator, a seed (`check_seed`), or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    return np.random.default_rng(check_seed(rng, name=name))


def check_flag(name: str, value: object) -> bool:
    """``value`` if it is True or False (a truthy DataFrame is not)."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(name, "True or False", value)
    return bool(value)


def check_column_bounds(bounds: object, dimension: int) -> tuple[tuple[float, float], ...]:
    """``bounds``: one finite (lo, hi) with lo < hi per column (``dimension`` of them).

    A K-means release clamps each coordinate to them, and scaling maps them onto [0, 1].
    """
    allowed = f"{dimension} pairs (lo, hi) of finite numbers with lo < hi, one per column"
    if isinstance(bounds, Mapping) or not isinstance(bounds, Sequence):
        raise InvalidParameterError("bounds", allowed, bounds)
    pairs: list[tuple[float, float]] = []
    for pair in bounds:
        if not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidParameterError("bounds", allowed, bounds)
        low, high = pair
        are_numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in pair)
        if not are_numbers or not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise InvalidParameterError("bounds", allowed, bounds)
        pairs.append((float(low), float(high)))
    if len(pairs) != dimension:
        raise InvalidParameterError("bounds", allowed, f"{len(pairs)} pairs")
    return tuple(pairs)
