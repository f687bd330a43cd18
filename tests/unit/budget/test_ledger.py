"""The ledger file: versioned JSON, atomic writes, one-line errors for what is not a ledger."""

import json

import pytest

from dpcomm.budget.ledger import (
    Charge,
    Ledger,
    LedgerError,
    lock_path,
    locked,
    read_ledger,
    serialize,
    write_ledger,
)

CHARGE = Charge("2026-11-26T00:00:00+00:00", "aggregate", "SELECT 1", 0.5, 1e-6, "exact")


def test_a_ledger_round_trips(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = Ledger(2.0, 1e-5).with_charge(CHARGE)
    write_ledger(path, ledger)
    assert read_ledger(path) == ledger
    document = json.loads(path.read_text())
    assert document["version"] == 1
    assert document["budget"] == {"epsilon": 2.0, "delta": 1e-5, "composition": "basic"}
    assert document["charges"][0] == {
        "time": CHARGE.time,
        "kind": "aggregate",
        "query": "SELECT 1",
        "epsilon": 0.5,
        "delta": 1e-6,
        "method": "exact",
    }
    assert path.read_bytes() == serialize(ledger)


def test_writing_leaves_no_temporary_file_and_keeps_the_mode(tmp_path):
    path = tmp_path / "ledger.json"
    write_ledger(path, Ledger(1.0, 0.0))
    path.chmod(0o600)
    write_ledger(path, Ledger(1.0, 0.0).with_charge(CHARGE))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json"]
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a dpcomm ledger"),
        ('{"name": "something else"}', "not a dpcomm ledger"),
        ('{"version": 2, "budget": {}, "charges": []}', "version 2"),
        ('{"version": 1, "budget": {"epsilon": -1, "delta": 0}, "charges": []}', "budget"),
        ('{"version": 1, "budget": {"epsilon": 1, "delta": 1}, "charges": []}', "budget"),
        (
            '{"version": 1, "budget": {"epsilon": 1, "delta": 0, "composition": "pld"}, '
            '"charges": []}',
            "composition",
        ),
        (
            '{"version": 1, "budget": {"epsilon": 1, "delta": 0, "composition": "basic"}, '
            '"charges": {}}',
            "charges",
        ),
        (
            '{"version": 1, "budget": {"epsilon": 1, "delta": 0, "composition": "basic"}, '
            '"charges": [{"time": "t", "kind": "k", "query": "q", "method": "m", '
            '"epsilon": "1", "delta": 0}]}',
            "charge 0",
        ),
    ],
)
def test_a_corrupt_or_foreign_file_is_one_line_error(tmp_path, text, says):
    path = tmp_path / "ledger.json"
    path.write_text(text)
    with pytest.raises(LedgerError, match=says) as caught:
        read_ledger(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(LedgerError, match="no such file"):
        read_ledger(tmp_path / "missing.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(LedgerError, match="cannot be read"):
        read_ledger(binary)


def test_the_lock_is_a_sidecar_file(tmp_path):
    path = tmp_path / "ledger.json"
    with locked(path):
        assert lock_path(path).exists()
    assert lock_path(path).name == "ledger.json.lock"
