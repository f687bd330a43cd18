"""A `deploy configs` + `node run` round, every node its own process, that loses data fails loudly.

A compute node or a scrambler killed once it registered (before the sources send), and a
certified source that writes its own sealed frame straight to its compute node before sending it
through its scrambler: the coordinator and the result node exit non-zero when the round lost
more than ``--max-left-out`` allows, say why in one line each, and the published result carries
``left_out`` and ``why``; the poisoning source's frame is refused and the honest scrambler's
batch counts whole. A node whose config holds another round is refused at registration.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import write_deployment
from dpcomm.plan import Scramblers
from dpcomm.release.mechanisms import Laplace
from dpcomm.release.noise import noisy_program

pytestmark = pytest.mark.slow

SQL = "SELECT g1, COUNT(*) AS n FROM t GROUP BY g1"
SOURCES = 4
#: σ = 0: every tuple arrives; two scramblers of two sources each.
COUNTERMEASURE = Scramblers(sampling_rate=0.0, batch_size=2, num_dummies=1)
INFRASTRUCTURE = ("coordinator", "result", "compute-0-0", "compute-0-1")
SCRAMBLERS = ("scrambler-0-0", "scrambler-0-1")

#: source-0 as a certified attacker: its own sealed frame, first straight to its compute node.
POISONING_SOURCE = """
import asyncio, contextlib, json, os, sys
from dpcomm.engine.network import source
from dpcomm.engine.network.records import Peer
from dpcomm.cli.main import main
ports = json.loads(os.environ["DPCOMM_TEST_COMPUTE_PORTS"])
honest = source.Source.send_to_scrambler

async def poisoning(self, flow, scrambler, channel, target, sealed):
    name = str(self.spec.receivers(flow)[target])
    at = self.spec.routed_names.index(self.spec.transformed.routed_from(flow)[1].name)
    with contextlib.suppress(Exception):
        direct = await self.context.connect(Peer(name, ("127.0.0.1", ports[name])))
        direct.write_data(at, target, sealed, os.urandom(16))
        await direct.drain(timeout=5.0)
        await asyncio.sleep(0.2)
        await direct.close()
    return await honest(self, flow, scrambler, channel, target, sealed)

source.Source.send_to_scrambler = poisoning
sys.exit(main(sys.argv[1:]))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Round:
    """The written deployment of a small released round, and its nodes' processes."""

    def __init__(self, folder: Path) -> None:
        table = synthetic_table(num_rows=SOURCES, seed=4)
        program = noisy_program(
            SQL, table, num_targets=2, release=Laplace(1.0), keys={"g1": list(range(5))}
        )
        self.folder = folder
        self.coordinator_port = _free_port()
        self.paths = write_deployment(
            program, COUNTERMEASURE, folder, coordinator_port=self.coordinator_port,
            idle_seconds=6,  # a killed node is given up after 6 s without progress
            timeout=40,
        )  # fmt: skip
        self.ports: dict[str, int] = {}
        for name in (*INFRASTRUCTURE[1:], *SCRAMBLERS):  # fixed ports: reachable, killable
            config = json.loads(self.paths[name].read_text())
            config["listen_port"] = self.ports[name] = _free_port()
            self.paths[name].write_text(json.dumps(config))
        self.processes: dict[str, subprocess.Popen[str]] = {}

    def start(self, name: str, *, script: str | None = None) -> None:
        role = name.split("-")[0]
        pki = self.folder / "pki"
        command = [sys.executable, "-c", script] if script else [sys.executable, "-m"]
        command += [] if script else ["dpcomm.cli.main"]
        command += ["node", "run", "--role", role, "--config", str(self.paths[name])]
        command += ["--ssl-certfile", str(pki / f"{name}.pem")]
        command += ["--ssl-keyfile", str(pki / f"{name}.key")]
        command += ["--ssl-ca-certfile", str(pki / "ca.pem")]
        command += ["--output", str(self.folder / f"{name}.out.json")]
        environment = {**os.environ, "DPCOMM_TEST_COMPUTE_PORTS": json.dumps(self.ports)}
        self.processes[name] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment
        )

    def registered(self, name: str) -> None:
        """Until ``name`` holds its link to the coordinator (it registers over it)."""
        remote = f":{self.coordinator_port:04X}"
        pid = self.processes[name].pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            sockets = set()
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    sockets.add(os.readlink(fd))
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
                fields = line.split()  # local, remote, state (01: ESTABLISHED), ..., inode
                linked = fields[2].endswith(remote) and fields[3] == "01"
                if linked and f"socket:[{fields[9]}]" in sockets:
                    time.sleep(0.5)  # its HELLO follows at once
                    return
            time.sleep(0.05)
        pytest.fail(f"{name} never linked to the coordinator")

    def run(self, *, kill: str | None = None, poison: bool = False) -> dict[str, tuple[int, str]]:
        """Every node, ``kill`` killed once registered; each node's (exit status, stderr)."""
        try:
            for name in (*INFRASTRUCTURE, *SCRAMBLERS):
                self.start(name)
            if kill is not None:  # once it registered, before the sources send anything
                self.registered(kill)
                self.processes[kill].send_signal(signal.SIGKILL)
            for index in range(SOURCES):
                script = POISONING_SOURCE if poison and index == 0 else None
                self.start(f"source-{index}", script=script)
            ended = {}
            for name, process in self.processes.items():
                _, err = process.communicate(timeout=90)
                ended[name] = (process.returncode, err)
            return ended
        finally:
            for process in self.processes.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()

    def published(self) -> dict:
        return json.loads((self.folder / "result.out.json").read_text())

    def counted(self) -> int:
        outcomes = [
            json.loads((self.folder / f"{n}.out.json").read_text()) for n in INFRASTRUCTURE[2:]
        ]
        computes = [c for outcome in outcomes for c in outcome["computes"]]
        return sum(flow["tuples"] for c in computes for flow in c["flows"].values())


