"""Files written whole or not at all: a temporary file beside the target, renamed over it."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from dpcomm.errors import DpcommError


@contextlib.contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; moved over ``path`` when the block succeeds.

    When the block fails (a full disk, DuckDB's error) the temporary file is removed and
    ``path`` is left as it was: never a partial or empty file.

    Raises:
        DpcommError: the file cannot be written (the system's reason, naming ``path``).
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as error:
        raise DpcommError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


__all__ = ["replaced_atomically"]
