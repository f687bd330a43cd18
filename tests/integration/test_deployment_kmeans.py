"""A deployed K-means run on loopback: I iterations over mutual TLS, sealed fixed-size frames."""

import multiprocessing

import numpy as np
import pytest

from dpcomm.data import load_image_dataset
from dpcomm.engine.network.deploy_kmeans import (
    deploy_local_kmeans,
    kmeans_node_configs,
    kmeans_round_spec,
)
from dpcomm.engine.network.runtime_kmeans import decode_vector, encode_vector
from dpcomm.engine.network.runtime_spec import NodeConfig
from dpcomm.plan import Scramblers
from dpcomm.queries.kmeans import KMeansProgram, nearest_centroid, update_centroids

COUNTERMEASURE = Scramblers(sampling_rate=0.9, batch_size=50, num_dummies=5)
SOURCES, K, ITERATIONS = 300, 4, 2


@pytest.fixture(scope="module")
def data():
    return load_image_dataset("mnist5k")


@pytest.fixture(scope="module")
def program(data):
    return KMeansProgram(data.train_images[:SOURCES], K, ITERATIONS, seed=1)


@pytest.fixture(scope="module")
def run(program, data):
    report = deploy_local_kmeans(
        program,
        COUNTERMEASURE,
        test_points=data.test_images,
        test_labels=data.test_labels,
        delta=1e-4,
        seed=3,
        timeout=90,
        collect_seconds=15,
    )
    return program, report


def test_vectors_and_configs_round_trip(program):
    spec = kmeans_round_spec(program, COUNTERMEASURE, seed=0)
    payload = encode_vector(7, 1, 2, program.points[7])
    source, iteration, centroid, vector = decode_vector(spec, payload)
    assert (source, iteration, centroid) == (7, 1, 2)
    np.testing.assert_array_equal(vector, program.points[7])  # pixels are exact in float32
    configs = kmeans_node_configs(program, spec)
    assert NodeConfig.from_json(configs["source-7"].to_json()) == configs["source-7"]
    assert len(configs["result"].row["centroids"]) == K
    assert spec.frame_size > 784 * 4


@pytest.mark.slow
def test_kmeans_deployment_completes_with_equal_frames(run):
    _, report = run
    assert report.errors == {}
    assert report.lost_scramblers == ()
    deployment = report.deployment
    assert deployment.frame_lengths == (deployment.frame_size,)
    assert all(link.bytes == link.frames * deployment.frame_size for link in report.links)
    # Receivers read what was sent, but for control frames to a peer already hanging up.
    assert all(link.frames_received <= link.frames for link in report.links)
    assert deployment.dropped_total() == 0
    # Per iteration: K centroid frames per source to the scramblers and on to the sources,
    # one frame per source, and the batches with d dummies per scrambler.
    per_iteration = 2 * SOURCES * K + SOURCES + SOURCES + 6 * COUNTERMEASURE.num_dummies
    assert deployment.data_frames == ITERATIONS * per_iteration


@pytest.mark.slow
def test_centroids_are_the_means_of_the_delivered_points(run):
    program, report = run
    centroids = program.initial_centroids
    np.testing.assert_array_equal(report.centroid_history[0], centroids)
    for iteration, rows in enumerate(report.deployment.delivered.values()):
        used = np.zeros(SOURCES, dtype=bool)
        used[list(rows)] = True
        assignment = nearest_centroid(program.points, centroids)
        centroids = update_centroids(program.points, assignment, used, centroids)
        np.testing.assert_allclose(report.centroid_history[iteration + 1], centroids, atol=1e-6)
        assert sum(report.counts[iteration]) == used.sum()
    np.testing.assert_allclose(report.centroids, centroids, atol=1e-6)
    # R_σ with σ = 0.9 and K = 4 keeps about (1 − σ) + σ/K = 32.5% of the points.
    for used in report.tuples_used_per_iteration:
        assert 0.2 * SOURCES < used < 0.45 * SOURCES


@pytest.mark.slow
def test_rand_index_and_privacy_are_reported(run):
    _, report = run
    assert 0.0 < report.rand_index <= 1.0
    assert 0.0 < report.rand_index_nonprivate <= 1.0
    assert report.privacy["epsilon"] != "inf"
    sizes = {part["batch_size"] for c in report.privacy["clusters"] for part in c["parts"]}
    assert COUNTERMEASURE.batch_size in sizes
    assert report.summary()["wire"]["frame_lengths_observed"] == [report.deployment.frame_size]


@pytest.mark.slow
def test_no_process_left_behind(run):
    assert multiprocessing.active_children() == []
