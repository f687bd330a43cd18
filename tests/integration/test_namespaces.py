"""Nodes on separate hosts: network namespaces joined by a veth pair, `dpcomm node run` each.

Host A (10.231.<k>.1) runs the coordinator, the result node, the compute nodes and the
scramblers; host B (10.231.<k>.2) runs the sources. Every node is its own `dpcomm node run`
process started in its namespace with `ip netns exec`; all traffic between the hosts crosses
the veth link. Skipped, with the reason, where namespaces cannot be made (not root, no
iproute2, no CAP_NET_ADMIN in a container).
"""

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import write_deployment
from dpcomm.engine.network.records import GroupOutcome, decode
from dpcomm.engine.network.spec import NodeConfig
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results

pytestmark = pytest.mark.slow

SQL = "SELECT g1, COUNT(*) AS n, SUM(m1) AS total FROM t GROUP BY g1"
DPCOMM = str(Path(sys.executable).with_name("dpcomm"))


def test_a_round_across_two_hosts(tmp_path, two_hosts):
    (host_a, address_a), (host_b, address_b) = two_hosts
    # One process per node: 12 sources (two scramblers of 6) keep the round small.
    table = synthetic_table(num_rows=12, seed=4)
    program = AggregateProgram.from_sql(SQL, table, num_targets=2)
    # σ = 0: every tuple is delivered, so the result is DuckDB's over the whole table.
    countermeasure = Scramblers(sampling_rate=0.0, batch_size=6, num_dummies=2)
    paths = write_deployment(
        program,
        countermeasure,
        tmp_path / "deployment",
        coordinator_host=address_a,
        coordinator_port=7400,
        idle_seconds=20,
        timeout=90,
    )
    pki = tmp_path / "deployment" / "pki"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    try:
        for name, path in paths.items():
            config = NodeConfig.load(path)
            host, address = (host_b, address_b) if config.role == "source" else (host_a, address_a)
            if config.role != "coordinator":
                path.write_text(
                    NodeConfig.from_json(config.to_json())
                    .__class__(
                        **{**config.__dict__, "listen_host": address, "advertise_host": address}
                    )
                    .to_json()
                )
            processes[name] = subprocess.Popen(
                [
                    "ip", "netns", "exec", host, DPCOMM, "node", "run",
                    "--role", config.role, "--config", str(path),
                    "--ssl-certfile", str(pki / f"{name}.pem"),
                    "--ssl-keyfile", str(pki / f"{name}.key"),
                    "--ssl-ca-certfile", str(pki / "ca.pem"),
                    "--output", str(outputs / f"{name}.json"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )  # fmt: skip
        deadline = time.monotonic() + 150
        for name, process in processes.items():
            remaining = max(1.0, deadline - time.monotonic())
            try:
                _, error = process.communicate(timeout=remaining)
            except subprocess.TimeoutExpired:
                pytest.fail(f"node {name} did not finish in time")
            assert process.returncode == 0, (name, error.decode()[-2000:])
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
            process.communicate()  # (closes its stderr pipe, also after a failure)
    result = decode((outputs / "result.json").read_bytes(), GroupOutcome).result
    assert result is not None
    decoded = {
        (output.flow, output.target): program.codec.outputs(output.flow).decode(output.data)
        for output in result.outputs
    }
    rows = program.result(program.merge(program.initial_state(), 0, decoded))
    connection = duckdb.connect()
    table.renamed("t").register(connection, "t")
    relation = connection.sql(SQL)
    expected = [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
    key = lambda row: row["g1"]  # noqa: E731
    assert compare_results(sorted(rows, key=key), sorted(expected, key=key)) == []
    # Host B has only its loopback and the veth end: every source reached the coordinator and
    # its scrambler on host A across the link, or the round could not have completed.
    coordinator = decode((outputs / "coordinator.json").read_bytes(), GroupOutcome)
    assert coordinator.errors == {}
