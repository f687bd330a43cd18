"""A noisy release over a deployment written for several hosts (`deploy configs`, `node run`).

Every node of the round runs from its written config over mutual TLS on loopback (in one
process here: the hosts' processes are tested elsewhere); the result node draws the noise and
publishes the released rows, never the exact ones.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from tests.conftest import written_credentials

from dpcomm.data import synthetic_table
from dpcomm.engine.network import launcher
from dpcomm.engine.network.deploy import published_result, result_state, write_deployment
from dpcomm.engine.network.spec import NodeConfig
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.mechanisms import Laplace
from dpcomm.release.noise import noisy_program

SQL = "SELECT g1, COUNT(*) AS n, SUM(m1) AS total, MEDIAN(m1) AS med FROM t GROUP BY g1"
KEYS = {"g1": list(range(5))}
BOUNDS = {"m1": (-3.0, 3.0)}
#: σ = 0: every tuple arrives, so the exact outputs are DuckDB's over the whole table.
COUNTERMEASURE = Scramblers(sampling_rate=0.0, batch_size=10, num_dummies=2)

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """The configs of a released round, and the outcome of running every node from them."""
    folder = tmp_path_factory.mktemp("deployment")
    table = synthetic_table(num_rows=20, seed=4)
    program = noisy_program(
        SQL, table, num_targets=2, release=Laplace(1.0), bounds=BOUNDS, keys=KEYS
    )
    paths = write_deployment(
        program, COUNTERMEASURE, folder, coordinator_port=_free_port(), idle_seconds=5, timeout=60
    )
    configs = [NodeConfig.load(path) for path in paths.values()]
    pki = folder / "pki"
    credentials = written_credentials(configs, pki)
    outcome = launcher.run_tls_group(configs, credentials)
    assert not outcome.errors
    result = next(c for c in configs if c.role == "result")
    return folder, program, result, outcome


def test_the_result_node_publishes_released_rows(deployment):
    _, program, result, outcome = deployment
    published = published_result(result.round, outcome)
    assert published is not None and published["missing"] == [] and published["errors"] == {}
    assert published["left_out"] == {"(g1)": 0} and published["why"] == []
    rows = published["rows"]
    assert [row["g1"] for row in rows] == KEYS["g1"]  # the public domain, every key once
    exact = program.without_release().result(result_state(program, outcome))
    totals = {row["g1"]: row["total"] for row in exact}
    assert all(row["total"] != totals.get(row["g1"], 0.0) for row in rows)  # continuous noise
    release = published["release"]
    assert release["mechanism"] == "laplace" and release["epsilon"] == pytest.approx(1.0)
    assert [a["epsilon"] for a in release["aggregates"]] == pytest.approx([1 / 3] * 3)
    grid = set(program.release.quantiles[0].candidates)
    assert all(row["med"] in grid for row in published["rows"])
    assert "outputs" not in json.dumps(published)  # no exact output leaves the node


def test_node_run_prints_what_the_result_node_publishes(deployment, cli, monkeypatch):
    folder, _, result, outcome = deployment
    monkeypatch.setattr(launcher, "run_tls_group", lambda configs, credentials: outcome)
    pki = folder / "pki"
    status, out, err = cli(
        "node", "run", "--role", "result", "--config", folder / "configs" / "result.json",
        "--ssl-certfile", pki / "result.pem", "--ssl-keyfile", pki / "result.key",
        "--ssl-ca-certfile", pki / "ca.pem",
    )  # fmt: skip
    assert status == 0, err
    printed = json.loads(out)
    assert set(printed) == {"rows", "raw_rows", "release", "missing", "left_out", "why", "errors"}
    assert printed["left_out"] == {"(g1)": 0} and printed["why"] == []
    assert [row["g1"] for row in printed["rows"]] == KEYS["g1"]
    assert result.name == "result"


def test_deploy_configs_takes_the_release_and_prints_the_composed_guarantee(cli, tmp_path):
    out = Path(tmp_path) / "deployment"
    status, _, err = cli(
        "deploy", "configs", "--sql", SQL.replace("m1", "m1"), "--synthetic", "20",
        "--targets", "2", "--mechanism", "scrambler", "--batch", "10", "--dummies", "2",
        "--release", "laplace", "--keys", "g1=" + ",".join(map(str, KEYS["g1"])),
        "--bounds", "m1=-3:3", "--out", out,
    )  # fmt: skip
    assert status == 0, err
    assert "the release (drawn by the result node): ε2 = 1" in err
    assert "traffic and release together" in err
    config = NodeConfig.load(out / "configs" / "result.json")
    program = config.round.public_program
    assert isinstance(program, AggregateProgram) and program.release is not None
    status, _, err = cli(
        "deploy", "configs", "--sql", SQL, "--synthetic", "20", "--keys", "g1=1", "--out", out
    )
    assert status == 2 and "--keys" in err and "--release" in err
