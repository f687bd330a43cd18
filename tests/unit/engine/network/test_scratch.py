"""A local round's private folder: 0700, files 0600, removed by its guard, swept when stale."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpcomm.engine.network.scratch import (
    PREFIX,
    PrivateFolder,
    _namespace,
    private_folder,
    sweep,
    write_private,
)


def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def _wait_removed(path: Path) -> bool:
    deadline = time.monotonic() + 20
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def test_a_folder_is_the_owners_only_and_removed(tmp_path):
    folder = PrivateFolder(tmp_path)
    try:
        assert folder.path.parent == tmp_path
        assert folder.path.name.startswith(f"{PREFIX}{_namespace()}-{os.getpid()}-")
        assert folder.path.stat().st_mode & 0o777 == 0o700
        write_private(folder.path / "node.key", b"secret")
    finally:
        folder.remove()
    assert not folder.path.exists()
    assert folder.guard is None


def test_the_guard_removes_the_folder_of_a_killed_process(tmp_path):
    # A process makes a folder, writes a key and kills itself (SIGKILL: nothing of its own
    # runs after): its guard removes the folder.
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from dpcomm.engine.network.scratch import PrivateFolder, write_private\n"
        "folder = PrivateFolder(Path(sys.argv[1]))\n"
        "write_private(folder.path / 'ca.key', b'secret')\n"
        "print(folder.path, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -9, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent == tmp_path
    assert _wait_removed(path), f"{path} left behind"


def test_folders_of_ended_processes_are_swept(tmp_path):
    namespace = _namespace()
    stale = tmp_path / f"{PREFIX}{namespace}-{_dead_pid()}-0123abcd"
    mine = tmp_path / f"{PREFIX}{namespace}-{os.getpid()}-0123abcd"  # a live owner
    elsewhere = tmp_path / f"{PREFIX}{namespace + 1}-{_dead_pid()}-0123abcd"  # another namespace
    other = tmp_path / "dpcomm-deploy-abcdefgh"  # not ours to judge (no owner in its name)
    for folder in (stale, mine, elsewhere, other):
        private_folder(folder / "pki")
        write_private(folder / "pki" / "ca.key", b"secret")
    assert sweep(tmp_path) == [stale]
    assert not stale.exists() and mine.exists() and elsewhere.exists() and other.exists()
    # Making a folder sweeps first.
    stale.mkdir()
    folder = PrivateFolder(tmp_path)
    try:
        assert not stale.exists()
    finally:
        folder.remove()


def test_private_files_are_0600_even_when_they_were_not(tmp_path):
    path = tmp_path / "group-sources-0.json"
    path.write_bytes(b"old")
    path.chmod(0o644)
    write_private(path, b"rows")
    assert path.read_bytes() == b"rows"
    assert path.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "fresh.json"
    write_private(fresh, b"x" * 100_000)
    assert fresh.stat().st_mode & 0o777 == 0o600 and fresh.stat().st_size == 100_000


def test_a_private_file_is_not_written_through_a_link(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"untouched")
    link = tmp_path / "group-nodes.json"
    link.symlink_to(target)
    with pytest.raises(OSError):
        write_private(link, b"rows")
    assert target.read_bytes() == b"untouched"


def test_private_folders_are_0700(tmp_path):
    created = private_folder(tmp_path / "a" / "workdir")
    assert created.stat().st_mode & 0o777 == 0o700
