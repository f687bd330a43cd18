"""The front door's K-means inputs, checked and compiled into a program.

Points, labels, the test set, the scaling and the release of [`dpcomm.kmeans`][] (and of
`dpcomm.api.compile_kmeans`), as the program the run executes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dpcomm.calibration.calibrate import Calibration
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.job import with_kmeans_release
from dpcomm.plan.countermeasures import Countermeasures
from dpcomm.validation import MAX_COUNT, check_column_bounds, check_flag, check_int, check_seed

if TYPE_CHECKING:
    from dpcomm.queries.kmeans import KMeansProgram


def compiled_kmeans(
    points: npt.ArrayLike,
    k: int,
    iterations: int,
    labels: npt.ArrayLike | None,
    init: str,
    init_points: npt.ArrayLike | None,
    *,
    start_seed: int,
    drop: bool,
    countermeasure: object,
    chosen: Countermeasures,
    release: object,
    bounds: object,
    columns: Sequence[str] | None,
    scale: object,
) -> tuple[
    KMeansProgram,
    npt.NDArray[np.float64],
    npt.NDArray[np.int64] | None,
    npt.NDArray[np.bool_],
    tuple[str, ...] | None,
    tuple[tuple[float, float], ...] | None,
]:
    """K-means's program, its (scaled) points, labels' codes, rows kept, names and scaling.

    The arguments are `kmeans`'s; ``chosen`` is the countermeasure it runs.
    """
    asked, limits = _kmeans_release_asked(countermeasure, release, bounds)
    scaled = _scale_asked(scale, limits)
    iterations = check_int("iterations", iterations, minimum=1, maximum=MAX_COUNT)
    start_seed = check_seed(start_seed, name="start_seed")
    points_asked = _PointsAsked(points, k, labels, init, init_points, start_seed, drop)
    program, array, truth, kept = _kmeans_program(
        points_asked, iterations, scaling=limits if scaled else None
    )
    names = _column_names(points, columns, program.dimension)
    scaling = _checked_scaling(limits if scaled else None, program.dimension)
    released = _released_bounds(asked, limits, scaling)
    described = names
    if scaling is not None:  # the release's report says which units its bounds are in
        given = names or tuple(f"x{j}" for j in range(program.dimension))
        described = tuple(
            f"{name} scaled from [{low:g}, {high:g}]"
            for name, (low, high) in zip(given, scaling, strict=True)
        )
    program = with_kmeans_release(program, asked, released, chosen, described)
    return program, array, truth, kept, names, scaling


def _scale_asked(scale: object, bounds: object) -> bool:
    """``scale``, checked: True needs the public ``bounds`` it scales by."""
    scaled = check_flag("scale", scale)
    if scaled and bounds is None:
        raise InvalidParameterError(
            "bounds", "a public (lo, hi) per column to scale by (scale=True)", None
        )
    return scaled


def _checked_scaling(bounds: object, dimension: int) -> tuple[tuple[float, float], ...] | None:
    """The (lo_j, hi_j) each column is scaled from, checked (None: no scaling)."""
    return None if bounds is None else check_column_bounds(bounds, dimension)


def _released_bounds(
    release: object, bounds: object, scaling: tuple[tuple[float, float], ...] | None
) -> object:
    """The release's bounds: [0, 1] per column when scaled, else the given ones.

    Scaled without a release, the bounds served the scaling alone: none for the release.
    """
    if scaling is None:
        return bounds
    return None if release is None else [(0.0, 1.0)] * len(scaling)


def _scaled(
    points: npt.NDArray[np.float64], scaling: Sequence[tuple[float, float]]
) -> npt.NDArray[np.float64]:
    """``points`` with column j mapped from (lo_j, hi_j) onto [0, 1]: (x − lo_j)/(hi_j − lo_j)."""
    lows, highs = (np.asarray(side, dtype=np.float64) for side in zip(*scaling, strict=True))
    return (np.asarray(points, dtype=np.float64) - lows) / (highs - lows)


def _kmeans_release_asked(
    countermeasure: object, release: object, bounds: object
) -> tuple[object, object]:
    """K-means's release and bounds: the call's, else its calibration's (planned for K-means)."""
    if not isinstance(countermeasure, Calibration) or countermeasure.release is None:
        return release, bounds
    planned = countermeasure.bounds
    if countermeasure.shape.workload != "kmeans" or isinstance(planned, Mapping):
        raise InvalidParameterError(
            "countermeasure",
            "a calibration planned for K-means (calibrate(data=points, iterations=I, ...))",
            countermeasure.shape.workload,
        )
    return (countermeasure.release if release is None else release), (
        planned if bounds is None else bounds
    )


