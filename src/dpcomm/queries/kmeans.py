"""K-means as a decentralized execution plan (Section 5.1).

Each source holds one point. In iteration i each source sends its point to the compute node of
its nearest current centroid (a data-dependent flow, one cluster per iteration); compute node k
replaces centroid k by the mean of the real points it received (keeping the old one when it
received none) and sends it back to the sources (data-independent). After I iterations the
centroids go to the result node. Utility is the Rand index of the final centroids' assignment of
a held-out test set against its labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import scipy.sparse

from dpcomm.accounting._validation import check_int
from dpcomm.accounting.montecarlo import make_rng
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup
from dpcomm.queries.program import BoolArray, IntArray

FloatArray = npt.NDArray[np.float64]

#: Bytes of one coordinate in a message (points and centroids travel as float32).
COORDINATE_BYTES = 4
_CHUNK_ROWS = 16_384


def nearest_centroid(points: FloatArray, centroids: FloatArray) -> IntArray:
    """Index of the nearest centroid (squared Euclidean distance) of every point, in chunks."""
    squared = np.einsum("ij,ij->i", centroids, centroids)
    result = np.empty(len(points), dtype=np.int64)
    for start in range(0, len(points), _CHUNK_ROWS):
        block = points[start : start + _CHUNK_ROWS]
        distances = squared[None, :] - 2.0 * (block @ centroids.T)
        result[start : start + len(block)] = np.argmin(distances, axis=1)
    return result


def update_centroids(
    points: FloatArray, assignment: IntArray, used: BoolArray, centroids: FloatArray
) -> FloatArray:
    """Mean of the used points of each centroid; a centroid that received none is kept."""
    num_centroids = len(centroids)
    rows = assignment[used]
    selection = scipy.sparse.csr_matrix(
        (np.ones(len(rows)), (rows, np.flatnonzero(used))),
        shape=(num_centroids, len(points)),
    )
    sums = np.asarray(selection @ points, dtype=np.float64)
    counts = np.bincount(rows, minlength=num_centroids).astype(np.float64)
    updated = centroids.copy()
    nonempty = counts > 0
    updated[nonempty] = sums[nonempty] / counts[nonempty, None]
    return updated


def rand_index(labels: npt.NDArray[np.int64], clusters: npt.NDArray[np.int64]) -> float:
    """The Rand index of two labelings (share of point pairs on which they agree)."""
    from sklearn.metrics import rand_score

    return float(rand_score(labels, clusters))


@dataclass(frozen=True)
class KMeansState:
    """Centroids after a number of completed iterations, and the tuples used in each."""

    centroids: FloatArray
    iterations_done: int
    used_per_iteration: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class KMeansProgram:
    """K-means on ``points`` with K centroids and I iterations, one cluster per iteration.

    Attributes:
        points: the sources' points, one row per source (S x dimension).
        num_centroids: K, also the number of compute nodes per iteration.
        num_iterations: I.
        seed: chooses the initial centroids (K distinct points of the sources, as in the
            paper's "K (random) points"); the same seed gives the same start with or without
            countermeasures.
    """

    points: FloatArray
    num_centroids: int
    num_iterations: int
    seed: int = 0

    def __post_init__(self) -> None:
        points = np.asarray(self.points, dtype=np.float64)
        if points.ndim != 2 or len(points) == 0:
            raise InvalidParameterError("points", "a non-empty 2-d array", points.shape)
        object.__setattr__(self, "points", points)
        check_int("num_centroids K", self.num_centroids, minimum=1, maximum=len(points))
        check_int("num_iterations I", self.num_iterations, minimum=1)

    @property
    def name(self) -> str:
        """Short description for reports."""
        return f"K-means, K={self.num_centroids}, I={self.num_iterations}"

    @cached_property
    def initial_centroids(self) -> FloatArray:
        """K distinct source points chosen by the seed."""
        rng = make_rng(self.seed)
        chosen = rng.choice(len(self.points), size=self.num_centroids, replace=False)
        return self.points[np.sort(chosen)].copy()

    def flow_name(self, iteration: int) -> str:
        """Name of the data-dependent flow of ``iteration`` (1-based)."""
        return f"iteration {iteration}"

    @cached_property
    def plan(self) -> ExecutionPlan:
        """Sources, I logical copies of them, I groups of K compute nodes and the result."""
        count = len(self.points)
        size = self.points.shape[1] * COORDINATE_BYTES
        groups = [
            NodeGroup("sources", "source", count, holds_data=True),
            NodeGroup("compute", "compute", self.num_centroids),
            NodeGroup("result", "result", 1),
        ]
        flows = []
        for iteration in range(1, self.num_iterations + 1):
            groups.append(NodeGroup(f"sources@{iteration}", "source", count, physical="sources"))
            groups.append(
                NodeGroup(f"compute@{iteration}", "compute", self.num_centroids, physical="compute")
            )
            flows.append(
                Flow(
                    self.flow_name(iteration),
                    f"sources@{iteration}",
                    f"compute@{iteration}",
                    "data",
                    depends_on_state=True,
                    message_bytes=size,
                )
            )
            if iteration < self.num_iterations:
                flows.append(
                    Flow(
                        f"centroids {iteration}",
                        f"compute@{iteration}",
                        f"sources@{iteration + 1}",
                        "broadcast",
                        message_bytes=size,
                    )
                )
            else:
                flows.append(
                    Flow(
                        "result",
                        f"compute@{iteration}",
                        "result",
                        "fixed",
                        message_bytes=size,
                    )
                )
        return ExecutionPlan(tuple(groups), tuple(flows))

    @property
    def num_stages(self) -> int:
        """One stage per iteration."""
        return self.num_iterations

    def stage_flows(self, stage: int) -> tuple[str, ...]:
        """The iteration's flow."""
        return (self.flow_name(stage + 1),)

    def initial_state(self) -> KMeansState:
        """The seeded initial centroids."""
        return KMeansState(self.initial_centroids, 0, ())

    def true_targets(self, state: KMeansState, flow: str) -> IntArray:
        """Each source's nearest current centroid."""
        return nearest_centroid(self.points, state.centroids)

    def compute(
        self, state: KMeansState, stage: int, delivered: Mapping[str, BoolArray]
    ) -> KMeansState:
        """Compute node k averages the real points it received."""
        used = delivered[self.flow_name(stage + 1)]
        assignment = nearest_centroid(self.points, state.centroids)
        centroids = update_centroids(self.points, assignment, used, state.centroids)
        return KMeansState(
            centroids, state.iterations_done + 1, (*state.used_per_iteration, int(used.sum()))
        )

    def assign(self, state: KMeansState, points: FloatArray) -> IntArray:
        """Cluster of each of ``points`` under the state's centroids."""
        return nearest_centroid(np.asarray(points, dtype=np.float64), state.centroids)
