"""The ledger file: versioned, signed JSON, atomic writes, one-line errors for what is not a
ledger or was edited outside dpcomm."""

import json

import pytest

from dpcomm.budget.ledger import (
    VERSION,
    Charge,
    Ledger,
    LedgerError,
    content_digest,
    lock_path,
    locked,
    read_ledger,
    serialize,
    write_ledger,
)

CHARGE = Charge("2026-11-26T00:00:00+00:00", "aggregate", "SELECT 1", 0.5, 1e-6, "exact")
RECORDED = Charge(
    "2026-11-26T00:00:01+00:00",
    "aggregate",
    "SELECT city, COUNT(*) FROM people WHERE age > 17 GROUP BY city",
    1.25,
    0.0,
    "theorem-2(parallel(theorem-1)) + laplace release",
    {"mechanism": "local", "sampling_rate": 0.2, "batch_size": None, "num_dummies": 3,
     "capped": False},
    {"mechanism": "laplace", "epsilon": 1.0, "delta": 0.0, "bounds": {}, "keys": {"city": ["a"]},
     "key_selection_delta": None},
    "memory",
)  # fmt: skip


def signed(document):
    """``document`` (JSON text) with the digest dpcomm would store for it."""
    content = json.loads(document)
    return json.dumps({**content, "digest": content_digest(content)})


def test_a_ledger_round_trips(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = Ledger(2.0, 1e-5).with_charge(CHARGE).with_charge(RECORDED)
    write_ledger(path, ledger)
    assert read_ledger(path) == ledger
    document = json.loads(path.read_text())
    assert document["version"] == VERSION == 2
    assert document["budget"] == {"epsilon": 2.0, "delta": 1e-5, "composition": "basic"}
    assert document["charges"][0] == {
        "time": CHARGE.time,
        "kind": "aggregate",
        "query": "SELECT 1",
        "epsilon": 0.5,
        "delta": 1e-6,
        "method": "exact",
        "countermeasure": None,
        "release": None,
        "engine": None,
    }
    assert document["charges"][1]["countermeasure"]["mechanism"] == "local"
    assert document["charges"][1]["release"]["keys"] == {"city": ["a"]}
    assert document["charges"][1]["engine"] == "memory"
    assert document["digest"].startswith("sha256:") and len(document["digest"]) == 7 + 64
    assert path.read_bytes() == serialize(ledger)


def test_the_digest_covers_the_content_not_its_formatting():
    content = Ledger(2.0, 1e-5).with_charge(RECORDED).content()
    shuffled = json.loads(json.dumps(content, indent=7, sort_keys=True))
    assert content_digest(shuffled) == content_digest(content)
    raised = json.loads(json.dumps(content))
    raised["budget"]["epsilon"] = 100.0
    assert content_digest(raised) != content_digest(content)


def test_a_reformatted_ledger_is_still_accepted(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = Ledger(2.0, 1e-5).with_charge(RECORDED)
    write_ledger(path, ledger)
    path.write_text(json.dumps(json.loads(path.read_text()), sort_keys=True))  # one line
    assert read_ledger(path) == ledger


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["budget"].update(epsilon=100.0),  # the budget raised from 2 to 100
        lambda d: d["charges"].pop(),  # a charge deleted
        lambda d: d["charges"][0].update(delta=0.0),  # a charge lowered
        lambda d: d.pop("digest"),  # the digest removed
        lambda d: d.update(digest="sha256:" + "0" * 64),
    ],
)
def test_an_edited_ledger_is_refused_in_one_line_until_accepted(tmp_path, edit):
    path = tmp_path / "ledger.json"
    write_ledger(path, Ledger(2.0, 1e-5).with_charge(CHARGE))
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document, indent=2))
    with pytest.raises(LedgerError, match="edited by hand") as caught:
        read_ledger(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "--accept-edits" in message
    assert "accept_edits=True" in message
    accepted = read_ledger(path, accept_edits=True)
    write_ledger(path, accepted)  # signed again
    assert read_ledger(path) == accepted


def test_a_version_1_ledger_is_refused_until_accepted_then_upgraded(tmp_path):
    path = tmp_path / "ledger.json"
    old = {
        "version": 1,
        "budget": {"epsilon": 3.0, "delta": 1e-5, "composition": "basic"},
        "charges": [
            {"time": "t", "kind": "aggregate", "query": "SELECT ...", "epsilon": 1.0,
             "delta": 1e-6, "method": "exact"}
        ],
    }  # fmt: skip
    path.write_text(json.dumps(old))
    with pytest.raises(LedgerError, match="version 1 has no digest") as caught:
        read_ledger(path)
    assert "\n" not in str(caught.value) and "--accept-edits" in str(caught.value)
    ledger = read_ledger(path, accept_edits=True)
    assert ledger.charges[0].countermeasure is None and ledger.charges[0].engine is None
    write_ledger(path, ledger)
    assert json.loads(path.read_text())["version"] == 2
    assert read_ledger(path) == ledger


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
        ('{"version": 3, "budget": {}, "charges": []}', "version 3"),
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
        (
            '{"version": 1, "budget": {"epsilon": 1, "delta": 0, "composition": "basic"}, '
            '"charges": [{"time": "t", "kind": "k", "query": "q", "method": "m", '
            '"epsilon": 1, "delta": 0, "release": [1]}]}',
            "charge 0",
        ),
    ],
)
def test_a_corrupt_or_foreign_file_is_one_line_error(tmp_path, text, says):
    path = tmp_path / "ledger.json"
    document = json.loads(text) if text.startswith('{"version') else None
    if document is not None and document["version"] == 1:  # as version 2, signed
        text = signed(json.dumps({**document, "version": 2}))
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
