"""The ledger file: a budget and its charges as versioned JSON, signed, written atomically, locked.

The document (version 2)::

    {"version": 2,
     "budget": {"epsilon": 3.0, "delta": 1e-05, "composition": "basic"},
     "charges": [{"time": "2026-11-26T10:00:00.000000+00:00", "kind": "aggregate",
                  "query": "SELECT city, COUNT(*) FROM people WHERE age > 17 GROUP BY city",
                  "epsilon": 1.2, "delta": 0.0, "method": "theorem-2(...) + laplace release",
                  "countermeasure": {"mechanism": "local", "sampling_rate": 0.2,
                                     "batch_size": null, "num_dummies": 5, "capped": false},
                  "release": {"mechanism": "laplace", "epsilon": 1.0, "delta": 0.0,
                              "bounds": {}, "keys": {"city": ["a", "b"]},
                              "key_selection_delta": null},
                  "engine": "memory"}, ...],
     "digest": "sha256:9f2c..."}

A charge says what was charged and for what: ``query`` the analyst's query as written (SQL
text; K-means' parameters), ``method`` how the run's (ε, δ) was obtained (the guarantee's
method), ``countermeasure`` its dict form (`dpcomm.plan.codec.countermeasure_to_dict`:
one for every data-dependent cluster, or one per flow name when they differ), ``release`` the
noisy release (mechanism, ε2, δ2, the bounds of its SUM and AVG columns, the key domains or
δ_sel of a DP key selection; null without), ``engine`` the engine that ran it.
``budget.composition`` is how the charges compose ([`dpcomm.budget.composition`][]).

``digest`` is the SHA-256 of the document's content (everything but ``digest``) as canonical
JSON (`content_digest`). A ledger whose content does not match it was edited by something
else than dpcomm and is refused ([`LedgerError`][]) until its edits are accepted
(``accept_edits``: ``dpcomm budget --ledger FILE --accept-edits`` or
``dpcomm.Budget(ledger=FILE, accept_edits=True)``), which signs it again. The digest has no
key: it detects accidental and naive edits (a budget raised in an editor, a charge deleted),
not someone who recomputes it. Version 1 ledgers (no digest, charges without countermeasure,
release or engine) are refused likewise, and accepting them upgrades them to version 2.

Writes go to a temporary file in the ledger's directory, which is flushed, fsynced and moved
over the ledger (``os.replace``): a reader sees the old document or the new one, never half of
one. Every read-check-write holds an exclusive ``fcntl.flock`` on a sidecar file
``<ledger>.lock`` (left in place: removing it would let two processes lock different files),
so that two concurrent runs charge the ledger twice, never once. Temporary copies left by a
writer killed mid-write are removed by the next holder of the lock. The path is resolved once
(`dpcomm.Budget` resolves symlinks), so a ledger reached through a symlink is locked and replaced
as the file it links to: every path to one ledger charges the same file. Only a regular file is
read (at most `MAX_LEDGER_BYTES`), JSON objects with a key given twice are refused, and a write
that fails (a full disk) names the ledger and leaves it as it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcomm.budget.composition import COMPOSITION
from dpcomm.errors import DpcommError

#: The version of the ledger document this module writes (and reads without accepting edits).
VERSION = 2
#: Older versions it reads only to accept them (``accept_edits``), upgrading them.
OLD_VERSIONS = (1,)
#: The prefix of the stored digest (the hash function it names).
DIGEST_PREFIX = "sha256:"


class LedgerError(DpcommError):
    """A ledger file that is missing, unreadable, corrupt or not a dpcomm ledger (one line)."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"ledger {self.path}: {problem}")


def accept_hint(path: Path | str) -> str:
    """How to accept a ledger's edits (the command, and the Python call)."""
    return (
        f"dpcomm budget --ledger {path} --accept-edits "
        f"(Python: dpcomm.Budget(ledger=..., accept_edits=True))"
    )


