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

import itertools
import math
import numbers
from collections.abc import Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field, fields
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import Column, Table, check_range, column_positions
from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_number, check_seed

#: The grouping-value distributions `synthetic_table` can draw from.
DISTRIBUTIONS: Final = ("uniform", "zipf")

#: Most values (rows × columns, 8 bytes each) of a synthetic table: 2.4 GB, 50 million rows of
#: the default six columns (the paper uses 10k to 100k rows).
MAX_SYNTHETIC_VALUES: Final = 300_000_000

#: Rows of one block: block b (rows b·BLOCK_ROWS to (b+1)·BLOCK_ROWS - 1) is drawn by its own
#: generator, seeded by (seed, b), so any range of rows is drawn without the rows before it.
BLOCK_ROWS: Final = 65_536


def _check_int(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidParameterError(name, f"an integer >= {minimum}", value)
    return int(value)


@dataclass(frozen=True)
class SyntheticShape:
    """The validated parameters of a synthetic table, less its rows and seed."""

    distribution: str
    num_grouping_columns: int
    num_intervals: int
    num_measures: int
    zipf_exponent: float

    @property
    def num_columns(self) -> int:
        """Number of columns: G grouping columns and M measures."""
        return self.num_grouping_columns + self.num_measures

    @property
    def max_rows(self) -> int:
        """Most rows one table (or one read range) may have: MAX_SYNTHETIC_VALUES values."""
        return MAX_SYNTHETIC_VALUES // self.num_columns

    @property
    def column_names(self) -> tuple[str, ...]:
        """``g1..gG`` then ``m1..mM``."""
        return tuple(f"g{i + 1}" for i in range(self.num_grouping_columns)) + tuple(
            f"m{i + 1}" for i in range(self.num_measures)
        )

    @property
    def sql_types(self) -> tuple[str, ...]:
        """BIGINT for the grouping columns, DOUBLE for the measures."""
        return ("BIGINT",) * self.num_grouping_columns + ("DOUBLE",) * self.num_measures


#: The parameters of a synthetic table that `check_shape` validates.
_SHAPE_FIELDS = tuple(f.name for f in fields(SyntheticShape))


def check_shape(
    *,
    distribution: object,
    num_grouping_columns: object,
    num_intervals: object,
    num_measures: object,
    zipf_exponent: object,
) -> SyntheticShape:
    """Validate the parameters of a synthetic table (see `synthetic_table`)."""
    if not isinstance(distribution, str) or distribution not in DISTRIBUTIONS:
        raise InvalidParameterError("distribution", "'uniform' or 'zipf'", distribution)
    num_groups = _check_int("num_grouping_columns", num_grouping_columns, minimum=1)
    intervals = _check_int("num_intervals", num_intervals, minimum=1)
    measures = _check_int("num_measures", num_measures, minimum=0)
    exponent = check_number("zipf_exponent", zipf_exponent, above=0.0)
    return SyntheticShape(str(distribution), num_groups, intervals, measures, exponent)


def zipf_probabilities(*, num_intervals: int, exponent: float) -> npt.NDArray[np.float64]:
    """Truncated Zipf law over ``num_intervals`` ranks: p_k ∝ 1/(k+1)^exponent, k = 0, 1, ..."""
    ranks = np.arange(1, num_intervals + 1, dtype=np.float64)
    weights = ranks ** (-float(exponent))
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def zipf_rankings(seed: int, shape: SyntheticShape) -> tuple[npt.NDArray[np.int64], ...]:
    """Per grouping column, the interval of each Zipf rank (rank 0 is the most likely).

    Drawn by their own generator (``SeedSequence(seed, spawn_key=(0,))``), apart from the
    blocks' generators, so that every block maps ranks to intervals the same way.
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
    return tuple(
        rng.permutation(shape.num_intervals).astype(np.int64)
        for _ in range(shape.num_grouping_columns)
    )


def block_generator(seed: int, block: int) -> np.random.Generator:
    """The generator of block ``block`` (rows ``block·BLOCK_ROWS`` on) of the table of ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, block)))


def fill_block(
    rng: np.random.Generator,
    shape: SyntheticShape,
    rankings: tuple[npt.NDArray[np.int64], ...] | None,
    groups: list[npt.NDArray[np.int64]],
    measures: list[npt.NDArray[np.float64]],
) -> None:
    """Draw one block's rows into ``groups`` (G arrays) and ``measures`` (M arrays) in place.

    The draws are made in column order from ``rng``: ``g1``, ..., ``gG``, then ``m1``, ...
    ``rankings`` is None for the uniform distribution.
    """
    cumulative = None
    if rankings is not None:
        cumulative = np.cumsum(
            zipf_probabilities(num_intervals=shape.num_intervals, exponent=shape.zipf_exponent)
        )
        cumulative[-1] = 1.0
    for index, group in enumerate(groups):
        if rankings is None or cumulative is None:
            group[:] = rng.integers(0, shape.num_intervals, size=len(group), dtype=np.int64)
            continue
        ranks = np.searchsorted(cumulative, rng.random(len(group)), side="right")
        # u < 1 = cumulative[-1], so every rank is at most num_intervals - 1.
        np.take(rankings[index], ranks, out=group)
    for index, measure in enumerate(measures):
        _draw_measure(rng, index, groups[index % len(groups)], shape.num_intervals, measure)


