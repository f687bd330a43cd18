"""What a release publishes from its noisy values: post-processing, free in privacy.

The noisy rows a release draws (`dpcomm.release.noise.released_rows`, the *raw* values,
unbiased) are post-processed where the result is published (the result node of a
deployment, the driver of the other engines), by a deterministic function of the released
values and public quantities only: it costs no privacy and is the same in every engine.

* **Counts are non-negative integers** (always): each released COUNT below 0 is published
  as 0. The raw values stay available (`raw` views) for sums of many cells, which clamping
  would bias upward.
* **Consistent totals** (``consistent_totals``): where the grouping sets have public key
  domains and one of them (the *finest*) has every grouping column of the others (ROLLUP,
  CUBE), each aggregate's released cells are replaced by the weighted least-squares fit
  x̂ = argmin Σ_cells (y − B x)² / v over the finest cells x, B summing a finest cell into
  every cell it belongs to and v each cell's noise variance (one per aggregate, so within
  an aggregate the weights are equal). A parent then equals the sum of its children. Counts
  are fitted, clamped at 0 and rounded on the finest cells, and every parent is the sum of
  its children's published counts: integers, non-negative and consistent.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcomm.errors import InvalidParameterError
from dpcomm.queries.groupby import key_order

if TYPE_CHECKING:
    from dpcomm.queries.query import BoundAggregate
    from dpcomm.release.noise import Release

Row = dict[str, Any]

#: Conjugate gradient stops when the residual is below this fraction of the right-hand side.
_TOLERANCE = 1e-12


def finest_set(bound: BoundAggregate, release: Release) -> int:
    """The grouping set whose columns hold every other's, for consistent totals.

    Raises:
        InvalidParameterError: no such set, or a grouping set whose keys a threshold selects
            (its parents would not add up: keys not released are missing).
    """
    sets = bound.grouping_sets
    columns = {c for s in sets for c in s}
    finest = next((i for i, s in enumerate(sets) if set(s) == columns), None)
    if finest is None or release.selection is not None:
        raise InvalidParameterError(
            "consistent_totals",
            "grouping sets with public key domains (keys=) among which one has every grouping "
            "column (ROLLUP, CUBE)",
            f"grouping sets {', '.join('(' + ', '.join(s) + ')' for s in sets)}"
            + (" with key selection" if release.selection is not None else ""),
        )
    return finest


def published_rows(
    bound: BoundAggregate, release: Release, raw: Sequence[Sequence[Row]]
) -> list[list[Row]]:
    """The rows published from the ``raw`` released rows (module docstring)."""
    rows = [[dict(row) for row in rows] for rows in raw]
    if release.consistent_totals:
        _make_consistent(bound, release, rows)
    for noise in release.noises:
        if noise.integer:
            for row in itertools.chain.from_iterable(rows):
                value = row.get(noise.output)
                if value is not None and value < 0:
                    row[noise.output] = 0
    return rows


def _make_consistent(bound: BoundAggregate, release: Release, rows: list[list[Row]]) -> None:
    """Every aggregate's cells replaced, in place, by their least-squares consistent fit."""
    finest = finest_set(bound, release)
    columns = bound.grouping_sets[finest]
    domains = dict(release.domains)
    cells = sorted(itertools.product(*(domains[c] for c in columns)), key=key_order)
    index = {cell: i for i, cell in enumerate(cells)}
    memberships: list[list[int]] = []  # per released row, the finest cells it sums
    for set_columns, set_rows in zip(bound.grouping_sets, rows, strict=True):
        positions = [columns.index(c) for c in set_columns]
        parents: dict[tuple[object, ...], list[int]] = {}
        for cell in cells:
            parents.setdefault(tuple(cell[p] for p in positions), []).append(index[cell])
        for row in set_rows:
            memberships.append(parents[tuple(row[c] for c in set_columns)])
    flat = [row for set_rows in rows for row in set_rows]
    for noise in release.noises:
        observed = np.array([float(row[noise.output]) for row in flat])
        if noise.integer:
            fitted = np.rint(_non_negative_fit(memberships, observed, len(cells)))
        else:
            fitted = _least_squares(memberships, observed, len(cells))
        for row, members in zip(flat, memberships, strict=True):
            total = float(np.sum(fitted[members]))
            row[noise.output] = int(total) if noise.integer else total


def _non_negative_fit(memberships: Sequence[Sequence[int]], observed: Any, size: int) -> Any:
    """argmin_{x ≥ 0} Σ_j (y_j − Σ_{i ∈ members_j} x_i)² (scipy's NNLS, Lawson–Hanson)."""
    from scipy.optimize import nnls

    matrix = np.zeros((len(memberships), size))
    for row, members in enumerate(memberships):
        matrix[row, members] = 1.0
    return nnls(matrix, np.asarray(observed, dtype=float))[0]


def _least_squares(memberships: Sequence[Sequence[int]], observed: Any, size: int) -> Any:
    """argmin_x Σ_j (y_j − Σ_{i ∈ members_j} x_i)² by conjugate gradient on BᵀB x = Bᵀy.

    Equal weights: every cell of one aggregate has the same noise variance. BᵀB is positive
    definite (the finest cells are observed themselves), and the iteration is deterministic.
    """

    def normal(x: Any) -> Any:
        out = np.zeros(size)
        for members in memberships:
            out[members] += float(np.sum(x[members]))
        return out

    right = np.zeros(size)
    for members, value in zip(memberships, observed, strict=True):
        right[members] += value
    x = np.zeros(size)
    residual = right - normal(x)
    direction = residual.copy()
    squared = float(residual @ residual)
    limit = _TOLERANCE**2 * max(float(right @ right), 1e-300)
    for _ in range(10 * size + 10):
        if squared <= limit:
            break
        product = normal(direction)
        step = squared / float(direction @ product)
        x += step * direction
        residual -= step * product
        new = float(residual @ residual)
        direction = residual + (new / squared) * direction
        squared = new
    return x


__all__ = ["finest_set", "published_rows"]
