"""The Dask engine: with the same seed, the memory engine's run, whatever the partitioning.

One 2-worker LocalCluster (processes) serves the module; the engine contract runs on it too,
both with the traffic gathered edge by edge and with the traffic kept as summaries.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from engine_contract import EngineContract, same_run
from tests.conftest import local_dask_client

from dpcomm.data import synthetic_table, write_table
from dpcomm.engine.dask_engine import DaskEngine
from dpcomm.engine.memory import simulate
from dpcomm.engine.partition import partition_cuts
from dpcomm.pipeline.report import privacy_report
from dpcomm.pipeline.runs import run_aggregate, run_kmeans
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.builders import aggregate_plan
from dpcomm.plan.routes import Routes
from dpcomm.plan.transform import scrambler_group_name, transform
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram, choose_initial_centroids

pytestmark = pytest.mark.slow

SEED = 7
SQL = (
    "SELECT g1, g2, COUNT(*), SUM(m1), AVG(m2), MIN(m1), MAX(m2) FROM synthetic "
    "GROUP BY GROUPING SETS ((g1), (g2), ())"
)


@pytest.fixture(scope="module")
def client():
    with local_dask_client() as connected:
        yield connected


def zipf_program(rows: int = 3000) -> AggregateProgram:
    table = synthetic_table(num_rows=rows, distribution="zipf", seed=3)
    return AggregateProgram.from_sql(SQL, table, num_targets=6)


def assert_same(reference, run, *, edges: bool) -> None:
    same_run(reference, run)
    if edges:
        for mine, theirs in zip(reference.traffic, run.traffic, strict=True):
            # Beyond the contract: the same edges in the same order.
            assert np.array_equal(mine.senders, theirs.senders), mine.flow
            assert np.array_equal(mine.receivers, theirs.receivers), mine.flow
            assert np.array_equal(mine.counts, theirs.counts), mine.flow
    else:
        assert all(not hasattr(f, "senders") for f in run.traffic)
    assert run.efficiency == reference.efficiency
    assert privacy_report(reference.privacy) == privacy_report(run.privacy)
    assert run.engine == "dask"


COUNTERMEASURES = {
    "scramblers": Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10),
    "capped": Scramblers(sampling_rate=0.3, batch_size=70, num_dummies=40, capped=True),
    "local": LocalFlooding(sampling_rate=0.3, num_dummies=2),
    "none": NoCountermeasure(),
}


@pytest.mark.parametrize("collect", [True, False], ids=["edges", "summaries"])
@pytest.mark.parametrize("partitions", [1, 3, 7])
@pytest.mark.parametrize("countermeasure", sorted(COUNTERMEASURES))
def test_aggregate_is_the_memory_run(client, partitions, countermeasure, collect):
    program = zipf_program()
    chosen = COUNTERMEASURES[countermeasure]
    run = DaskEngine(client, partitions=partitions, collect_traffic=collect).execute(
        program, chosen, delta=1e-4, seed=SEED
    )
    assert_same(simulate(program, chosen, delta=1e-4, seed=SEED), run, edges=collect)
    assert run.details.partitions == partitions
    assert run.details.to_dict()["partitions"] == partitions


@pytest.mark.parametrize("collect", [True, False], ids=["edges", "summaries"])
@pytest.mark.parametrize("partitions", [1, 3, 7])
@pytest.mark.parametrize("countermeasure", ["scramblers", "local", "none"])
def test_kmeans_is_the_memory_run(client, partitions, countermeasure, collect):
    rng = np.random.default_rng(1)
    points = rng.normal(size=(600, 4)).astype(np.float32)
    program = KMeansProgram(points, 3, 3, seed=2)
    chosen = COUNTERMEASURES[countermeasure]
    if isinstance(chosen, Scramblers):
        chosen = Scramblers(sampling_rate=0.25, batch_size=50, num_dummies=5)
    run = DaskEngine(client, partitions=partitions, collect_traffic=collect).execute(
        program, chosen, delta=1e-4, seed=SEED
    )
    reference = simulate(program, chosen, delta=1e-4, seed=SEED)
    assert_same(reference, run, edges=collect)
    assert np.array_equal(run.result, reference.result)


def test_the_reports_are_the_memory_engines(client):
    program = zipf_program()
    chosen = COUNTERMEASURES["scramblers"]
    memory = run_aggregate(program, chosen, delta=1e-4, seed=SEED)
    dask = run_aggregate(
        program,
        chosen,
        delta=1e-4,
        seed=SEED,
        engine=DaskEngine(client, partitions=4, collect_traffic=False),
    )
    assert dask.rows == memory.rows
    assert dask.baseline.engine == "dask" and dask.baseline.privacy is None
    assert dask.report.privacy == memory.report.privacy
    assert dask.report.utility == memory.report.utility
    mine, theirs = dask.report.efficiency.to_dict(), memory.report.efficiency.to_dict()
    for volatile in ("engine", "seconds", "messages_per_second"):
        mine.pop(volatile), theirs.pop(volatile)
    assert mine == theirs


def test_kmeans_report_is_the_memory_engines(client):
    """With k-means++: the start chosen once from the seed reaches the workers in the program's
    public description, so both engines start from it and end at the same centroids."""
    rng = np.random.default_rng(4)
    points = rng.normal(size=(400, 3)).astype(np.float32)
    labels = (points[:, 0] > 0).astype(np.int64)
    program = KMeansProgram(points, 2, 2, seed=1, init="k-means++")
    assert np.array_equal(
        program.initial_centroids, choose_initial_centroids(points, 2, init="k-means++", seed=1)
    )
    chosen = Scramblers(sampling_rate=0.3, batch_size=40, num_dummies=4)
    options = {"test_points": points[:100], "test_labels": labels[:100], "delta": 1e-4}
    memory = run_kmeans(program, chosen, seed=SEED, **options)
    dask = run_kmeans(program, chosen, seed=SEED, engine=DaskEngine(client), **options)
    assert np.array_equal(dask.centroids, memory.centroids)
    assert dask.report.utility == memory.report.utility
    assert dask.report.privacy.caveats == memory.report.privacy.caveats


def test_partitions_hold_whole_scramblers():
    # 10 sources in batches of 3, 3, 2, 2 (largest first): cuts at 0, 3, 6, 8, 10 only.
    plan = aggregate_plan(num_sources=10, flows=["f"], num_targets=[5])
    routes = Routes(transform(plan, Scramblers(sampling_rate=0.0, batch_size=3, num_dummies=1)))
    parts = partition_cuts(routes, 10, 3)
    group = scrambler_group_name("f")
    assert [(p.start, p.stop, p.ownership.ranges[group]) for p in parts] == [
        (0, 3, (0, 1)),
        (3, 6, (1, 2)),
        (6, 10, (2, 4)),
    ]
    # Two scrambled flows with different batches: only common boundaries (0, 6, 12).
    plan = aggregate_plan(num_sources=12, flows=["a", "b"], num_targets=[5, 5])
    chosen = {
        "a": Scramblers(sampling_rate=0.0, batch_size=3, num_dummies=1),
        "b": Scramblers(sampling_rate=0.0, batch_size=6, num_dummies=1),
    }
    routes = Routes(transform(plan, chosen))
    parts = partition_cuts(routes, 12, 4)
    assert [(p.start, p.stop) for p in parts] == [(0, 6), (6, 12)]
    ranges = parts[1].ownership.ranges
    assert ranges[scrambler_group_name("a")] == (2, 4)
    assert ranges[scrambler_group_name("b")] == (1, 2)
    assert ranges["sources"] == (6, 12)
    routes = Routes(transform(aggregate_plan(num_sources=5, flows=["f"], num_targets=[2]), {}))
    parts = partition_cuts(routes, 5, 9)
    assert [(p.start, p.stop, dict(p.ownership.ranges)) for p in parts] == [
        (i, i + 1, {"sources": (i, i + 1)}) for i in range(5)
    ]


def test_a_local_cluster_for_the_run():
    program = zipf_program()
    chosen = COUNTERMEASURES["scramblers"]
    run = DaskEngine(workers=2).execute(program, chosen, delta=1e-4, seed=SEED)
    assert_same(simulate(program, chosen, delta=1e-4, seed=SEED), run, edges=True)
    assert run.details.partitions == 2 and run.details.workers == 2


class TestDaskEngineContract(EngineContract):
    @pytest.fixture(autouse=True)
    def _client(self, client):
        self._connected = client

    def engine(self):
        return DaskEngine(self._connected, partitions=3)


class TestDaskEngineContractWithSummaries(EngineContract):
    @pytest.fixture(autouse=True)
    def _client(self, client):
        self._connected = client

    def engine(self):
        return DaskEngine(self._connected, partitions=4, collect_traffic=False)


def _same_documents(dask: dict, memory: dict) -> None:
    assert dask["result"] == memory["result"]
    assert dask["report"]["engine"] == "dask"
    assert dask["report"]["privacy"] == memory["report"]["privacy"]
    assert dask["report"]["utility"] == memory["report"]["utility"]
    assert dask["report"]["efficiency"]["traffic"] == memory["report"]["efficiency"]["traffic"]


def test_the_cli_runs_synthetic_rows_on_the_workers(cli):
    query = ["run", "aggregate", "--synthetic", 2000, "--seed", 7, "--json"]
    query += ["--sql", "SELECT g1, COUNT(*), SUM(m1) FROM t GROUP BY GROUPING SETS ((g1), (g2))"]
    status, out, _ = cli(*query, "--engine", "dask", "--partitions", 3, "--workers", 2)
    assert status == 0
    dask = json.loads(out)
    status, out, _ = cli(*query)
    assert status == 0
    _same_documents(dask, json.loads(out))
    assert dask["report"]["partitions"] == 3


def test_the_cli_reads_a_parquet_directory_in_partitions(cli, tmp_path, client):
    """On the module's cluster (--scheduler): the test above starts one of the CLI's own."""
    table = synthetic_table(num_rows=1500, seed=5)
    folder = tmp_path / "parts"
    folder.mkdir()
    for index, start in enumerate(range(0, 1500, 500)):
        write_table(table.take(np.arange(start, start + 500)), folder / f"part-{index}.parquet")
    query = ["run", "aggregate", "--data", folder, "--seed", 3, "--json", "--batch", 50]
    query += ["--sql", "SELECT g3, COUNT(*), AVG(m2) FROM t GROUP BY g3"]
    address = client.scheduler.address
    status, out, err = cli(*query, "--engine", "dask", "--partitions", 4, "--scheduler", address)
    assert status == 0, err
    dask = json.loads(out)
    status, out, _ = cli(*query)
    assert status == 0
    _same_documents(dask, json.loads(out))


@pytest.mark.parametrize(
    "option", [["--scheduler", "tcp://127.0.0.1:1"], ["--partitions", 2], ["--workers", 2]]
)
def test_dask_options_need_the_dask_engine(cli, option):
    query = ["run", "kmeans", "--sources", 60, "--k", 2, "--iterations", 1, *option]
    status, out, err = cli(*query)
    assert status != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "only with --engine dask" in err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_external_scheduler_and_two_workers(tmp_path):
    """`dask scheduler` and two `dask worker` processes on loopback, as on a real cluster (each
    worker a process of its own, without a nanny process to restart it)."""
    dask = shutil.which("dask", path=os.path.dirname(sys.executable))
    if dask is None:
        pytest.skip("the `dask` command is not installed next to this Python")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    logs = [open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "w1", "w2")]  # noqa: SIM115
    processes = [
        subprocess.Popen(
            [
                dask,
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--dashboard-address",
                ":0",
                "--no-show",
            ],
            stdout=logs[0],
            stderr=subprocess.STDOUT,
            env=environment,
        )
    ]
    try:
        for log in logs[1:]:
            processes.append(
                subprocess.Popen(
                    [
                        dask,
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--no-dashboard",
                        "--memory-limit",
                        "2GB",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=environment,
                )
            )
        from distributed import Client

        with Client(address, timeout=60) as connected:
            connected.wait_for_workers(2, timeout=60)
            program = zipf_program(4000)
            chosen = COUNTERMEASURES["scramblers"]
            run = DaskEngine(scheduler=address, partitions=5).execute(
                program, chosen, delta=1e-4, seed=SEED
            )
            assert run.details.workers == 2
            assert_same(simulate(program, chosen, delta=1e-4, seed=SEED), run, edges=True)
            summaries = DaskEngine(connected, collect_traffic=False).execute(
                program, chosen, delta=1e-4, seed=SEED
            )
            assert_same(simulate(program, chosen, delta=1e-4, seed=SEED), summaries, edges=False)
    finally:
        # The workers first, each gone before the scheduler is stopped: a worker stopped with
        # its scheduler spent seconds trying to reach it again.
        deadline = time.monotonic() + 30
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in logs:
            log.close()


def test_a_bad_row_on_a_worker_is_a_one_line_error(cli, tmp_path):
    import duckdb

    path = tmp_path / "names.parquet"
    duckdb.sql(
        "SELECT CASE WHEN i = 900 THEN 'a much longer name' ELSE 'ann' END AS name, i AS v "
        "FROM range(1000) t(i)"
    ).write_parquet(str(path))
    query = ["run", "aggregate", "--data", path, "--max-text-bytes", 5, "--batch", 50]
    query += ["--sql", "SELECT name, COUNT(*) FROM t GROUP BY name"]
    status, out, err = cli(*query)
    assert status != 0 and out == ""
    memory = err.strip().splitlines()
    assert len(memory) == 1 and "column name" in memory[0] and "18 bytes" in memory[0], err
    # In its own process, as a user runs it: the worker's logs must not add to the one line
    # (one worker process of the command's own LocalCluster runs the 4 partitions).
    command = shutil.which("dpcomm", path=os.path.dirname(sys.executable))
    assert command is not None
    done = subprocess.run(
        [command, *map(str, query), "--engine", "dask", "--partitions", "4", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().splitlines() == memory