def _column_names(points: object, columns: object, dimension: int) -> tuple[str, ...] | None:
    """``columns``, else a DataFrame's columns, else None; one name per coordinate."""
    if columns is None:
        found = getattr(points, "columns", None)
        if found is None:
            return None
        columns = [str(c) for c in found]
    allowed = f"{dimension} distinct column names (one per coordinate)"
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise InvalidParameterError("columns", allowed, columns)
    names = tuple(columns)
    valid = all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
    if not valid or len(names) != dimension:
        raise InvalidParameterError("columns", allowed, list(names))
    return names


@dataclass(frozen=True)
class _PointsAsked:
    """`dpcomm.kmeans`'s arguments about the points and the start, as given (unchecked)."""

    points: npt.ArrayLike
    k: object
    labels: npt.ArrayLike | None
    init: object
    init_points: npt.ArrayLike | None
    start_seed: int
    drop: bool


def _kmeans_program(
    asked: _PointsAsked, iterations: int, *, scaling: object = None
) -> tuple[
    KMeansProgram, npt.NDArray[np.float64], npt.NDArray[np.int64] | None, npt.NDArray[np.bool_]
]:
    """K-means over the usable points: the program, those points, labels' codes, rows kept.

    ``scaling``: the public (lo_j, hi_j) the points (and the public initial points) are scaled
    from onto [0, 1] (`_scaled`), or None.
    """
    from dpcomm.data.inputs import label_codes, points_of, usable_rows
    from dpcomm.queries.kmeans import INIT_METHODS, KMeansProgram, choose_initial_centroids

    init, init_points = asked.init, asked.init_points
    start_seed, drop, labels = asked.start_seed, asked.drop, asked.labels
    array = points_of("points", asked.points)
    truth = None if labels is None else label_codes("labels", labels, len(array), "point")
    array, kept = usable_rows("points", array, drop=drop)
    pairs = _checked_scaling(scaling, array.shape[1])
    if pairs is not None:
        array = _scaled(array, pairs)
    k = check_int("k", asked.k, minimum=1)
    if k > len(array):
        raise InvalidParameterError("k", f"an integer in [1, {len(array):,}] (the points)", k)
    if not isinstance(init, str) or init not in INIT_METHODS:
        raise InvalidParameterError("init", " or ".join(repr(m) for m in INIT_METHODS), init)
    initial = None
    if init_points is not None:
        pool = points_of("init_points", init_points)
        if pool.shape[1] != array.shape[1]:
            raise InvalidParameterError(
                "init_points", f"points of dimension {array.shape[1]}", f"shape {pool.shape}"
            )
        pool, _ = usable_rows("init_points", pool, drop=drop)
        pool = pool if pairs is None else _scaled(pool, pairs)
        if k > len(pool):
            raise InvalidParameterError(
                "k", f"an integer in [1, {len(pool):,}] (the init_points)", k
            )
        initial = choose_initial_centroids(pool, k, init=init, seed=start_seed)
    program = KMeansProgram(
        array,
        k,
        iterations,
        seed=start_seed,
        initial=initial,
        init=init,
        init_public=initial is not None,
    )
    return program, array, truth, kept


def test_set(
    test_points: npt.ArrayLike | None,
    test_labels: npt.ArrayLike | None,
    array: npt.NDArray[np.float64],
    truth: npt.NDArray[np.int64] | None,
    kept: npt.NDArray[np.bool_],
    drop: bool,
    scaling: tuple[tuple[float, float], ...] | None = None,
) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.int64] | None]:
    """The labelled points the Rand index is measured on: the test set, else the points.

    ``scaling``: the test set is scaled as the points were (``points`` already are).
    """
    from dpcomm.data.inputs import label_codes, points_of, usable_rows

    if (test_points is None) != (test_labels is None):
        missing = "test_labels" if test_labels is None else "test_points"
        raise InvalidParameterError(missing, "given with the other (a labelled test set)", None)
    if test_points is not None and test_labels is not None:
        tested = points_of("test_points", test_points)
        if tested.shape[1] != array.shape[1]:
            raise InvalidParameterError(
                "test_points", f"points of dimension {array.shape[1]}", f"shape {tested.shape}"
            )
        codes = label_codes("test_labels", test_labels, len(tested), "test point")
        tested, kept_tests = usable_rows("test_points", tested, drop=drop)
        return (tested if scaling is None else _scaled(tested, scaling)), codes[kept_tests]
    if truth is not None:
        return array, truth[kept]
    return None, None


def kmeans_described(program: KMeansProgram, array: npt.NDArray[np.float64]) -> str:
    """The K-means run as a ledger records it (k, I, the points, the start)."""
    described = f"K-means: k = {program.num_centroids}, {program.num_iterations} iterations, "
    described += f"{array.shape[0]:,} points of dimension {array.shape[1]}, "
    described += f"start_seed = {program.seed}"
    if program.init != "random" or program.init_public:
        public = " among public points" if program.init_public else ""
        described += f", init = {program.init}{public}"
    return described