@dataclass(frozen=True)
class Charge:
    """One run charged to a ledger.

    Attributes:
        time: when it was charged (ISO 8601, UTC).
        kind: ``aggregate`` or ``kmeans``.
        query: the query or program as the analyst gave it (the SQL text as written,
            K-means' parameters).
        epsilon: the ε charged.
        delta: the δ charged: the δ the run's guarantee uses (0 for a pure one).
        method: how that (ε, δ) was obtained (the guarantee's method, e.g. ``pld(exact)``).
        countermeasure: the countermeasure's dict form (one for every data-dependent cluster,
            or one per flow name), or None (not recorded: a charge made by hand, or a
            version 1 ledger's).
        release: the noisy release (mechanism, epsilon, delta, bounds, keys,
            key_selection_delta), or None (no release, or not recorded).
        engine: the engine that ran it (``memory``, ``dask``, ``network``), or None.
        seed: the run's seed, or None (fresh entropy): two runs of one seed share their
            randomness, so a ledger never charges a seed twice (`Budget.charge`).
    """

    time: str
    kind: str
    query: str
    epsilon: float
    delta: float
    method: str
    countermeasure: Mapping[str, Any] | None = None
    release: Mapping[str, Any] | None = None
    engine: str | None = None
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The charge as it is stored (``seed`` only for a seeded run)."""
        stored = {
            "time": self.time,
            "kind": self.kind,
            "query": self.query,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
            "countermeasure": None if self.countermeasure is None else dict(self.countermeasure),
            "release": None if self.release is None else dict(self.release),
            "engine": self.engine,
        }
        if self.seed is not None:
            stored["seed"] = self.seed
        return stored


@dataclass(frozen=True)
class Ledger:
    """A ledger's document: the budget (ε, δ), its composition rule and the charges."""

    epsilon: float
    delta: float
    charges: tuple[Charge, ...] = ()
    composition: str = COMPOSITION

    def content(self) -> dict[str, Any]:
        """The document without its digest (what the digest covers)."""
        return {
            "version": VERSION,
            "budget": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "composition": self.composition,
            },
            "charges": [charge.to_dict() for charge in self.charges],
        }

    def to_dict(self) -> dict[str, Any]:
        """The document as it is stored: its content and the content's digest."""
        content = self.content()
        return {**content, "digest": content_digest(content)}

    def with_charge(self, charge: Charge) -> Ledger:
        """The same ledger with ``charge`` appended."""
        return Ledger(self.epsilon, self.delta, (*self.charges, charge), self.composition)


