"""K-means' nearest centroid and mean are exact: every engine computes the same bits.

The simulator computes all points at once, a source node its own point; both must choose the
same centroid, so :func:`nearest_centroid` is the exact argmin (ties: lowest index) whatever the
chunking, and a compute node's mean does not depend on the order its points arrived in.
"""

from fractions import Fraction

import numpy as np
from hypothesis import given, settings, strategies as st

from dpcomm.queries.kmeans import as_float32_values, exact_mean, grouped_sums, nearest_centroid


def exact_nearest(point, centroids):
    best, best_distance = 0, None
    for index, centroid in enumerate(centroids):
        distance = sum(
            (Fraction(float(x)) - Fraction(float(c))) ** 2
            for x, c in zip(point, centroid, strict=True)
        )
        if best_distance is None or distance < best_distance:
            best, best_distance = index, distance
    return best


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dimension=st.integers(1, 12),
    centroids=st.integers(1, 6),
    grid=st.sampled_from([1.0, 0.5, 0.1, 1e-3]),
)
def test_nearest_centroid_is_exact_and_does_not_depend_on_the_chunk(
    seed, dimension, centroids, grid
):
    rng = np.random.default_rng(seed)
    # Coordinates on a coarse grid make exact ties and near-ties frequent.
    points = as_float32_values(rng.integers(-4, 5, size=(40, dimension)) * grid)
    centers = as_float32_values(rng.integers(-4, 5, size=(centroids, dimension)) * grid)
    together = nearest_centroid(points, centers)
    alone = np.array([nearest_centroid(p[None, :], centers)[0] for p in points])
    assert together.tolist() == alone.tolist()
    assert together.tolist() == [exact_nearest(p, centers) for p in points]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 60))
def test_the_mean_does_not_depend_on_the_order(seed, rows):
    rng = np.random.default_rng(seed)
    points = as_float32_values(rng.normal(size=(rows, 5)) * 10.0 ** rng.integers(-3, 4, size=5))
    shuffled = points[rng.permutation(rows)]

    def mean(rows):
        return exact_mean(grouped_sums(rows, np.zeros(len(rows), dtype=np.int64), [0])[0])

    assert mean(points).tobytes() == mean(shuffled).tobytes()