def _draw_measure(
    rng: np.random.Generator,
    index: int,
    group: npt.NDArray[np.int64],
    num_intervals: int,
    out: npt.NDArray[np.float64],
) -> None:
    """Measure ``m{index+1}``: its mean grows with the interval of the grouping column it follows.

    Even indices are normal, N(50 + 50·g/(K-1), 10²); odd ones are lognormal, with a median
    from 20 to 60 across the K intervals and log-scale deviation 0.5 (a skewed, positive value).
    """
    position = np.arange(num_intervals, dtype=np.float64) / max(num_intervals - 1, 1)
    rng.standard_normal(out=out)
    if index % 2 == 0:
        out *= 10.0
        out += (50.0 + 50.0 * position)[group]
        return
    out *= 0.5
    out += (math.log(20.0) + math.log(3.0) * position)[group]
    np.exp(out, out=out)


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

    The table is `dpcomm.data.partitioned.SyntheticRows` read whole: drawn per block of
    `BLOCK_ROWS` rows, each block by its own generator seeded by (seed, block index).

    Args:
        num_rows: number of rows, i.e. of source nodes (the paper uses 10k to 100k).
        distribution: ``'uniform'`` (every interval equally likely) or ``'zipf'`` (the paper's
            biased case: a truncated Zipf law, see `zipf_probabilities`, whose ranking
            of the intervals is a seeded permutation drawn independently per column).
        num_grouping_columns: number G of grouping columns ``g1..gG`` (the paper uses 4).
        num_intervals: number of intervals per grouping column (the paper uses 20); values
            are the interval indices ``0..num_intervals-1`` (BIGINT).
        num_measures: number M of DOUBLE measure columns ``m1..mM``; ``m_j`` depends on
            grouping column ``g_{((j-1) mod G)+1}`` (normal for odd j, lognormal for even j).
        zipf_exponent: exponent s of the Zipf law (used only by ``'zipf'``).
        seed: an integer in [0, 2^127 − 1] (same seed, same table); a Generator or None
            (fresh entropy) gives the integer seed it draws first.
        name: the table name.

    Raises:
        InvalidParameterError: a parameter is outside its range, or the table would hold more
            than `MAX_SYNTHETIC_VALUES` values.
    """
    rows = _check_int("rows", num_rows, minimum=1)
    drawn = seed is None or isinstance(seed, np.random.Generator)
    integer_seed = None if drawn else check_seed(seed)
    shape = check_shape(
        distribution=distribution,
        num_grouping_columns=num_grouping_columns,
        num_intervals=num_intervals,
        num_measures=num_measures,
        zipf_exponent=zipf_exponent,
    )
    if rows > shape.max_rows:
        raise InvalidParameterError(
            "rows", f"an integer in [1, {shape.max_rows}] (the table must fit in memory)", num_rows
        )
    if integer_seed is None:  # a Generator or fresh entropy: the integer seed it draws first
        integer_seed = int(np.random.default_rng(seed).integers(1 << 63))
    source = SyntheticRows(
        rows,
        seed=integer_seed,
        name=name,
        **asdict(shape),
    )
    return source.read(0, rows)


@dataclass(frozen=True)
class SyntheticRows:
    """The synthetic table of `dpcomm.data.synthetic_table`, read by ranges.

    Block ``b`` of the table (rows ``b·BLOCK_ROWS`` up to ``(b+1)·BLOCK_ROWS``, 65,536 rows) is
    drawn by its own generator, ``default_rng(SeedSequence(seed, spawn_key=(1, b)))``, column
    after column; the Zipf rankings of the intervals (per grouping column) come from
    ``SeedSequence(seed, spawn_key=(0,))``. A range of rows draws only the blocks it overlaps,
    and equals the same rows of the whole table, for any split. The table has no size limit;
    one read holds at most `dpcomm.data.synthetic.MAX_SYNTHETIC_VALUES` values.

    Args: as `dpcomm.data.synthetic_table`, but ``seed`` is an integer (no Generator).
    """

    num_rows: int
    _: KW_ONLY
    seed: int
    distribution: str = "uniform"
    num_grouping_columns: int = 4
    num_intervals: int = 20
    num_measures: int = 2
    zipf_exponent: float = 1.2
    name: str = "synthetic"
    _shape: SyntheticShape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = self.num_rows
        if isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 1:
            raise InvalidParameterError("num_rows", "an integer >= 1", rows)
        shape = check_shape(**{name: getattr(self, name) for name in _SHAPE_FIELDS})
        object.__setattr__(self, "num_rows", int(rows))
        object.__setattr__(self, "seed", check_seed(self.seed))
        for name in _SHAPE_FIELDS:  # the validated values in place of the given ones
            object.__setattr__(self, name, getattr(shape, name))
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "_shape", shape)

    @property
    def column_names(self) -> tuple[str, ...]:
        """``g1..gG`` then ``m1..mM``."""
        return self._shape.column_names

    def read(self, start: int, stop: int, columns: Sequence[str] | None = None) -> Table:
        """Rows ``[start, stop)`` (see `RowSource.read`).

        Every block overlapping the range is drawn whole (all its columns: the draws of a block
        follow each other), and nothing else.

        Raises:
            InvalidParameterError: also when the range holds more than ``MAX_SYNTHETIC_VALUES``
                values (rows × columns).
        """
        start, stop = check_range(start, stop, self.num_rows)
        positions = column_positions(self.column_names, columns)
        shape = self._shape
        if stop - start > shape.max_rows:
            raise InvalidParameterError(
                "stop",
                f"at most start + {shape.max_rows} (one read must fit in memory)",
                stop,
            )
        groups = [np.empty(stop - start, dtype=np.int64) for _ in range(shape.num_grouping_columns)]
        measures = [np.empty(stop - start, dtype=np.float64) for _ in range(shape.num_measures)]
        rankings = zipf_rankings(self.seed, shape) if shape.distribution == "zipf" else None
        first_block, last_block = start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS
        for block in range(first_block, last_block + 1 if stop > start else first_block):
            block_start = block * BLOCK_ROWS
            block_stop = min(block_start + BLOCK_ROWS, self.num_rows)
            lo, hi = max(start, block_start), min(stop, block_stop)
            rng = block_generator(self.seed, block)
            if lo == block_start and hi == block_stop:
                # The whole block is wanted: draw it straight into the result.
                fill_block(
                    rng,
                    shape,
                    rankings,
                    [g[lo - start : hi - start] for g in groups],
                    [m[lo - start : hi - start] for m in measures],
                )
                continue
            size = block_stop - block_start
            block_groups = [np.empty(size, dtype=np.int64) for _ in groups]
            block_measures = [np.empty(size, dtype=np.float64) for _ in measures]
            fill_block(rng, shape, rankings, block_groups, block_measures)
            for out, drawn in zip(
                [*groups, *measures], [*block_groups, *block_measures], strict=True
            ):
                out[lo - start : hi - start] = drawn[lo - block_start : hi - block_start]
        arrays: list[npt.NDArray[Any]] = [*groups, *measures]
        if not positions:
            return Table(self.name, (), rows=stop - start)
        return Table(
            self.name,
            tuple(_column(shape.column_names[p], shape.sql_types[p], arrays[p]) for p in positions),
        )

    def schema(self) -> Table:
        """The first row."""
        return self.read(0, 1)


def _column(name: str, sql_type: str, values: npt.NDArray[Any]) -> Column:
    """A column without NULLs, built without copying ``values`` (10M rows stay cheap)."""
    return Column(name, sql_type, values, np.zeros(len(values), dtype=np.bool_))


#: Grouping columns of the synthetic table of ``dpcomm run aggregate --synthetic``.
SYNTHETIC_GROUPING_COLUMNS: Final = ("g1", "g2", "g3", "g4")


def _synthetic_grouping_sets(count: int) -> list[tuple[str, ...]] | None:
    """``count`` distinct non-empty grouping sets of the synthetic columns (None: too many)."""
    sets = [
        combination
        for size in range(1, len(SYNTHETIC_GROUPING_COLUMNS) + 1)
        for combination in itertools.combinations(SYNTHETIC_GROUPING_COLUMNS, size)
    ]
    return sets[:count] if count <= len(sets) else None


def synthetic_sql(grouping_sets: int) -> str | None:
    """An Aggregate query with G grouping sets over the synthetic table (None if G > 15)."""
    sets = _synthetic_grouping_sets(grouping_sets)
    if sets is None:
        return None
    columns = ", ".join(c for c in SYNTHETIC_GROUPING_COLUMNS if any(c in s for s in sets))
    if len(sets) == 1:
        return f"SELECT {columns}, COUNT(*) AS n_rows FROM t GROUP BY {columns}"
    listed = ", ".join("(" + ", ".join(s) + ")" for s in sets)
    return f"SELECT {columns}, COUNT(*) AS n_rows FROM t GROUP BY GROUPING SETS ({listed})"
