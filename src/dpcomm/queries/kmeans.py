"""K-means as a decentralized execution plan (Section 5.1).

Each source holds one point. In iteration i each source sends its point to the compute node of
its nearest current centroid (a data-dependent flow, one cluster per iteration); compute node k
replaces centroid k by the mean of the real points it received (keeping the old one when it
received none) and the new centroids are broadcast back to the sources (data-independent).
After I iterations the centroids go to the result node. Utility is the Rand index, the adjusted
Rand index and the normalized mutual information of the final centroids' assignment of a
labelled set against its labels.

The K initial centroids are chosen once, from the start seed, when the program is built
([`choose_initial_centroids`][]), and travel in its public description: every engine starts
from the same ones. They are chosen among the sources' own points unless the caller gives a
pool of public points; either way they are sent to every node, so chosen among the sources'
points they are K of those points released as they are (see
[`KMeansProgram.initialisation_caveat`][]).

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
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.builders import kmeans_flow, kmeans_plan
from dpcomm.plan.countermeasures import Countermeasures
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


def rand_index(labels: npt.NDArray[np.int64], clusters: npt.NDArray[np.int64]) -> float:
    """The Rand index of two labelings (share of point pairs on which they agree)."""
    from sklearn.metrics import rand_score

    return float(rand_score(labels, clusters))


def adjusted_rand_index(labels: npt.NDArray[np.int64], clusters: npt.NDArray[np.int64]) -> float:
    """The Rand index adjusted for chance (Hubert and Arabie): 0 for random clusters, 1 at best.

    The plain Rand index counts the pairs of points split by both labelings as agreements; with
    many clusters almost every pair is split by both, so it stays near 1 whatever the clusters
    (scikit-learn's ``adjusted_rand_score``).
    """
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(labels, clusters))


def normalized_mutual_info(labels: npt.NDArray[np.int64], clusters: npt.NDArray[np.int64]) -> float:
    """The mutual information of two labelings over the mean of their entropies, in [0, 1].

    scikit-learn's ``normalized_mutual_info_score`` (arithmetic mean); not adjusted for chance.
    """
    from sklearn.metrics import normalized_mutual_info_score

    return float(normalized_mutual_info_score(labels, clusters))


#: How the initial centroids are chosen among the points of their pool (``init``).
INIT_METHODS = ("random", "k-means++")


def choose_initial_centroids(
    pool: npt.ArrayLike, num_centroids: int, *, init: str = "random", seed: int = 0
) -> FloatArray:
    """K = ``num_centroids`` initial centroids among the rows of ``pool``, chosen by ``seed``.

    ``random``: K distinct rows drawn uniformly (the paper's "K (random) points", Section
    5.1), in row order. ``k-means++``: the D² seeding of Arthur and Vassilvitskii (2007), as
    scikit-learn's ``kmeans_plusplus`` runs it (the first row uniform, each next one among
    2 + ⌊ln K⌋ candidates drawn with probability proportional to the squared distance to the
    nearest row chosen, keeping the candidate that lowers the total most); its O(log K)
    approximation in expectation gives fewer empty or split clusters than random rows. The
    rows are rounded to float32 first (what travels), so the centroids are rows of the pool
    exactly. The same pool, K, ``init`` and ``seed`` give the same centroids; they are
    computed once, where the program is built, and every engine receives them in the program.
    """
    if not isinstance(init, str) or init not in INIT_METHODS:
        raise InvalidParameterError("init", " or ".join(repr(m) for m in INIT_METHODS), init)
    rows = np.asarray(pool, dtype=np.float32)
    if rows.ndim != 2 or len(rows) == 0:
        raise InvalidParameterError("points", "a non-empty 2-d array", rows.shape)
    count = check_int("num_centroids K", num_centroids, minimum=1, maximum=len(rows))
    seed = check_seed(seed)
    if init == "random":
        chosen = np.sort(np.random.default_rng(seed).choice(len(rows), size=count, replace=False))
    else:
        from sklearn.cluster import kmeans_plusplus

        # The whole seed feeds the Mersenne Twister's seed sequence (not only 32 bits of it).
        state = np.random.RandomState(np.random.MT19937(seed))
        # float64 (exact for float32 values): scikit-learn computes float32 distances by
        # upcasting the whole pool in chunks at every step, several times slower.
        _, chosen = kmeans_plusplus(rows.astype(np.float64), count, random_state=state)
    return as_float32_values(rows[np.asarray(chosen, dtype=np.int64)])


def _release_from_spec(spec: Mapping[str, Any], *, dimension: int, iterations: int) -> Any:
    """The K-means release a spec describes, bound again by `dpcomm.release.kmeans` alone."""
    import importlib

    module = spec.get("module", "dpcomm.release.kmeans")
    if module != "dpcomm.release.kmeans":  # a config never makes a node import another module
        raise InvalidParameterError("release module", "dpcomm.release.kmeans", module)
    binder = importlib.import_module(module)
    return binder.release_from_spec(spec, dimension=dimension, num_iterations=iterations)


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
        num_iterations: I (at most ``dpcomm.validation.MAX_COUNT``).
        seed: chooses the initial centroids ([`choose_initial_centroids`][]); the same
            seed gives the same start with or without countermeasures, in every engine.
        initial: the initial centroids (public: every node receives them); chosen among the
            points by ``init`` and the seed when the points are given without them.
        num_sources: S.
        init: ``"random"`` (K distinct points, the default) or ``"k-means++"``.
        init_public: whether ``initial`` was chosen among public points rather than the
            sources' (False: they are K of the sources' points, released to every node).
        release: the noisy release of every iteration's centroids
            (`dpcomm.release.kmeans.KMeansRelease`, bound by the release package), or None:
            exact centroids over the delivered points.
    """

    points: npt.NDArray[Any] | None
    num_centroids: int
    num_iterations: int
    seed: int = 0
    initial: FloatArray | None = None
    num_sources: int = 0
    init: str = "random"
    init_public: bool = False
    release: Any = field(default=None, repr=False)
    _exact: dict[str, FloatArray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_int("num_iterations I", self.num_iterations, minimum=1, maximum=MAX_COUNT)
        object.__setattr__(self, "seed", check_seed(self.seed))
        if not isinstance(self.init, str) or self.init not in INIT_METHODS:
            allowed = " or ".join(repr(m) for m in INIT_METHODS)
            raise InvalidParameterError("init", allowed, self.init)
        if not isinstance(self.init_public, bool):
            raise InvalidParameterError("init_public", "True or False", self.init_public)
        if self.init_public and self.initial is None:
            raise InvalidParameterError(
                "initial", "the centroids chosen among public points (init_public)", None
            )
        if self.points is not None:
            points = np.asarray(self.points, dtype=np.float32)
            if points.ndim != 2 or len(points) == 0:
                raise InvalidParameterError("points", "a non-empty 2-d array", points.shape)
            object.__setattr__(self, "points", points)
            object.__setattr__(self, "num_sources", len(points))
            check_int("num_centroids K", self.num_centroids, minimum=1, maximum=len(points))
            if self.initial is None:
                initial = choose_initial_centroids(
                    points, self.num_centroids, init=self.init, seed=self.seed
                )
                object.__setattr__(self, "initial", initial)
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

    def check_countermeasures(self, countermeasures: Countermeasures) -> None:
        """Any countermeasure runs K-means; a release, those it was bound for."""
        if self.release is not None:
            self.release.check_for(countermeasures)

    def without_release(self) -> KMeansProgram:
        """The same K-means with exact centroids (the baseline a released run compares with)."""
        if self.release is None:
            return self
        return replace(self, release=None, _exact={})

    def published(self, state: Any) -> dict[str, Any] | None:
        """None: the result node publishes the centroids as they are."""
        return None

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
            "init": self.init,
            "init_public": self.init_public,
            "release": None if self.release is None else self.release.to_spec(),
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> KMeansProgram:
        """Inverse of [`to_spec`][] (without points)."""
        initial = np.frombuffer(bytes.fromhex(spec["initial"]), dtype=">f4").reshape(
            int(spec["num_centroids"]), int(spec["dimension"])
        )
        release = spec.get("release")
        return cls(
            None,
            int(spec["num_centroids"]),
            int(spec["num_iterations"]),
            int(spec["seed"]),
            initial.astype(np.float64),
            int(spec["num_sources"]),
            init=str(spec.get("init", "random")),
            init_public=bool(spec.get("init_public", False)),
            release=None
            if release is None
            else _release_from_spec(
                release, dimension=int(spec["dimension"]), iterations=int(spec["num_iterations"])
            ),
        )

    def check_config(self) -> None:
        """Nothing to check: a K-means program runs no SQL."""

    @property
    def name(self) -> str:
        """Short description for reports (the start, unless K random points of the sources)."""
        name = f"K-means, K={self.num_centroids}, I={self.num_iterations}"
        if self.init != "random" or self.init_public:
            name += f", {self.init} start" + (" from public points" if self.init_public else "")
        if self.release is not None:
            name += f", released ({self.release.mechanism.name})"
        return name

    @property
    def initialisation_caveat(self) -> str | None:
        """What the guarantee does not cover of the initial centroids (None: public ones).

        The paper's plan starts from "K (random) points" and treats the centroids as public
        state: chosen among the sources' points, they are K of those points sent to every node
        as they are, which no traffic countermeasure protects; k-means++ also reads every
        source's point to choose them. Chosen among public points, they reveal nothing.
        """
        if self.init_public:
            return None
        remedy = (
            "choose them among public points instead (init_points in Python, --init-data on "
            "the command line) for a guarantee that covers every source"
        )
        if self.init == "random":
            return (
                f"the {self.num_centroids:,} initial centroids are sources' own points, chosen "
                "by the start seed alone; every node receives them, so those sources' points "
                f"are released as they are and the guarantee does not cover them; {remedy}"
            )
        return (
            f"the {self.num_centroids:,} initial centroids are sources' own points chosen by "
            "k-means++, which reads every source's point (each next centroid is drawn with "
            "probability proportional to its squared distance to those already chosen); every "
            "node receives them, so those points are released as they are, and the guarantee "
            f"covers neither them nor what their choice reveals about the other sources; {remedy}"
        )

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
        if self.release is not None:  # clamped to the public bounds before anything is summed
            data = self.release.clamp(data)
        return grouped_sums(data, tuple_targets, step.targets)

    def combine_partials(
        self, step: TargetStep, partials: Sequence[Mapping[int, Any]]
    ) -> dict[int, FloatArray]:
        """Compute node k's new centroid from the exact sums of disjoint subsets of its points.

        The sums merge exactly: the mean (rounded once per coordinate, then to float32) is
        that of the union, whatever the split and the order of ``partials``. Under a release,
        the centroid published is the noisy one
        (`dpcomm.release.kmeans.KMeansRelease.noisy_centroid`, its noise drawn here, once).
        """
        every = np.arange(self.dimension, dtype=np.int64)
        outputs: dict[int, FloatArray] = {}
        for target in step.targets:
            node = int(target)
            parts = [part[node] for part in partials if node in part]
            merged = merge_exact_sums(parts, [every] * len(parts), self.dimension)
            if self.release is not None:
                iteration = step.state.iterations_done + 1
                previous = step.state.centroids[node]
                noisy = self.release.noisy_centroid(iteration, merged, previous)
                outputs[node] = as_float32_values(noisy)
                continue
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
