"""K-means as a decentralized execution plan (Section 5.1).

Each source holds one point. In iteration i each source sends its point to the compute node of
its nearest current centroid (a data-dependent flow, one cluster per iteration); compute node k
replaces centroid k by the mean of the real points it received (keeping the old one when it
received none) and the new centroids are broadcast back to the sources (data-independent).
After I iterations the centroids go to the result node. Utility is the Rand index of the final
centroids' assignment of a held-out test set against its labels.

Points and centroids travel as float32, so the program holds them as float32 values: what a
source sends is exactly what the simulator computes with. Nearest centroids are exact (ties to
the lowest index) and a compute node's mean is the exact mean rounded once per coordinate (to
the nearest double, then to float32): it does not depend on the order its points arrived in nor
on how they are split among workers (the exact sums of the parts merge exactly), so every
engine computes the same centroids bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.builders import kmeans_flow, kmeans_plan
from dpcomm.plan.model import ExecutionPlan
from dpcomm.protocol.roles import TargetStep
from dpcomm.queries.codec import CodecError, VectorCodec
from dpcomm.queries.exactsum import ExactSums, exact_row_sums, merge_exact_sums
from dpcomm.queries.program import ArrayRows, IntArray, register_program, spec_header
from dpcomm.validation import MAX_COUNT, check_int, check_seed

FloatArray = npt.NDArray[np.float64]
#: The sources' points: float32, what travels (half the memory of float64).
PointArray = npt.NDArray[np.float32]

#: Bytes of one coordinate in a message (points and centroids travel as float32).
COORDINATE_BYTES = 4
_CHUNK_ROWS = 16_384
_UNIT_ROUNDOFF = 2.0**-53


def as_float32_values(points: npt.ArrayLike) -> FloatArray:
    """``points`` rounded to float32 (what travels), held as float64."""
    return np.asarray(np.asarray(points, dtype=np.float32), dtype=np.float64)


def _as_floats(points: npt.ArrayLike) -> npt.NDArray[np.floating[Any]]:
    """``points`` as float32 or float64 (kept as they are when already one of them)."""
    data = np.asarray(points)
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    return data


def _exact_less(point: FloatArray, first: FloatArray, second: FloatArray) -> int:
    """Sign of ‖x − a‖² − ‖x − b‖², computed exactly (−1, 0 or 1).

    ‖x − a‖² − ‖x − b‖² = Σ a_i² − b_i² − 2 x_i (a_i − b_i); for float32 values every product
    is exact in float64 and `math.fsum` rounds the exact sum once, so the sign is exact.
    """
    terms = np.concatenate(
        [first * first, -(second * second), -2.0 * point * first, 2.0 * point * second]
    )
    total = math.fsum(terms.tolist())
    return (total > 0) - (total < 0)


def nearest_centroid(points: npt.ArrayLike, centroids: npt.ArrayLike) -> IntArray:
    """Index of the nearest centroid (squared Euclidean distance) of every point; ties: lowest.

    The scores ‖c‖² − 2 x·c are computed with BLAS in chunks; a point whose two best scores
    are closer than their rounding-error bound (γ_D (‖c‖² + 2‖x‖‖c‖), Higham's bound for a dot
    product of length D, times 4 for margin) is decided by an exact comparison. The answer is
    therefore the exact nearest centroid whatever the chunk size, the BLAS or the machine: the
    simulator (all points at once) and a source node (its own point) agree.
    """
    data = _as_floats(points)
    centers = np.asarray(centroids, dtype=np.float64)
    dimension = centers.shape[1] if centers.ndim == 2 else 0
    squared = np.einsum("ij,ij->i", centers, centers)
    norms = np.sqrt(squared)
    slack = 4.0 * (dimension + 2) * _UNIT_ROUNDOFF
    result = np.empty(len(data), dtype=np.int64)
    for start in range(0, len(data), _CHUNK_ROWS):
        block = np.asarray(data[start : start + _CHUNK_ROWS], dtype=np.float64)
        scores = squared[None, :] - 2.0 * (block @ centers.T)
        best = np.argmin(scores, axis=1)
        result[start : start + len(block)] = best
        if centers.shape[0] < 2:
            continue
        tolerance = slack * (
            squared[None, :]
            + 2.0 * np.sqrt(np.einsum("ij,ij->i", block, block))[:, None] * norms[None, :]
        )
        rows = np.arange(len(block))
        reach = scores[rows, best] + tolerance[rows, best]
        near = (scores - tolerance <= reach[:, None]).sum(axis=1) > 1
        for row in np.flatnonzero(near).tolist():
            candidates = np.flatnonzero(scores[row] - tolerance[row] <= reach[row]).tolist()
            winner = candidates[0]
            for candidate in candidates[1:]:
                if _exact_less(block[row], centers[candidate], centers[winner]) < 0:
                    winner = candidate
            result[start + row] = winner
    return result


def grouped_sums(
    points: npt.ArrayLike, groups: npt.ArrayLike, wanted: Sequence[int]
) -> dict[int, ExactSums]:
    """The exact per-coordinate sums of the points of each group in ``wanted``.

    Each group's `dpcomm.queries.exactsum.ExactSums` has one entry per coordinate
    (its count is the group's number of points, 0 for a group without points): a mergeable
    partial state. Points outside ``wanted`` are ignored.
    """
    data = _as_floats(points)
    owners = np.asarray(groups, dtype=np.int64).reshape(-1)
    if data.ndim != 2 or len(data) != len(owners):
        raise InvalidParameterError(
            "points", f"a 2-d array with one row per group label ({len(owners)})", data.shape
        )
    dimension = data.shape[1]
    chosen = np.unique(np.asarray([int(t) for t in wanted], dtype=np.int64))
    slot = np.searchsorted(chosen, owners)
    inside = slot < len(chosen)
    inside[inside] = chosen[slot[inside]] == owners[inside]
    if not inside.all():
        data, slot = data[inside], slot[inside]
    sums = exact_row_sums(data, slot, len(chosen))
    return {
        int(target): sums.take(np.arange(index * dimension, (index + 1) * dimension))
        for index, target in enumerate(chosen.tolist())
    }


def exact_mean(sums: ExactSums) -> FloatArray | None:
    """The mean of a group's points from its exact per-coordinate sums; None without points.

    Each coordinate is the exact sum divided by the count, rounded once to the nearest double
    (`dpcomm.queries.exactsum.ExactSums.means`).
    """
    means = sums.means()
    if not means or means[0] is None:
        return None
    return np.asarray(means, dtype=np.float64)


def grouped_means(
    points: npt.ArrayLike, groups: npt.ArrayLike, wanted: Sequence[int]
) -> dict[int, FloatArray]:
    """The mean of the points of each group in ``wanted`` that has some, correctly rounded.

    Each coordinate is the exact mean rounded once to the nearest double: it depends on the
    multiset of points only (not on the order they came in, a compute node's arrival order or
    the simulator's row order), and the exact per-coordinate sums of disjoint subsets of the
    points merge into it ([`grouped_sums`][]).
    """
    means: dict[int, FloatArray] = {}
    for target, sums in grouped_sums(points, groups, wanted).items():
        mean = exact_mean(sums)
        if mean is not None:
            means[target] = mean
    return means


def canonical_mean(points: npt.ArrayLike) -> FloatArray:
    """The mean of ``points`` (rows), correctly rounded per coordinate ([`grouped_means`][])."""
    data = _as_floats(points)
    return grouped_means(data, np.zeros(len(data), dtype=np.int64), [0])[0]


def update_centroids(
    points: FloatArray, assignment: IntArray, used: npt.NDArray[np.bool_], centroids: FloatArray
) -> FloatArray:
    """Mean of the used points of each centroid, rounded to float32; none: the old one kept."""
    updated = np.array(centroids, dtype=np.float64, copy=True)
    means = grouped_means(np.asarray(points)[used], assignment[used], range(len(updated)))
    for centroid, mean in means.items():
        updated[centroid] = mean
    return as_float32_values(updated)


def rand_index(labels: npt.NDArray[np.int64], clusters: npt.NDArray[np.int64]) -> float:
    """The Rand index of two labelings (share of point pairs on which they agree)."""
    from sklearn.metrics import rand_score

    return float(rand_score(labels, clusters))


@dataclass(frozen=True)
class KMeansState:
    """The centroids after a number of completed iterations (float32 values)."""

    centroids: FloatArray
    iterations_done: int


@register_program("kmeans")
@dataclass(frozen=True, eq=False)
class KMeansProgram:
    """K-means on ``points`` with K centroids and I iterations, one cluster per iteration.

    Attributes:
        points: the sources' points, one row per source (S x dimension), held as float32
            values; None where a node holds no data.
        num_centroids: K, also the number of compute nodes per iteration.
        num_iterations: I (at most `dpcomm.validation.MAX_COUNT`).
        seed: chooses the initial centroids (K distinct points of the sources, as in the
            paper's "K (random) points"); the same seed gives the same start with or without
            countermeasures.
        initial: the initial centroids (public; chosen from the points by the seed when the
            points are given).
        num_sources: S.
    """

    points: npt.NDArray[Any] | None
    num_centroids: int
    num_iterations: int
    seed: int = 0
    initial: FloatArray | None = None
    num_sources: int = 0
    _exact: dict[str, FloatArray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_int("num_iterations I", self.num_iterations, minimum=1, maximum=MAX_COUNT)
        object.__setattr__(self, "seed", check_seed(self.seed))
        if self.points is not None:
            points = np.asarray(self.points, dtype=np.float32)
            if points.ndim != 2 or len(points) == 0:
                raise InvalidParameterError("points", "a non-empty 2-d array", points.shape)
            object.__setattr__(self, "points", points)
            object.__setattr__(self, "num_sources", len(points))
            check_int("num_centroids K", self.num_centroids, minimum=1, maximum=len(points))
            if self.initial is None:
                rng = np.random.default_rng(self.seed)
                chosen = rng.choice(len(points), size=self.num_centroids, replace=False)
                object.__setattr__(self, "initial", points[np.sort(chosen)].copy())
        check_int("num_centroids K", self.num_centroids, minimum=1)
        if self.initial is None:
            raise InvalidParameterError("initial", "initial centroids (or the points)", None)
        initial = as_float32_values(self.initial)
        if initial.ndim != 2 or initial.shape[0] != self.num_centroids:
            raise InvalidParameterError("initial", f"{self.num_centroids} centroids", initial.shape)
        object.__setattr__(self, "initial", initial)
        check_int("num_sources", self.num_sources, minimum=1)

    @property
    def dimension(self) -> int:
        """Coordinates of a point."""
        assert self.initial is not None
        return int(self.initial.shape[1])

    @property
    def initial_centroids(self) -> FloatArray:
        """The K initial centroids."""
        assert self.initial is not None
        return self.initial

    def to_spec(self) -> dict[str, Any]:
        """The public description, JSON-ready."""
        return {
            **spec_header("kmeans", KMeansProgram),
            "num_centroids": self.num_centroids,
            "num_iterations": self.num_iterations,
            "seed": self.seed,
            "initial": self.initial_centroids.astype(">f4").tobytes().hex(),
            "dimension": self.dimension,
            "num_sources": self.num_sources,
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> KMeansProgram:
        """Inverse of [`to_spec`][] (without points)."""
        initial = np.frombuffer(bytes.fromhex(spec["initial"]), dtype=">f4").reshape(
            int(spec["num_centroids"]), int(spec["dimension"])
        )
        return cls(
            None,
            int(spec["num_centroids"]),
            int(spec["num_iterations"]),
            int(spec["seed"]),
            initial.astype(np.float64),
            int(spec["num_sources"]),
        )

    @property
    def name(self) -> str:
        """Short description for reports."""
        return f"K-means, K={self.num_centroids}, I={self.num_iterations}"

    def flow_name(self, iteration: int) -> str:
        """Name of the data-dependent flow of ``iteration`` (1-based)."""
        return kmeans_flow(iteration)

    @cached_property
    def plan(self) -> ExecutionPlan:
        """Sources, I logical copies of them, I groups of K compute nodes and the result."""
        return kmeans_plan(
            num_sources=self.num_sources,
            num_centroids=self.num_centroids,
            num_iterations=self.num_iterations,
            message_bytes=self.dimension * COORDINATE_BYTES,
        )

    @property
    def stages(self) -> tuple[tuple[str, ...], ...]:
        """One stage per iteration, each sending the iteration's flow."""
        return tuple((self.flow_name(i + 1),) for i in range(self.num_iterations))

    def initial_state(self) -> KMeansState:
        """The seeded initial centroids."""
        return KMeansState(self.initial_centroids.copy(), 0)

    # ------------------------------------------------------------------ hooks

    def route(self, state: KMeansState, flow: str, rows: PointArray) -> IntArray:
        """Each point's nearest current centroid."""
        if rows is self.points:
            # The sources' points in float64 (exact), converted once for every iteration.
            if "points" not in self._exact:
                self._exact["points"] = np.asarray(rows, dtype=np.float64)
            return nearest_centroid(self._exact["points"], state.centroids)
        return nearest_centroid(rows, state.centroids)

    def carried(self, flow: str, rows: PointArray) -> PointArray:
        """A source sends its point."""
        return rows

    def target_partials(
        self, step: TargetStep, tuples: FloatArray, tuple_targets: IntArray
    ) -> dict[int, ExactSums]:
        """Compute node k's partial from some of its points ([`grouped_sums`][]).

        Their exact per-coordinate sums and their number: a picklable
        `dpcomm.queries.exactsum.ExactSums`.
        """
        data = np.asarray(tuples)
        if data.size == 0:
            data = np.zeros((0, self.dimension), dtype=np.float32)
        return grouped_sums(data, tuple_targets, step.targets)

    def combine_partials(
        self, step: TargetStep, partials: Sequence[Mapping[int, Any]]
    ) -> dict[int, FloatArray]:
        """Compute node k's new centroid from the exact sums of disjoint subsets of its points.

        The sums merge exactly: the mean (rounded once per coordinate, then to float32) is
        that of the union, whatever the split and the order of ``partials``.
        """
        every = np.arange(self.dimension, dtype=np.int64)
        outputs: dict[int, FloatArray] = {}
        for target in step.targets:
            node = int(target)
            parts = [part[node] for part in partials if node in part]
            merged = merge_exact_sums(parts, [every] * len(parts), self.dimension)
            mean = exact_mean(merged)
            if mean is not None:
                outputs[node] = as_float32_values(mean)
            else:
                outputs[node] = step.state.centroids[node].copy()
        return outputs

    def merge(
        self, state: KMeansState, stage: int, outputs: Mapping[tuple[str, int], FloatArray]
    ) -> KMeansState:
        """The centroids with those the compute nodes sent replaced."""
        centroids = state.centroids.copy()
        for (_, target), centroid in outputs.items():
            centroids[target] = centroid
        return KMeansState(centroids, stage + 1)

    def result(self, state: KMeansState) -> FloatArray:
        """The final centroids."""
        return state.centroids

    def assign(self, state: KMeansState, points: FloatArray) -> IntArray:
        """Cluster of each of ``points`` under the state's centroids."""
        return nearest_centroid(np.asarray(points, dtype=np.float32), state.centroids)

    # ------------------------------------------------------------------ rows and wire

    @property
    def rows(self) -> ArrayRows | None:
        """The sources' points (None on a node: it has its own)."""
        return None if self.points is None else ArrayRows(self.points)

    @property
    def codec(self) -> KMeansCodec:
        """Points and centroids travel as float32 coordinates."""
        return KMeansCodec(self.dimension)

    def source_rows(self) -> PointArray:
        """The sources' points (only where the program holds them)."""
        if self.points is None:
            raise InvalidParameterError("points", "a program with the sources' points", None)
        return self.points


@dataclass(frozen=True)
class CentroidCodec:
    """A centroid as float32 coordinates: one public size, whatever the data."""

    dimension: int

    @property
    def size(self) -> int:
        """Bytes of a centroid."""
        return self.dimension * COORDINATE_BYTES

    def encode(self, output: FloatArray) -> bytes:
        """``output`` in [`size`][] bytes."""
        return VectorCodec(self.dimension).encode(np.asarray(output).reshape(1, -1))[0]

    def decode(self, data: bytes) -> FloatArray:
        """Inverse of [`encode`][]; CodecError if malformed."""
        if len(data) != self.size:
            raise CodecError(f"a centroid of {len(data)} bytes")
        centroid: FloatArray = VectorCodec(self.dimension).decode([data])[0].astype(np.float64)
        return centroid

    def check(self, output: FloatArray) -> None:
        """Nothing to check: a centroid always has the public size."""
        del output


@dataclass(frozen=True)
class KMeansCodec:
    """How K-means' points and centroids travel."""

    dimension: int

    def tuples(self, flow: str) -> VectorCodec:
        """A point's float32 coordinates."""
        del flow
        return VectorCodec(self.dimension)

    def outputs(self, flow: str) -> CentroidCodec:
        """A centroid's float32 coordinates."""
        del flow
        return CentroidCodec(self.dimension)

    @property
    def rows(self) -> VectorCodec:
        """A source's point."""
        return VectorCodec(self.dimension)
