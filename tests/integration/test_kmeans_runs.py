"""K-means on the embedded MNIST digits: utility at σ = 0.9 against the non-private run."""

import numpy as np
import pytest

from dpcomm.data import load_mnist5k
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.runs import run_kmeans
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.queries.kmeans import KMeansProgram, nearest_centroid, rand_index


@pytest.fixture(scope="module")
def digits():
    return load_mnist5k()


def test_sampling_at_0_9_keeps_the_utility_of_nonprivate_kmeans(digits):
    # Section 5.3: "the proportion of correctly clustered tuples for high sampling rates
    # (σ = 0.9) is very close to that obtained when we do not sample".
    program = KMeansProgram(digits.train_images, 10, 10, seed=0)
    outcome = run_kmeans(
        program,
        Scramblers(sampling_rate=0.9, batch_size=100, num_dummies=50),
        test_points=digits.test_images,
        test_labels=digits.test_labels,
        delta=1e-4,
        seed=0,
    )
    assert outcome.rand_index_nonprivate > 0.8
    assert abs(outcome.rand_index - outcome.rand_index_nonprivate) < 0.02
    used = outcome.report.utility.tuples_used_fraction
    assert abs(used - (0.1 + 0.9 / 10)) < 0.03
    privacy = outcome.report.privacy
    assert len(privacy.worst_path) >= 10
    assert privacy.caveats


def test_nonprivate_run_is_lloyds_algorithm(digits):
    points = digits.train_images[:500]
    program = KMeansProgram(points, 5, 4, seed=3)
    outcome = run_kmeans(
        program,
        NoCountermeasure(),
        test_points=digits.test_images,
        test_labels=digits.test_labels,
        delta=1e-4,
    )
    centroids = program.initial_centroids
    for _ in range(4):
        # Lloyd's update written out directly, as the reference.
        distances = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
        labels = distances.argmin(axis=1)
        centroids = np.array(
            [
                points[labels == k].mean(axis=0) if (labels == k).any() else centroids[k]
                for k in range(5)
            ]
        )
    # The run's centroids are float32 values (what travels); Lloyd's here is float64.
    assert np.allclose(outcome.run.state.centroids, centroids, rtol=1e-6, atol=1e-4)


def test_helpers_and_bad_input():
    points = np.array([[0.0, 0.0], [0.0, 1.0], [10.0, 10.0]])
    centroids = np.array([[0.0, 0.5], [10.0, 9.0]])
    assert nearest_centroid(points, centroids).tolist() == [0, 0, 1]
    # Ties go to the lowest index, exactly, whatever the rounding of the fast path.
    tie = np.array([[1.0, 1.0], [-1.0, -1.0]])
    assert nearest_centroid(np.array([[0.0, 0.0]]), tie).tolist() == [0]
    assert nearest_centroid(np.array([[0.1, 0.1]]), tie).tolist() == [0]
    assert nearest_centroid(np.array([[-0.1, -0.1]]), tie).tolist() == [1]
    assert rand_index(np.array([0, 0, 1]), np.array([1, 1, 0])) == 1.0
    with pytest.raises(InvalidParameterError, match="num_centroids K"):
        KMeansProgram(points, 4, 1)
    with pytest.raises(InvalidParameterError, match="num_iterations I"):
        KMeansProgram(points, 2, 0)
