"""Synthetic Aggregate data of Section 5.1 of the paper.

The paper evaluates Aggregate queries on synthetic records "distributed across 20 grouping
intervals for 4 grouping attributes", with uniform and biased distributions. Here the grouping
attributes ``g1..gG`` are integer-coded intervals ``0..num_intervals-1``, drawn independently per
column, either uniformly or from a truncated Zipf law (the biased case). The paper does not say
what the aggregated values are; the measures ``m1..mM`` go beyond it: each depends on one grouping
column, so that group averages differ and utility errors (a tuple counted in the wrong group)
become visible in the results.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import Column, Table
from dpcomm.errors import InvalidParameterError

#: The grouping-value distributions :func:`synthetic_table` can draw from.
DISTRIBUTIONS: Final = ("uniform", "zipf")

#: Most values (rows × columns, 8 bytes each) of a synthetic table: 2.4 GB, 50 million rows of
#: the default six columns (the paper uses 10k to 100k rows).
MAX_SYNTHETIC_VALUES: Final = 300_000_000


def _check_int(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidParameterError(name, f"an integer >= {minimum}", value)
    return int(value)


def _check_seed(value: object) -> int | np.random.Generator | None:
    if value is None or isinstance(value, np.random.Generator):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidParameterError("seed", "a non-negative integer, a Generator or None", value)
    return int(value)


def zipf_probabilities(*, num_intervals: int, exponent: float) -> npt.NDArray[np.float64]:
    """Truncated Zipf law over ``num_intervals`` ranks: p_k ∝ 1/(k+1)^exponent, k = 0, 1, ..."""
    ranks = np.arange(1, num_intervals + 1, dtype=np.float64)
    weights = ranks ** (-float(exponent))
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def _draw_intervals(
    rng: np.random.Generator,
    *,
    num_rows: int,
    num_intervals: int,
    probabilities: npt.NDArray[np.float64] | None,
) -> npt.NDArray[np.int64]:
    if probabilities is None:
        return rng.integers(0, num_intervals, size=num_rows, dtype=np.int64)
    # Each column ranks the intervals differently, so the biases differ across columns.
    ranking = rng.permutation(num_intervals).astype(np.int64)
    cumulative = np.cumsum(probabilities)
    cumulative[-1] = 1.0
    ranks = np.searchsorted(cumulative, rng.random(num_rows), side="right")
    return ranking[ranks]  # u < 1 = cumulative[-1], so ranks <= num_intervals - 1


def _draw_measure(
    rng: np.random.Generator,
    index: int,
    group: npt.NDArray[np.int64],
    num_intervals: int,
) -> npt.NDArray[np.float64]:
    """Measure ``m{index+1}``: its mean grows with the interval of the grouping column it follows.

    Even indices are normal, N(50 + 50·g/(K-1), 10²); odd ones are lognormal, with a median
    from 20 to 60 across the K intervals and log-scale deviation 0.5 (a skewed, positive value).
    """
    position = np.arange(num_intervals, dtype=np.float64) / max(num_intervals - 1, 1)
    values = rng.standard_normal(len(group))
    if index % 2 == 0:
        values *= 10.0
        values += (50.0 + 50.0 * position)[group]
        return values
    values *= 0.5
    values += (math.log(20.0) + math.log(3.0) * position)[group]
    np.exp(values, out=values)
    return values


def synthetic_table(
    *,
    num_rows: int,
    distribution: str = "uniform",
    num_grouping_columns: int = 4,
    num_intervals: int = 20,
    num_measures: int = 2,
    zipf_exponent: float = 1.2,
    seed: int | np.random.Generator | None,
    name: str = "synthetic",
) -> Table:
    """A synthetic Aggregate table (Section 5.1): grouping columns ``g1..`` and measures ``m1..``.

    Args:
        num_rows: number of rows, i.e. of source nodes (the paper uses 10k to 100k).
        distribution: ``'uniform'`` (every interval equally likely) or ``'zipf'`` (the paper's
            biased case: a truncated Zipf law, see :func:`zipf_probabilities`, whose ranking
            of the intervals is a seeded permutation drawn independently per column).
        num_grouping_columns: number G of grouping columns ``g1..gG`` (the paper uses 4).
        num_intervals: number of intervals per grouping column (the paper uses 20); values
            are the interval indices ``0..num_intervals-1`` (BIGINT).
        num_measures: number M of DOUBLE measure columns ``m1..mM``; ``m_j`` depends on
            grouping column ``g_{((j-1) mod G)+1}`` (normal for odd j, lognormal for even j).
        zipf_exponent: exponent s of the Zipf law (used only by ``'zipf'``).
        seed: seed (or Generator) of ``numpy.random.default_rng``; same seed, same table.
        name: the table name.

    Raises:
        InvalidParameterError: a parameter is outside its range.
    """
    rows = _check_int("rows", num_rows, minimum=1)
    if distribution not in DISTRIBUTIONS:
        raise InvalidParameterError("distribution", "'uniform' or 'zipf'", distribution)
    num_groups = _check_int("num_grouping_columns", num_grouping_columns, minimum=1)
    intervals = _check_int("num_intervals", num_intervals, minimum=1)
    measures = _check_int("num_measures", num_measures, minimum=0)
    largest = MAX_SYNTHETIC_VALUES // (num_groups + measures)
    if rows > largest:
        raise InvalidParameterError(
            "rows", f"an integer in [1, {largest}] (the table must fit in memory)", num_rows
        )
    if (
        isinstance(zipf_exponent, bool)
        or not isinstance(zipf_exponent, numbers.Real)
        or not math.isfinite(float(zipf_exponent))
        or zipf_exponent <= 0
    ):
        raise InvalidParameterError("zipf_exponent", "a finite number > 0", zipf_exponent)
    rng = np.random.default_rng(_check_seed(seed))
    probabilities = (
        zipf_probabilities(num_intervals=intervals, exponent=float(zipf_exponent))
        if distribution == "zipf"
        else None
    )
    columns: list[Column] = []
    groups: list[npt.NDArray[np.int64]] = []
    for index in range(num_groups):
        group = _draw_intervals(
            rng, num_rows=rows, num_intervals=intervals, probabilities=probabilities
        )
        groups.append(group)
        columns.append(_column(f"g{index + 1}", "BIGINT", group))
    for index in range(measures):
        values = _draw_measure(rng, index, groups[index % num_groups], intervals)
        columns.append(_column(f"m{index + 1}", "DOUBLE", values))
    return Table(name, tuple(columns))


def _column(name: str, sql_type: str, values: npt.NDArray[Any]) -> Column:
    """A column without NULLs, built without copying ``values`` (10M rows stay cheap)."""
    return Column(name, sql_type, values, np.zeros(len(values), dtype=np.bool_))
