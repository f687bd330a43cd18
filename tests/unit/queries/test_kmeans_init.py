"""K-means' initial centroids: chosen once from the seed, carried by the program, K up to 1,000."""

import numpy as np
import pytest

import dpcomm
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.kmeans import KMeansProgram, choose_initial_centroids
from dpcomm.queries.program import public_program

BLOBS = np.vstack([np.random.default_rng(3).normal(size=(40, 2)) + c for c in (0, 1e3, 2e3)])


def rows_of(points, centroids):
    """The row of ``points`` equal to each centroid (each must be one)."""
    found = [np.flatnonzero((np.asarray(points, np.float32) == c).all(axis=1)) for c in centroids]
    assert all(len(f) >= 1 for f in found)
    return [int(f[0]) for f in found]


def test_random_init_is_the_papers_k_random_points():
    centroids = choose_initial_centroids(BLOBS, 5, init="random", seed=4)
    chosen = np.sort(np.random.default_rng(4).choice(len(BLOBS), size=5, replace=False))
    assert np.array_equal(centroids, BLOBS[chosen].astype(np.float32))
    assert np.array_equal(KMeansProgram(BLOBS, 5, 1, seed=4).initial_centroids, centroids)


@pytest.mark.parametrize("seed", [0, 1, 2**100])
def test_kmeans_plus_plus_picks_distinct_points_one_per_separated_blob(seed):
    centroids = choose_initial_centroids(BLOBS, 3, init="k-means++", seed=seed)
    rows = rows_of(BLOBS, centroids)
    assert sorted(row // 40 for row in rows) == [0, 1, 2]  # D² sampling: a point per blob
    again = choose_initial_centroids(BLOBS, 3, init="k-means++", seed=seed)
    assert np.array_equal(again, centroids)


def test_the_seed_chooses_the_start():
    starts = {
        choose_initial_centroids(BLOBS, 6, init="k-means++", seed=s).tobytes() for s in range(4)
    }
    assert len(starts) == 4


def test_the_start_travels_in_the_public_program():
    program = KMeansProgram(BLOBS, 3, 2, seed=5, init="k-means++")
    public = public_program(program)
    assert public.points is None
    assert np.array_equal(public.initial_centroids, program.initial_centroids)
    assert (public.init, public.init_public, public.name) == ("k-means++", False, program.name)
    assert program.name == "K-means, K=3, I=2, k-means++ start"


def test_the_caveat_says_where_the_start_came_from():
    assert "chosen by the start seed" in KMeansProgram(BLOBS, 3, 1).initialisation_caveat
    caveat = KMeansProgram(BLOBS, 3, 1, init="k-means++").initialisation_caveat
    assert "k-means++, which reads every source's point" in caveat
    public = choose_initial_centroids(BLOBS[:10], 3, seed=1)
    program = KMeansProgram(BLOBS, 3, 1, initial=public, init_public=True)
    assert program.initialisation_caveat is None
    assert program.name == "K-means, K=3, I=1, random start from public points"


@pytest.mark.parametrize("init", ["kmeans++", None, ["random"], np.array([1.0, 2.0])])
def test_an_unknown_init_is_refused(init):
    with pytest.raises(InvalidParameterError, match=r"^invalid init: expected 'random' or"):
        KMeansProgram(BLOBS, 3, 1, init=init)
    with pytest.raises(InvalidParameterError, match=r"^invalid init: "):
        choose_initial_centroids(BLOBS, 3, init=init)


def test_k_up_to_1000_one_compute_node_each():
    points = np.random.default_rng(0).normal(size=(1000, 2))
    program = KMeansProgram(points, 1000, 2)
    computes = [g for g in program.plan.groups if g.name == "compute@1"]
    assert computes[0].count == 1000
    run = dpcomm.kmeans(points, k=1000, iterations=1, countermeasure=dpcomm.NoCountermeasure())
    assert run.centroids.shape == (1000, 2)
    with pytest.raises(InvalidParameterError, match=r"^invalid k: .*\[1, 1,000\].* got 1001"):
        dpcomm.kmeans(points, k=1001, iterations=1, countermeasure=dpcomm.NoCountermeasure())


def test_public_init_points_give_the_start():
    pool = BLOBS[::7]
    run = dpcomm.kmeans(
        BLOBS,
        k=3,
        iterations=1,
        init="k-means++",
        init_points=pool,
        start_seed=2,
        countermeasure=dpcomm.NoCountermeasure(),
    )
    expected = choose_initial_centroids(pool, 3, init="k-means++", seed=2)
    assert np.array_equal(run.program.initial_centroids, expected)
    assert run.program.init_public and not any(
        "initial centroids" in c for c in run.report.privacy.caveats
    )
    given = BLOBS[[5, 45, 85]]  # K public centroids with init="random": given as they are
    run = dpcomm.kmeans(
        BLOBS,
        k=3,
        iterations=1,
        init="random",
        init_points=given,
        countermeasure=dpcomm.NoCountermeasure(),
    )
    assert np.array_equal(run.program.initial_centroids, given.astype(np.float32))
    with pytest.raises(InvalidParameterError, match=r"^invalid k: .*\(the init_points\)"):
        dpcomm.kmeans(
            BLOBS, k=4, iterations=1, init_points=given, countermeasure=dpcomm.NoCountermeasure()
        )
    with pytest.raises(InvalidParameterError, match=r"^invalid init_points: .*dimension 2"):
        dpcomm.kmeans(
            BLOBS,
            k=1,
            iterations=1,
            init_points=given[:, :1],
            countermeasure=dpcomm.NoCountermeasure(),
        )
