"""The K-means release audit's runs are runs of the program: run 0 with the engine's seed is
the in-memory engine's first iteration (same messages per compute node, same delivered
points); its neighbouring tables differ in one point; its parameters are checked."""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import messages_per_target

import dpcomm
from dpcomm.engine.memory import simulate
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.kmeans_audit import (
    audit_kmeans_release,
    audited_kmeans,
    contributions,
    kmeans_neighbours,
    seeded_kmeans_fault,
    traffic_runs,
)
from dpcomm.protocol.randomness import Randomness

SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.5, batch_size=6, num_dummies=4)


def _per_target(run, flow: str) -> list[int]:
    """Messages each compute node of ``flow`` received, in target order."""
    return messages_per_target(run, flow, lambda name: name.startswith(flow))


@pytest.mark.parametrize("pair", ["others-on-destination", "others-on-source"])
def test_run_zero_is_the_memory_engines_first_iteration(pair: str) -> None:
    neighbours = kmeans_neighbours(pair=pair, bounds=(0.0, 20.0), num_clusters=3, num_sources=6)
    for points in neighbours.points():
        program = audited_kmeans(points, neighbours, dpcomm.Laplace(1.0))
        for seed in (0, 1):
            counts, delivered = traffic_runs(
                program, SCRAMBLERS, first=0, stop=3, randomness=Randomness(seed)
            )
            run = simulate(program, SCRAMBLERS, delta=1e-4, seed=seed)
            assert counts[0].tolist() == _per_target(run, "iteration 1")
            assert np.array_equal(delivered[0], run.delivered["iteration 1"])


def test_the_tables_differ_in_one_point_clamped_and_centred() -> None:
    neighbours = kmeans_neighbours(
        pair="others-on-destination", bounds=(0.0, 20.0), num_clusters=2, num_sources=3
    )
    d, d_prime = neighbours.points()
    assert (d[1:] == d_prime[1:]).all() and not (d[0] == d_prime[0]).all()
    added = [
        contributions(audited_kmeans(p, neighbours, dpcomm.Laplace(1.0)))[1] for p in (d, d_prime)
    ]
    # (x, y) centred on (10, 10) in the cluster of the point: source 0 clamped to (0, 0) in D.
    assert added[0][0].tolist() == [[-10.0, -10.0, 1.0], [0.0, 0.0, 0.0]]
    assert added[1][0].tolist() == [[0.0, 0.0, 0.0], [10.0, 10.0, 1.0]]
    assert added[0][1].tolist() == [[0.0, 0.0, 0.0], [-10.0, 10.0, 1.0]]
    unclamped = contributions(audited_kmeans(d, neighbours, dpcomm.Laplace(1.0)), clamped=False)
    assert unclamped[1][0, 0, 0] == -1010.0


def test_the_own_row_fault_scales_the_sums_noise_only() -> None:
    neighbours = kmeans_neighbours(
        pair="others-on-source", bounds=(0.0, 20.0), num_clusters=2, num_sources=3
    )
    release = audited_kmeans(neighbours.points()[0], neighbours, dpcomm.Laplace(2.0)).release
    faulty = seeded_kmeans_fault(release, "own-row")
    ratios = [f.scale / c.scale for f, c in zip(faulty.noises, release.noises, strict=True)]
    assert ratios == pytest.approx([2 / 3, 2 / 3, 1.0])  # W against 1.5 W; COUNT(*) 2 in both
    assert [f.epsilon for f in faulty.noises] == [c.epsilon for c in release.noises]


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ({"fault": "bogus"}, "fault"),
        ({"aggregate": "AVG("}, "aggregate"),
        ({"runs": 10}, "runs"),
        ({"bounds": (3.0, 3.0)}, "bounds"),
        ({"num_clusters": 1}, "num_clusters"),
        (
            {"countermeasure": dpcomm.LocalFlooding(sampling_rate=0.5, num_dummies=1)},
            "countermeasure",
        ),
    ],
)
def test_bad_parameters_are_refused(arguments: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        audit_kmeans_release(**arguments)  # type: ignore[arg-type]
