"""The private folder of a local round: its keys and its sources' rows are never left behind.

A local deployment (`dpcomm.engine.network.launcher.launch`) writes the CA key, one key
per node and each worker's group file (with its sources' rows) to a temporary folder. How it
is kept private and removed, however the launcher ends:

* the folder is created with mode 0700, in memory (``/dev/shm``) where the system has it, and
  named after its owner's process: ``dpcomm-deploy-<pid namespace>-<pid>-<random>``; files
  in it are written with mode 0600 (`write_private`);
* the launcher removes it when the round ends, fails or is interrupted (SIGINT, and SIGTERM and
  SIGHUP turned into an error: `dpcomm.engine.network.launcher.terminated_as_error`);
* a *guard* outlives the launcher: a small process in a session of its own (a terminal's
  hangup or Ctrl-C does not reach it) that waits for a pipe only the launcher writes to. When
  the launcher's process ends, however it ends (SIGKILL included), the kernel closes the pipe
  and the guard removes the folder at once;
* should the guard die with it (both killed at once, or the guard could not run), the next
  round started by the same user removes the folders whose owner process no longer exists
  (`sweep`).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Every round's folder is named ``PREFIX<pid namespace>-<pid>-<random>``.
PREFIX = "dpcomm-deploy-"
_NAME = re.compile(rf"{re.escape(PREFIX)}(\d+)-(\d+)-[0-9a-f]+")
_MEMORY = Path("/dev/shm")

#: The guard: read standard input to its end (the launcher gone), then remove the folder.
_GUARD = (
    "import shutil, sys\nsys.stdin.buffer.read()\nshutil.rmtree(sys.argv[1], ignore_errors=True)\n"
)


def base_folder() -> Path:
    """Where round folders go: ``/dev/shm`` if writable (never reaches a disk), else tmp."""
    if _MEMORY.is_dir() and os.access(_MEMORY, os.W_OK | os.X_OK):
        return _MEMORY
    return Path(tempfile.gettempdir())


def _namespace() -> int:
    """The pid namespace of this process (Linux; 0 elsewhere): pids mean nothing outside."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def sweep(base: Path | None = None) -> list[Path]:
    """Remove this user's round folders in ``base`` whose owner process is gone; the removed.

    A folder whose process id was reused by another process is kept (until that one ends), and
    so is one made in another pid namespace (another container sharing the folder).
    """
    folder = base if base is not None else base_folder()
    namespace = _namespace()
    removed = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            match = _NAME.fullmatch(entry.name)
            if match is None or int(match.group(1)) != namespace or _alive(int(match.group(2))):
                continue
            try:
                status = entry.lstat()
            except OSError:
                continue
            if uid is not None and status.st_uid != uid:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


class PrivateFolder:
    """A round's folder (mode 0700), removed by `remove` or, at the latest, by its guard.

    Creating one first sweeps the folders left by processes that are gone (`sweep`).
    """

    def __init__(self, base: Path | None = None) -> None:
        parent = base if base is not None else base_folder()
        sweep(parent)
        while True:
            path = parent / f"{PREFIX}{_namespace()}-{os.getpid()}-{secrets.token_hex(8)}"
            try:
                path.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        self.path = path
        try:
            self.guard: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _GUARD, str(self.path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def remove(self) -> None:
        """Remove the folder now, then let the guard end."""
        shutil.rmtree(self.path, ignore_errors=True)
        guard, self.guard = self.guard, None
        if guard is None:
            return
        with contextlib.suppress(OSError):
            if guard.stdin is not None:
                guard.stdin.close()
        try:
            guard.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, readable and writable by its owner only (0600).

    An existing file is truncated and its mode set to 0600; a symbolic link is not followed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.fchmod(descriptor, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    finally:
        os.close(descriptor)


def private_folder(path: Path) -> Path:
    """``path`` as a folder, created with mode 0700 (with its missing parents) if absent."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