def content_digest(content: Mapping[str, Any]) -> str:
    """``sha256:`` and the hex SHA-256 of ``content`` as canonical JSON.

    Canonical: keys sorted, no whitespace, ASCII escapes, floats as Python writes them (the
    shortest text that reads back the same float), so that formatting, key order and
    indentation do not change it and any change of a value does.
    """
    text = json.dumps(
        content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return DIGEST_PREFIX + hashlib.sha256(text.encode("ascii")).hexdigest()


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
    countermeasure, release = item.get("countermeasure"), item.get("release")
    engine, seed = item.get("engine"), item.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise LedgerError(path, f"charge {index} has a seed that is not an integer >= 0")
    if not (
        (countermeasure is None or isinstance(countermeasure, dict))
        and (release is None or isinstance(release, dict))
        and (engine is None or isinstance(engine, str))
    ):
        raise LedgerError(
            path, f"charge {index} has a countermeasure or release that is not an object"
        )
    return Charge(
        item["time"],
        item["kind"],
        item["query"],
        epsilon,
        delta,
        item["method"],
        countermeasure,
        release,
        engine,
        seed,
    )


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice is refused (JSON allows it)."""
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise _DuplicateKeyError(key)
        document[key] = value
    return document


def parse_ledger(text: str, path: Path, *, accept_edits: bool = False) -> Ledger:
    """The ledger in ``text`` (read from ``path``), or a [`LedgerError`][] saying why not.

    Its digest must match its content, and its version be `VERSION`, unless
    ``accept_edits`` (then a ledger of a version in `OLD_VERSIONS`, or whose content was
    edited, is read as it is: the caller signs it again by writing it).
    """
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as duplicate:
        raise LedgerError(
            path, f"the key {duplicate.key!r} appears twice in one object (not a dpcomm ledger)"
        ) from None
    except (json.JSONDecodeError, RecursionError):
        raise LedgerError(path, "not JSON (corrupt, or not a dpcomm ledger)") from None
    if not isinstance(document, dict) or "version" not in document or "budget" not in document:
        raise LedgerError(path, 'not a dpcomm ledger (no "version" and "budget")')
    version = document["version"]
    if version != VERSION and not (accept_edits and version in OLD_VERSIONS):
        if version in OLD_VERSIONS:
            raise LedgerError(
                path,
                f"ledger version {version!r} has no digest, so edits to it cannot be detected; "
                f"check it, then upgrade it to version {VERSION}: {accept_hint(path)}",
            )
        raise LedgerError(path, f"ledger version {version!r}; this dpcomm reads version {VERSION}")
    if version == VERSION and not accept_edits:
        content = {key: value for key, value in document.items() if key != "digest"}
        stored = document.get("digest")
        try:
            expected = content_digest(content)
        except ValueError:  # NaN or infinity: not what dpcomm writes
            expected = None
        if stored != expected:
            why = "has no digest" if stored is None else "does not match its digest"
            raise LedgerError(
                path,
                f"its content {why}: it was edited by hand or by another program; if the edit "
                f"is intended, accept it: {accept_hint(path)}",
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


#: The largest ledger file read (bytes): a million charges fit; a larger file is refused.
MAX_LEDGER_BYTES = 256 * 1024 * 1024


def read_ledger(path: Path, *, accept_edits: bool = False) -> Ledger:
    """The ledger at ``path`` ([`LedgerError`][] when missing, unreadable, corrupt or edited).

    Only a regular file of at most `MAX_LEDGER_BYTES` is read (a FIFO, a device such as
    ``/dev/full`` or a directory is refused, never read without end), and only one with a
    single name (a hard link would fork it). ``accept_edits``: read
    it even if its content was edited or its version is older (`parse_ledger`).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise LedgerError(path, "no such file (give a budget's ε and δ to create it)") from None
    except OSError as error:
        raise LedgerError(path, f"cannot be read ({error.strerror})") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise LedgerError(path, "not a regular file (a FIFO, a device or a directory)")
        if status.st_nlink > 1:
            # Each name would lock its own sidecar, and the atomic replace gives the name
            # written a new file: the other names would keep the old budget (a fork).
            raise LedgerError(
                path,
                f"has {status.st_nlink} hard links: a ledger takes one name (use a symlink "
                "to share it)",
            )
        with os.fdopen(os.dup(descriptor), "rb") as file:
            data = file.read(MAX_LEDGER_BYTES + 1)
    except OSError as error:
        raise LedgerError(path, f"cannot be read ({error.strerror})") from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_LEDGER_BYTES:
        raise LedgerError(path, f"larger than {MAX_LEDGER_BYTES:,} bytes (not a dpcomm ledger)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LedgerError(path, "cannot be read (not UTF-8 text)") from None
    return parse_ledger(text, path, accept_edits=accept_edits)


def serialize(ledger: Ledger) -> bytes:
    """The bytes a ledger is stored as (indented JSON, one trailing newline)."""
    return (json.dumps(ledger.to_dict(), indent=2, allow_nan=False) + "\n").encode("utf-8")


def write_ledger(path: Path, ledger: Ledger) -> None:
    """Store ``ledger`` at ``path`` atomically (temporary file, fsync, ``os.replace``).

    Raises:
        LedgerError: the file cannot be written (a full disk, no permission), naming ``path``;
            the ledger is then left as it was.
    """
    try:
        _write_atomically(path, serialize(ledger))
    except OSError as error:
        raise LedgerError(
            path, f"cannot be written ({error.strerror or error}); it is left as it was"
        ) from None


def _write_atomically(path: Path, data: bytes) -> None:
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


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary copies a writer killed mid-write left (under the ledger's lock)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


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
        _remove_stale_temporaries(path)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
