"""The Dask engine when the cluster fails: a worker killed mid-run, a scheduler that is not one.

A worker killed mid-run (SIGKILL, by a worker plugin, at a chosen task) costs the run nothing:
the lost partitions are run again and the run is still the memory engine's. An address where
no Dask scheduler answers, or that is not an address, is a one-line error within the connect
timeout, from Python and from the CLI.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from tests.conftest import local_dask_client

from dpcomm.engine.dask_engine import DaskEngine
from dpcomm.engine.memory import simulate
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")

SEED = 7
CHOSEN = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=5)


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[distributed.Client]:
    """Two worker processes of their own: the tests kill them."""
    with local_dask_client() as connected:
        yield connected


def _aggregate() -> AggregateProgram:
    from dpcomm.data import synthetic_table

    table = synthetic_table(num_rows=3000, distribution="zipf", seed=3)
    sql = "SELECT g1, g2, COUNT(*), SUM(m1), MAX(m2) FROM t GROUP BY GROUPING SETS ((g1), (g2))"
    return AggregateProgram.from_sql(sql, table, num_targets=6)


def _kmeans() -> KMeansProgram:
    points = np.random.default_rng(1).normal(size=(600, 4)).astype(np.float32)
    return KMeansProgram(points, 3, 3, seed=2)


# (program, traffic gathered edge by edge?, the task whose start kills its worker, its rank
# among that worker's tasks of the kind): the first stage, a later K-means iteration (the
# earlier stages' observations are lost with the worker), and the last task, the channels.
KILLS = {
    "aggregate-first-stage": (_aggregate, True, "_stage_task", 1),
    "kmeans-third-stage": (_kmeans, False, "_stage_task", 5),
    "kmeans-channels": (_kmeans, False, "_channels_task", 1),
    "kmeans-edges-later-stage": (_kmeans, True, "_stage_task", 4),
}


@pytest.mark.parametrize("case", sorted(KILLS))
def test_a_worker_killed_mid_run_leaves_the_run_unchanged(cluster_client, tmp_path, case):
    from _dask_faults import KillWorkerOnce
    from engine_contract import same_run

    make, collect, task, nth = KILLS[case]
    program = make()
    chosen = Scramblers(sampling_rate=0.25, batch_size=50, num_dummies=5)
    reference = simulate(program, chosen, delta=1e-4, seed=SEED)
    cluster_client.wait_for_workers(2, timeout=120)  # the previous test's victim is back
    token = tmp_path / "killed"
    name = f"kill-{uuid.uuid4().hex}"
    cluster_client.register_plugin(KillWorkerOnce(task, str(token), nth), name=name)
    try:
        run = DaskEngine(cluster_client, partitions=6, collect_traffic=collect).execute(
            program, chosen, delta=1e-4, seed=SEED
        )
    finally:
        cluster_client.unregister_worker_plugin(name)
    assert token.exists(), "no worker was killed: the test tested nothing"
    same_run(reference, run)
    assert run.efficiency == reference.efficiency
    if collect:
        for mine, theirs in zip(reference.traffic, run.traffic, strict=True):
            assert np.array_equal(mine.senders, theirs.senders), mine.flow
            assert np.array_equal(mine.receivers, theirs.receivers), mine.flow


class MuteServer:
    """A TCP server on loopback that accepts every connection and never says a word."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.address = f"tcp://127.0.0.1:{self.socket.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return  # closed
            self.accepted.append(connection)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes accept() (close alone does not, on Linux)
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        for connection in self.accepted:
            connection.close()
        self.thread.join(timeout=10)


@pytest.fixture
def mute() -> Iterator[MuteServer]:
    server = MuteServer()
    yield server
    server.close()


def test_a_server_that_does_not_speak_dask_fails_within_the_timeout(mute):
    engine = DaskEngine(scheduler=mute.address, connect_timeout=1)
    outcome: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            engine.execute(_aggregate(), CHOSEN, delta=1e-4, seed=SEED)
            outcome["error"] = None
        except BaseException as error:
            outcome["error"] = error

    # A bounded wait, not a measured time: without the fix the run never returns.
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the run hangs on a server that says nothing"
    error = outcome["error"]
    assert isinstance(error, InvalidParameterError), error
    assert error.name == "scheduler" and error.given == mute.address
    assert "Dask scheduler" in str(error) and "no answer" in str(error)
    assert mute.accepted, "the engine never connected"


def test_the_cli_says_so_in_one_line(cli, mute):
    query = ["run", "aggregate", "--synthetic", 200, "--engine", "dask"]
    query += ["--sql", "SELECT g1, COUNT(*) FROM t GROUP BY g1"]
    status, out, err = cli(*query, "--scheduler", mute.address, "--connect-timeout", 1)
    assert status != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--scheduler" in lines[0] and "no answer" in lines[0], err
    assert "within 1 s" in lines[0], err
    assert "Traceback" not in err


def test_a_dask_worker_is_not_a_scheduler(cluster_client):
    worker = next(iter(cluster_client.scheduler_info()["workers"]))
    with pytest.raises(InvalidParameterError, match="a Dask Worker"):
        DaskEngine(scheduler=worker, connect_timeout=30).execute(
            _aggregate(), CHOSEN, delta=1e-4, seed=SEED
        )


def test_nothing_listening_is_a_one_line_error(cli):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    query = ["run", "kmeans", "--sources", 60, "--k", 2, "--iterations", 1, "--engine", "dask"]
    status, out, err = cli(*query, "--scheduler", address)
    assert status != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--scheduler" in lines[0] and address in lines[0], err
