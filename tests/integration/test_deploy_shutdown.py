"""A local deployment stopped by a signal stops its nodes and removes the round's keys.

SIGTERM, SIGHUP and SIGINT unwind the launcher; after SIGKILL, the folder's guard removes the
keys. Also: ``--workdir`` files are the owner's only, a ``--workdir`` that already holds a
certificate authority is refused without ``--force``, and a round whose sources cannot all
make it exits non-zero with one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import DEFAULT_IDLE_SECONDS, NetworkEngine, round_deadlines
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram

pytestmark = pytest.mark.slow

SQL = "SELECT g1, COUNT(*) FROM t GROUP BY g1"
SHM = Path("/dev/shm")


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _round_folders(pid: int) -> set[Path]:
    """The folders of the round launched by process ``pid`` (named after it)."""
    base = SHM if SHM.is_dir() else Path("/tmp")
    return set(base.glob(f"dpcomm-deploy-*-{pid}-*"))


def _start_round() -> tuple[subprocess.Popen[str], set[int]]:
    """A deployment of 400 sources, once its workers run and its keys are written."""
    command = [sys.executable, "-m", "dpcomm.cli.main", "run", "aggregate", "--engine", "network"]
    command += ["--sql", SQL]
    command += ["--synthetic", "400", "--idle-seconds", "60", "--timeout", "300"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        created = _round_folders(process.pid)
        keys = [k for folder in created for k in folder.glob("pki/*.key")]
        workers = _children(process.pid)
        if len(keys) > 10 and len(workers) >= 2:
            return process, workers
        if process.poll() is not None:
            pytest.fail(f"the round ended early: {process.communicate()}")
        time.sleep(0.2)
    process.kill()
    pytest.fail("the round never started")


def _wait_gone(pids: set[int]) -> set[int]:
    deadline = time.monotonic() + 20
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


def _left_behind(pid: int) -> set[Path]:
    """The round's folders still there after a bounded wait (a guard needs a moment)."""
    deadline = time.monotonic() + 20
    while _round_folders(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _round_folders(pid)


@pytest.mark.parametrize(
    ("signum", "says"),
    [
        (signal.SIGTERM, "SIGTERM"),
        (signal.SIGHUP, "SIGHUP"),  # the terminal closed
        (signal.SIGINT, "interrupted"),  # Ctrl-C
    ],
    ids=["SIGTERM", "SIGHUP", "SIGINT"],
)
def test_a_signal_stops_every_node_and_removes_the_keys(signum, says):
    if signal.getsignal(signum) == signal.SIG_IGN:
        pytest.skip(f"{says}: ignored by this process, so by the deployment it starts")
    process, workers = _start_round()
    try:
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0 and process.returncode != -signum  # it unwound
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in stderr
    # Every worker is gone within seconds, and so is every key of the round: the launcher
    # removed them itself (its guard had nothing left to do).
    assert not _wait_gone(workers)
    assert not _round_folders(process.pid)


def test_a_killed_launcher_leaves_neither_workers_nor_keys():
    process, workers = _start_round()
    folders = _round_folders(process.pid)
    process.kill()  # SIGKILL: no cleanup runs in the launcher
    process.communicate(timeout=60)
    assert not _wait_gone(workers)  # they saw their input end; the guard removed the folder
    left = _left_behind(process.pid)
    for folder in left:  # not to leave them to the next test, should the guard fail
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    assert folders and not left, f"keys left behind: {sorted(map(str, left))}"


def test_workdir_files_are_the_owners_only(cli, tmp_path):
    workdir = tmp_path / "round"  # created by the deployment
    command = ["run", "aggregate", "--engine", "network", "--sql", SQL]
    command += ["--synthetic", "40", "--batch", "10", "--dummies", "2", "--targets", "3"]
    command += ["--workdir", workdir, "--seed", "1", "--json"]
    status, _, err = cli(*command)  # in this process: its interpreter has imported dpcomm already
    assert status == 0, err
    groups = sorted(workdir.glob("group-*.json"))
    keys = sorted((workdir / "pki").glob("*.key"))
    assert groups and keys
    assert any(b'"row"' in path.read_bytes() for path in groups)  # the sources' own rows
    for path in [workdir, workdir / "pki"]:
        assert path.stat().st_mode & 0o777 == 0o700, path
    for path in [*groups, *keys]:
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_a_workdir_with_a_certificate_authority_is_kept_without_force(tmp_path):
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.key").write_text("the operator's key")
    program = AggregateProgram.from_sql(SQL, synthetic_table(num_rows=20, seed=1))
    engine = NetworkEngine(workdir=tmp_path, timeout=30, idle_seconds=5)
    with pytest.raises(InvalidParameterError, match="workdir"):
        engine.execute(
            program, Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=2), delta=1e-4
        )
    assert (tmp_path / "pki" / "ca.key").read_text() == "the operator's key"


def test_default_deadlines_measure_inactivity_and_only_the_cap_grows_with_the_round():
    small, large = round_deadlines(1_000), round_deadlines(10_000)
    assert small[0] == large[0] == DEFAULT_IDLE_SECONDS  # T: no progress for T seconds
    assert small[1] < large[1] and round_deadlines(1_000, stages=10)[1] > small[1]
    assert all(idle < timeout for idle, timeout in (small, large))


def test_a_round_that_leaves_sources_out_exits_non_zero_with_one_line():
    # 1 s to register 300 sources and batch them is not enough on any machine: sources are
    # left out (or the round aggregates nothing), and the command says so in one line.
    command = [sys.executable, "-m", "dpcomm.cli.main", "run", "aggregate", "--engine", "network"]
    command += ["--sql", SQL]
    command += ["--synthetic", "300", "--idle-seconds", "0.2", "--timeout", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=os.environ)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpcomm: error: the round failed: ")
    assert "Traceback" not in done.stderr
