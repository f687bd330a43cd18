"""The Dask engine: with the same seed, the memory engine's run, whatever the partitioning.

One 2-worker LocalCluster (processes) serves the module; the engine contract runs on it too.
"""

import json

import numpy as np
import pytest
from engine_contract import EngineContract, same_run

from dpcomm.data import synthetic_table
from dpcomm.engine.dask_engine import DaskEngine, partition_tasks
from dpcomm.engine.memory import simulate
from dpcomm.engine.report import privacy_report
from dpcomm.plan import LocalFlooding, Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

pytestmark = pytest.mark.slow

SEED = 7


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as connected,
    ):
        yield connected


def aggregate_program() -> AggregateProgram:
    table = synthetic_table(num_rows=3000, distribution="zipf", seed=3)
    sql = (
        "SELECT g1, g2, COUNT(*), SUM(m1), AVG(m2) FROM synthetic "
        "GROUP BY GROUPING SETS ((g1), (g2))"
    )
    return AggregateProgram.from_sql(sql, table, num_compute_nodes=6)


def assert_same(reference, run) -> None:
    same_run(reference, run)
    for mine, theirs in zip(reference.traffic, run.traffic, strict=True):
        # Beyond the contract: the same edges in the same order.
        assert np.array_equal(mine.senders, theirs.senders), mine.flow
        assert np.array_equal(mine.receivers, theirs.receivers), mine.flow
        assert np.array_equal(mine.counts, theirs.counts), mine.flow
    assert privacy_report(reference.privacy) == privacy_report(run.privacy)
    assert run.engine == "dask"


@pytest.mark.parametrize("partitions", [1, 3, 7])
@pytest.mark.parametrize(
    "countermeasure",
    [
        Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10),
        LocalFlooding(sampling_rate=0.3, num_dummies=2),
    ],
    ids=["scramblers", "local"],
)
def test_aggregate_is_the_memory_run(client, partitions, countermeasure):
    program = aggregate_program()
    run = DaskEngine(client, partitions=partitions).execute(
        program, countermeasure, delta=1e-4, seed=SEED
    )
    assert_same(simulate(program, countermeasure, delta=1e-4, seed=SEED), run)
    assert run.details["partitions"] == partitions


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_kmeans_is_the_memory_run(client, partitions):
    rng = np.random.default_rng(1)
    points = rng.normal(size=(600, 4)).astype(np.float32)
    program = KMeansProgram(points, 3, 3, seed=2)
    countermeasure = Scramblers(sampling_rate=0.25, batch_size=50, num_dummies=5)
    run = DaskEngine(client, partitions=partitions).execute(
        program, countermeasure, delta=1e-4, seed=SEED
    )
    reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
    assert_same(reference, run)
    assert np.array_equal(run.result, reference.result)


def test_partitions_hold_whole_scramblers():
    truth = np.zeros(10, dtype=np.int64)
    scrambler_of_source = np.array([2, 0, 1, 2, 0, 1, 3, 3, 0, 1], dtype=np.int64)
    tasks = partition_tasks(
        "f",
        truth,
        countermeasure=Scramblers(sampling_rate=0.5, batch_size=3, num_dummies=1),
        num_targets=2,
        scrambler_of_source=scrambler_of_source,
        batch_sizes=np.array([3, 3, 2, 2], dtype=np.int64),
        partitions=3,
    )
    assert [t.scramblers.tolist() for t in tasks] == [[0, 1], [2], [3]]
    assert [t.sources.tolist() for t in tasks] == [[1, 2, 4, 5, 8, 9], [0, 3], [6, 7]]
    assert tasks[0].scrambler_of_source.tolist() == [0, 1, 0, 1, 0, 1]


def test_a_local_cluster_for_the_run():
    program = aggregate_program()
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10)
    run = DaskEngine(workers=2).execute(program, countermeasure, delta=1e-4, seed=SEED)
    assert_same(simulate(program, countermeasure, delta=1e-4, seed=SEED), run)
    assert run.details["partitions"] == 2


class TestDaskEngineContract(EngineContract):
    @pytest.fixture(autouse=True)
    def _client(self, client):
        self._connected = client

    def engine(self):
        return DaskEngine(self._connected, partitions=3)


def cli(capsys, *argv):
    from dpcomm.cli.main import main

    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_cli_runs_on_dask_and_gives_the_memory_run(capsys):
    query = ["run", "aggregate", "--synthetic", 2000, "--seed", 7, "--json"]
    query += ["--sql", "SELECT g1, COUNT(*), SUM(m1) FROM t GROUP BY GROUPING SETS ((g1), (g2))"]
    status, out, _ = cli(capsys, *query, "--engine", "dask", "--partitions", 3)
    assert status == 0
    dask = json.loads(out)
    status, out, _ = cli(capsys, *query)
    assert status == 0
    memory = json.loads(out)
    assert dask["result"] == memory["result"]
    assert dask["report"]["engine"] == "dask" and dask["report"]["partitions"] == 3
    assert dask["report"]["privacy"] == memory["report"]["privacy"]
    assert dask["report"]["efficiency"]["traffic"] == memory["report"]["efficiency"]["traffic"]


@pytest.mark.parametrize("option", [["--scheduler", "tcp://127.0.0.1:1"], ["--partitions", 2]])
def test_dask_options_need_the_dask_engine(capsys, option):
    query = ["run", "kmeans", "--sources", 60, "--k", 2, "--iterations", 1, *option]
    status, out, err = cli(capsys, *query)
    assert status != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "only with --engine dask" in err
