"""The binomial distribution's ``pmf``, ``cdf`` and ``sf``, without importing scipy.stats.

The accountant needs these three functions only, and importing scipy.stats costs about a second
(it imports scipy.optimize, scipy.linalg, scipy.sparse, scipy.interpolate, ...), most of what a
``dpcomm account`` waits for. They are evaluated here by the very ufuncs ``scipy.stats.binom``
calls (Boost's, in ``scipy.special``), with ``rv_discrete``'s treatment of arguments outside
the support (0 or 1), invalid parameters (NaN) and non-integer ``k`` (``pmf`` 0; ``cdf`` and
``sf`` at ``floor(k)``): the values are ``scipy.stats.binom``'s to the bit
(``tests/unit/accounting/test_binomial.py`` checks it). Call them as ``binom.pmf(k, n, p)``
after ``from dpcomm.accounting import binomial as binom``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

#: numpy's submodules that scipy.special's import loads for nothing: it copies numpy's
#: namespace (``from numpy import *`` and every name of ``dir(numpy)``) into its array-API
#: shim, which imports these lazy submodules (about 0.1 s of a ``dpcomm account``).
_IDLE_SUBMODULES = frozenset({"f2py", "testing"})


@contextlib.contextmanager
def _numpy_namespace_without_idle_submodules() -> Iterator[None]:
    """While scipy.special imports: numpy's ``__all__`` and ``dir()`` without the idle tools.

    Only the shim's copy of numpy's namespace lacks them (nothing calls ``xp.f2py`` or
    ``xp.testing``); numpy itself is restored as it was, and ``numpy.f2py`` and
    ``numpy.testing`` import as before when asked for.
    """
    names, listing = np.__all__, np.__dir__
    if any(f"numpy.{name}" in sys.modules for name in _IDLE_SUBMODULES):
        yield  # already imported: nothing to save
        return
    np.__all__ = [name for name in names if name not in _IDLE_SUBMODULES]
    np.__dir__ = lambda: [name for name in listing() if name not in _IDLE_SUBMODULES]  # type: ignore[method-assign]
    try:
        yield
    finally:
        np.__all__, np.__dir__ = names, listing  # type: ignore[method-assign]


with _numpy_namespace_without_idle_submodules():
    try:  # scipy.stats.binom's own evaluators (private names of scipy.special, tests check them)
        from scipy.special._ufuncs import _binom_cdf, _binom_pmf, _binom_sf
    except ImportError:  # a scipy that renamed them: scipy.stats.binom itself (slower to import)
        from scipy.stats import binom as _binom

        _binom_pmf, _binom_cdf, _binom_sf = _binom.pmf, _binom.cdf, _binom.sf

Values = Any  # an array of the broadcast shape, or a NumPy scalar for scalar arguments


def _arguments(
    k: npt.ArrayLike, n: npt.ArrayLike, p: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``k``, ``n``, ``p`` broadcast together, and where the parameters are valid."""
    k_, n_, p_ = np.asarray(k), np.asarray(n), np.asarray(p)
    valid = (n_ >= 0) & (n_ == np.round(n_)) & (p_ >= 0) & (p_ <= 1)
    k_, n_, p_, valid = np.broadcast_arrays(k_, n_, p_, valid)
    return k_, n_, p_, valid


def _result(output: np.ndarray) -> Values:
    return output[()] if output.ndim == 0 else output


def pmf(k: npt.ArrayLike, n: npt.ArrayLike, p: npt.ArrayLike) -> Values:
    """P(X = k) for X ~ Binomial(n, p), as ``scipy.stats.binom.pmf``."""
    k_, n_, p_, valid = _arguments(k, n, p)
    inside = valid & (k_ >= 0) & (k_ <= n_) & (np.floor(k_) == k_)
    output = np.zeros(k_.shape)
    output[~valid | np.isnan(k_)] = np.nan
    if inside.any():
        output[inside] = np.clip(_binom_pmf(k_[inside], n_[inside], p_[inside]), 0, 1)
    return _result(output)


def cdf(k: npt.ArrayLike, n: npt.ArrayLike, p: npt.ArrayLike) -> Values:
    """P(X <= k) for X ~ Binomial(n, p), as ``scipy.stats.binom.cdf``."""
    k_, n_, p_, valid = _arguments(k, n, p)
    inside = valid & (k_ >= 0) & (k_ < n_) & np.isfinite(k_)
    output = np.zeros(k_.shape)
    output[k_ >= n_] = 1.0
    output[np.isneginf(k_)] = 0.0
    output[~valid | np.isnan(k_)] = np.nan
    if inside.any():
        values = _binom_cdf(np.floor(k_[inside]), n_[inside], p_[inside])
        output[inside] = np.clip(values, 0, 1)
    return _result(output)


def sf(k: npt.ArrayLike, n: npt.ArrayLike, p: npt.ArrayLike) -> Values:
    """P(X > k) for X ~ Binomial(n, p), as ``scipy.stats.binom.sf``."""
    k_, n_, p_, valid = _arguments(k, n, p)
    inside = valid & (k_ >= 0) & (k_ < n_) & np.isfinite(k_)
    output = np.zeros(k_.shape)
    output[~valid | np.isnan(k_)] = np.nan
    output[((k_ < 0) | np.isneginf(k_)) & valid] = 1.0
    if inside.any():
        values = _binom_sf(np.floor(k_[inside]), n_[inside], p_[inside])
        output[inside] = np.clip(values, 0, 1)
    return _result(output)
