"""A ledger that cannot fork or hang: symlinks resolved once, only regular files read (size
capped), killed writers' temporary files cleaned, duplicate keys refused, write errors naming
the ledger, and outputs never left partial."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from dpcomm import Budget
from dpcomm.budget import ledger as ledger_module
from dpcomm.budget.ledger import LedgerError, content_digest, read_ledger
from dpcomm.data.atomic import replaced_atomically
from dpcomm.errors import DpcommError, InvalidParameterError


def _charge(budget: Budget, epsilon: float = 0.5) -> None:
    budget.charge(epsilon=epsilon, delta=0.0, kind="aggregate", query="SELECT 1", method="exact")


def test_a_symlinked_ledger_shared_by_two_paths_sees_both_charges(tmp_path: Path) -> None:
    real = tmp_path / "shared" / "ledger.json"
    real.parent.mkdir()
    Budget(epsilon=3.0, delta=1e-5, ledger=real)
    link = tmp_path / "mine.json"
    link.symlink_to(real)
    _charge(Budget(ledger=link))
    _charge(Budget(ledger=real))
    assert link.is_symlink()
    assert Budget(ledger=real).spent().charges == 2
    assert Budget(ledger=link).spent().charges == 2
    assert not (tmp_path / "mine.json.lock").exists()  # the lock is the real file's


def test_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(InvalidParameterError, match="ledger"):
        Budget(epsilon=1.0, delta=0.0, ledger=loop)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_ledger_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "ledger.json"
    if kind == "device":
        path = Path("/dev/full")
        if not path.exists():
            pytest.skip("no /dev/full")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(InvalidParameterError, match="ledger"):
        Budget(epsilon=1.0, delta=0.0, ledger=path)
    with pytest.raises(LedgerError, match=r"not a regular file|cannot be read"):
        read_ledger(path)


def test_the_size_read_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ledger.json"
    Budget(epsilon=1.0, delta=0.0, ledger=path)
    monkeypatch.setattr(ledger_module, "MAX_LEDGER_BYTES", 64)
    with pytest.raises(LedgerError, match="larger than 64 bytes"):
        read_ledger(path)


def test_temporary_files_of_a_killed_writer_are_cleaned(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    Budget(epsilon=1.0, delta=0.0, ledger=path)
    stale = tmp_path / ".ledger.json.k2x_9abc.tmp"
    stale.write_text("{half a ledger")
    other = tmp_path / ".ledger.json.b.k2x_9abc.tmp"  # another ledger's (ledger.json.b)
    other.write_text("{")
    _charge(Budget(ledger=path))
    assert not stale.exists()
    assert other.exists()


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    Budget(epsilon=1.0, delta=0.0, ledger=path)
    document = json.loads(path.read_text())
    content = {k: v for k, v in document.items() if k != "digest"}
    budget = json.dumps(content["budget"])
    text = json.dumps({**content, "digest": content_digest(content)})
    path.write_text(text.replace('"budget": ', f'"budget": {budget}, "budget": ', 1))
    with pytest.raises(LedgerError, match="'budget' appears twice"):
        Budget(ledger=path)
    with pytest.raises(LedgerError, match="appears twice"):
        Budget(ledger=path, accept_edits=True)


def _no_space(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_names_the_ledger_and_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.json"
    budget = Budget(epsilon=1.0, delta=0.0, ledger=path)
    before = path.read_bytes()
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(LedgerError, match=f"{path}.*No space left on device") as raised:
        _charge(budget)
    assert "\n" not in str(raised.value)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json", "ledger.json.lock"]


def test_an_output_is_never_left_partial(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("old")
    written = pytest.raises(DpcommError, match=f"cannot write {report}: No space")
    with written, replaced_atomically(report) as temporary:
        temporary.write_text("{half")
        _no_space()
    assert report.read_text() == "old"
    fresh = tmp_path / "new.json"
    with pytest.raises(DpcommError, match="No space"), replaced_atomically(fresh) as temporary:
        _no_space()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    with replaced_atomically(fresh) as temporary:
        temporary.write_text("{}")
    assert fresh.read_text() == "{}"
