"""Work the pytest-xdist workers of one session share: each result computed once, not per worker.

``made_once(key, make)`` (a session fixture) runs ``make(directory)`` in the first worker that
asks for ``key``, under a lock file, and keeps its result pickled beside ``directory``; a worker
that asks later (or while it runs) waits for the lock and reads it. ``make test`` spreads a
module's tests over both workers (``--dist worksteal``), and a fixture of module scope is
computed once per worker that runs any of its tests: the figures' tests (figure 5: about 6 s
of CPU, twice) and DuckDB's aggregate suite (its replay, 11 s, shared by four tests) use it.
Without workers the results are kept for the session alone.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

MadeOnce = Callable[[str, Callable[[Path], Any]], Any]


@pytest.fixture(scope="session")
def made_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MadeOnce]:
    """``made_once(key, make)``: ``make(directory)``'s result, computed once per session."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The workers' temporary folders are siblings in the session's own folder.
        root = tmp_path_factory.getbasetemp().parent / "made-once"
        root.mkdir(exist_ok=True)
    else:
        root = tmp_path_factory.mktemp("made-once")
    kept: dict[str, Any] = {}

    def made(key: str, make: Callable[[Path], Any]) -> Any:
        if key not in kept:
            with (root / f"{key}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                saved = root / f"{key}.pickle"
                if saved.exists():
                    kept[key] = pickle.loads(saved.read_bytes())
                else:
                    directory = root / key
                    directory.mkdir()
                    kept[key] = make(directory)
                    saved.write_bytes(pickle.dumps(kept[key]))
        return kept[key]

    yield made
