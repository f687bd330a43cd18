"""The DuckDB connection each thread of a process reuses for the library's short conversions.

Opening an in-memory DuckDB database costs some 25 ms of CPU: more than converting a result
to a DataFrame, reading a small file or a partition of Parquet rows. These share one
connection per thread instead (DuckDB connections are not shared between threads); a forked
child opens its own, the parent's being unusable there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

_CONNECTIONS = threading.local()


@contextmanager
def thread_connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """The calling thread's own in-memory DuckDB connection, opened on first use.

    It reads and writes files like ``duckdb.connect()`` (same settings). A caller fetches
    every result it starts (DuckDB refuses other work on a connection with an unfinished
    one) and unregisters what it registers. A block that raises drops the connection (the
    error may have left a result unfinished, or the database unusable, as a fatal DuckDB
    error does): the next use opens a new one.
    """
    import duckdb

    held = getattr(_CONNECTIONS, "held", None)
    if held is None or held[0] != os.getpid():
        held = (os.getpid(), duckdb.connect())
        _CONNECTIONS.held = held
    try:
        yield held[1]
    except BaseException:
        _CONNECTIONS.held = None
        raise
