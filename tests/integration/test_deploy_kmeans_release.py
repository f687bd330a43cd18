"""K-means released over a deployment written for several hosts (`deploy kmeans-configs`).

The configs are written by the command line from a table's columns; every node then runs from
its config over mutual TLS on loopback (in one process here), each config given the same seed,
and the round is the in-memory engine's run of the same program with that seed: the same
routing of every iteration and the same centroids up to the release's noise (OpenDP's, never
seeded: at ε2 = 10⁹ it moves a centroid by ~1e-8).
"""

from __future__ import annotations

import dataclasses
import socket

import numpy as np
import pytest
from tests.conftest import written_credentials

from dpcomm.engine.memory import simulate
from dpcomm.engine.network import launcher
from dpcomm.engine.network.deploy import result_state
from dpcomm.engine.network.spec import NodeConfig
from dpcomm.plan import Scramblers
from dpcomm.queries.kmeans import KMeansProgram

SEED = 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_released_kmeans_round_from_written_configs_is_the_memory_run(cli, tmp_path) -> None:
    table = tmp_path / "points.csv"
    rng = np.random.default_rng(3)
    rows = np.vstack([rng.normal(c, 0.3, (12, 2)) for c in (0.0, 3.0)])
    table.write_text("x,y\n" + "\n".join(f"{a:.4f},{b:.4f}" for a, b in rows) + "\n")
    out = tmp_path / "deployment"
    status, _, err = cli(
        "deploy", "kmeans-configs", "--data", table, "--columns", "x,y", "--k", "2",
        "--iterations", "2", "--mechanism", "scrambler", "--sampling", "0.5", "--batch", "6",
        "--dummies", "2", "--release", "laplace", "--release-epsilon", "1e9",
        "--bounds=-1:4", "--out", out, "--coordinator-port", _free_port(),
        "--idle-seconds", "5", "--timeout", "60",
    )  # fmt: skip
    assert status == 0, err
    assert "the release (drawn by the compute nodes): ε2 = 1e+09" in err
    configs = [NodeConfig.load(path) for path in sorted((out / "configs").glob("*.json"))]
    assert all(c.round.seed is None for c in configs)  # no seed is written
    program = configs[0].round.public_program
    assert isinstance(program, KMeansProgram) and program.release is not None
    assert program.release.bounds == ((-1.0, 4.0), (-1.0, 4.0))
    assert program.release.columns == ("x", "y")
    seeded = [
        dataclasses.replace(c, round=dataclasses.replace(c.round, seed=SEED)) for c in configs
    ]
    pki = out / "pki"
    credentials = written_credentials(seeded, pki)
    outcome = launcher.run_tls_group(seeded, credentials)
    assert not outcome.errors
    state = result_state(program, outcome)
    local = dataclasses.replace(program, points=rows.astype(np.float32), _exact={})
    countermeasure = Scramblers(sampling_rate=0.5, batch_size=6, num_dummies=2)
    reference = simulate(local, countermeasure, delta=1e-4, seed=SEED)
    assert state.iterations_done == 2
    for flow, mask in reference.delivered.items():  # every iteration's tuples, source by source
        real = [s.flows[flow].real for s in sorted(outcome.sources, key=lambda s: s.index)]
        assert real == mask.tolist(), flow
    assert np.allclose(state.centroids, reference.result, atol=1e-4)
    assert not np.allclose(state.centroids, program.initial_centroids, atol=1e-3)


def test_deploy_kmeans_configs_refuses_a_seed_and_bounds_without_a_release(cli, tmp_path) -> None:
    status, _, err = cli(
        "deploy", "kmeans-configs", "--sources", "20", "--k", "2", "--seed", "1",
        "--out", tmp_path / "d",
    )  # fmt: skip
    assert status != 0 and "--seed" in err
    status, _, err = cli(
        "deploy", "kmeans-configs", "--sources", "20", "--k", "2", "--bounds", "0:1",
        "--out", tmp_path / "d",
    )  # fmt: skip
    assert status != 0 and "--bounds" in err and "--release" in err


@pytest.mark.parametrize("missing", ["--out"])
def test_deploy_kmeans_configs_needs_an_output_folder(cli, missing: str) -> None:
    status, _, err = cli("deploy", "kmeans-configs", "--sources", "20")
    assert status == 2 and missing in err