def test_a_poisoning_source_never_erases_an_honest_scramblers_batch(tmp_path):
    deployment = Round(tmp_path)
    ended = deployment.run(poison=True)
    assert {name: status for name, (status, _) in ended.items()} == dict.fromkeys(ended, 0), ended
    assert deployment.counted() == SOURCES  # every tuple: no honest batch refused
    published = deployment.published()
    assert published["left_out"] == {"(g1)": 0} and published["why"] == []
    computes = [json.loads((tmp_path / f"{n}.out.json").read_text()) for n in INFRASTRUCTURE[2:]]
    attacks = [c["wires"][0]["drops"] for c in computes]
    assert any(drops.get("compute-0-0", {}).get("unauthorized") for drops in attacks) or any(
        drops.get("compute-0-1", {}).get("unauthorized") for drops in attacks
    ), attacks


@pytest.mark.parametrize("victim", ["compute-0-1", "scrambler-0-1"])
def test_a_node_killed_mid_round_fails_the_coordinator_and_the_result(tmp_path, victim):
    deployment = Round(tmp_path)
    ended = deployment.run(kill=victim)
    coordinator_status, coordinator_err = ended["coordinator"]
    result_status, result_err = ended["result"]
    assert coordinator_status == 1 and result_status == 1, ended
    assert "the round failed" in coordinator_err and "the round failed" in result_err
    assert "sources left out" in coordinator_err
    published = deployment.published()
    assert published["why"], published
    left = published["left_out"]["(g1)"]
    if victim.startswith("scrambler"):
        assert left == SOURCES // 2  # its two sources
        assert "Traceback" not in coordinator_err + result_err
    else:
        assert "compute node(s) ended before delivering their outputs" in coordinator_err
        assert any("never arrived" in why for why in published["why"])


def test_a_node_whose_config_holds_another_round_is_refused_before_any_data(tmp_path):
    deployment = Round(tmp_path)
    path = deployment.paths["scrambler-0-1"]
    config = json.loads(path.read_text())
    for countermeasure in config["round"]["countermeasures"].values():
        countermeasure["num_dummies"] = 0  # edited: a scrambler that would add no dummy
    path.write_text(json.dumps(config))
    deployment.start("coordinator")
    deployment.start("scrambler-0-1")
    try:
        deployment.processes["scrambler-0-1"].communicate(timeout=60)
        assert deployment.processes["scrambler-0-1"].returncode == 1
        outcome = json.loads((tmp_path / "scrambler-0-1.out.json").read_text())
        assert "refused its registration" in outcome["errors"]["scrambler-0-1"]
        assert "differs from the coordinator's" in outcome["errors"]["scrambler-0-1"]
    finally:
        for process in deployment.processes.values():
            process.kill()
            process.communicate()
