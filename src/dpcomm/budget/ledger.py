"""The ledger file: a budget and its charges as versioned JSON, written atomically, locked.

The document (version 1)::

    {"version": 1,
     "budget": {"epsilon": 3.0, "delta": 1e-05, "composition": "basic"},
     "charges": [{"time": "2026-11-26T10:00:00.000000+00:00", "kind": "aggregate",
                  "query": "SELECT ...", "epsilon": 1.2, "delta": 1e-06,
                  "method": "pld(exact)"}, ...]}

``method`` is how the run's (ε, δ) was obtained (the plan guarantee's method);
``budget.composition`` how the charges compose ([`dpcomm.budget.composition`][]).

Writes go to a temporary file in the ledger's directory, which is flushed, fsynced and moved
over the ledger (``os.replace``): a reader sees the old document or the new one, never half of
one. Every read-check-write holds an exclusive ``fcntl.flock`` on a sidecar file
``<ledger>.lock`` (left in place: removing it would let two processes lock different files),
so that two concurrent runs charge the ledger twice, never once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcomm.budget.composition import COMPOSITION
from dpcomm.errors import DpcommError

#: The version of the ledger document this module reads and writes.
VERSION = 1


class LedgerError(DpcommError):
    """A ledger file that is missing, unreadable, corrupt or not a dpcomm ledger (one line)."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"ledger {self.path}: {problem}")


@dataclass(frozen=True)
class Charge:
    """One run charged to a ledger.

    Attributes:
        time: when it was charged (ISO 8601, UTC).
        kind: ``aggregate`` or ``kmeans``.
        query: the query or program, described (an SQL text, K-means' parameters).
        epsilon: the run's plan ε (what it reports).
        delta: the run's plan δ.
        method: how that (ε, δ) was obtained (the guarantee's method, e.g. ``pld(exact)``).
    """

    time: str
    kind: str
    query: str
    epsilon: float
    delta: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        """The charge as it is stored."""
        return {
            "time": self.time,
            "kind": self.kind,
            "query": self.query,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
        }


@dataclass(frozen=True)
class Ledger:
    """A ledger's document: the budget (ε, δ), its composition rule and the charges."""

    epsilon: float
    delta: float
    charges: tuple[Charge, ...] = ()
    composition: str = COMPOSITION

    def to_dict(self) -> dict[str, Any]:
        """The document as it is stored."""
        return {
            "version": VERSION,
            "budget": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "composition": self.composition,
            },
            "charges": [charge.to_dict() for charge in self.charges],
        }

    def with_charge(self, charge: Charge) -> Ledger:
        """The same ledger with ``charge`` appended."""
        return Ledger(self.epsilon, self.delta, (*self.charges, charge), self.composition)


def _number(value: object, *, upper: float) -> float | None:
    """``value`` as a float in [0, upper], or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and 0.0 <= number <= upper else None


def _charge(item: object, index: int, path: Path) -> Charge:
    fields = ("time", "kind", "query", "method")
    if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in fields):
        raise LedgerError(path, f"charge {index} is not a charge (time, kind, query, method)")
    epsilon = _number(item.get("epsilon"), upper=math.inf)
    delta = _number(item.get("delta"), upper=1.0)
    if epsilon is None or delta is None:
        raise LedgerError(path, f"charge {index} has no finite ε >= 0 and δ in [0, 1]")
    return Charge(item["time"], item["kind"], item["query"], epsilon, delta, item["method"])


def parse_ledger(text: str, path: Path) -> Ledger:
    """The ledger in ``text`` (read from ``path``), or a [`LedgerError`][] saying why not."""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise LedgerError(path, "not JSON (corrupt, or not a dpcomm ledger)") from None
    if not isinstance(document, dict) or "version" not in document or "budget" not in document:
        raise LedgerError(path, 'not a dpcomm ledger (no "version" and "budget")')
    if document["version"] != VERSION:
        raise LedgerError(
            path, f"ledger version {document['version']!r}; this dpcomm reads version {VERSION}"
        )
    budget = document["budget"]
    if not isinstance(budget, dict):
        raise LedgerError(path, '"budget" is not an object with epsilon and delta')
    epsilon = _number(budget.get("epsilon"), upper=math.inf)
    delta = _number(budget.get("delta"), upper=1.0)
    if epsilon is None or delta is None or delta >= 1.0:
        raise LedgerError(path, "the budget has no finite ε >= 0 and δ in [0, 1)")
    if budget.get("composition") != COMPOSITION:
        raise LedgerError(
            path,
            f"composition {budget.get('composition')!r}; this dpcomm composes by {COMPOSITION!r}",
        )
    charges = document.get("charges")
    if not isinstance(charges, list):
        raise LedgerError(path, '"charges" is not a list')
    return Ledger(epsilon, delta, tuple(_charge(c, i, path) for i, c in enumerate(charges)))


def read_ledger(path: Path) -> Ledger:
    """The ledger at ``path`` ([`LedgerError`][] when missing, unreadable or corrupt)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LedgerError(path, "no such file (give a budget's ε and δ to create it)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise LedgerError(path, f"cannot be read ({type(error).__name__})") from None
    return parse_ledger(text, path)


def serialize(ledger: Ledger) -> bytes:
    """The bytes a ledger is stored as (indented JSON, one trailing newline)."""
    return (json.dumps(ledger.to_dict(), indent=2, allow_nan=False) + "\n").encode("utf-8")


def write_ledger(path: Path, ledger: Ledger) -> None:
    """Store ``ledger`` at ``path`` atomically (temporary file, fsync, ``os.replace``)."""
    data = serialize(ledger)
    directory = path.parent
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        try:
            mode = path.stat().st_mode & 0o777  # the ledger keeps its permissions
        except FileNotFoundError:
            mode = 0o644
        os.chmod(temporary, mode)
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename itself made durable, where supported
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def lock_path(path: Path) -> Path:
    """The sidecar file whose exclusive lock guards ``path``."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the ledger at ``path`` (blocking until it is free)."""
    try:
        descriptor = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise LedgerError(path, f"cannot create its lock file ({error.strerror})") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
