"""``dpcomm audit``: parse, run, print (the parser is built here with add_audit_command)."""

from __future__ import annotations

import argparse
import json

import pytest

from dpcomm.cli.audit import add_audit_command
from dpcomm.errors import InvalidParameterError


def parse(*args):
    parser = argparse.ArgumentParser(prog="dpcomm")
    commands = parser.add_subparsers(dest="command", required=True)
    add_audit_command(commands)
    return parser.parse_args(list(args))


def run(capsys, *args):
    parsed = parse(*args)
    code = parsed.handler(parsed)
    return code, capsys.readouterr().out


def test_local_json_pass(capsys):
    code, out = run(
        capsys, "audit", "local", "--targets", "20", "--sampling", "0.5", "--dummies", "3",
        "--runs", "50000", "--json",
    )  # fmt: skip
    assert code == 0
    report = json.loads(out)
    assert report["verdict"] == "PASS"
    assert report["delta"] == 0.0
    assert report["upper_method"] == "theorem-1"
    assert 0 < report["lower_bound"] <= report["upper_bound"]
    for key in ("distinct_outputs", "new_share_draws", "max_log_ratio", "top_outputs"):
        assert key in report["appendix_d"]


def test_scrambler_fault_fails_in_text(capsys):
    code, out = run(
        capsys, "audit", "scrambler", "--targets", "20", "--sampling", "0.2", "--dummies", "50",
        "--batch", "100", "--runs", "50000", "--fault", "no-shuffle",
    )  # fmt: skip
    assert code == 1
    assert "verdict: FAIL" in out
    assert "seeded fault: no-shuffle" in out
    assert "Appendix D view" in out


def test_default_options():
    args = parse("audit", "scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100")
    assert args.runs == 1_000_000
    assert args.confidence == 0.95
    assert args.delta is None


def test_invalid_combinations_raise():
    args = parse("audit", "local", "--targets", "20", "--sampling", "0.5", "--batch", "10")
    with pytest.raises(InvalidParameterError, match="batch"):
        args.handler(args)
    args = parse("audit", "scrambler", "--targets", "20", "--sampling", "0.5")
    with pytest.raises(InvalidParameterError, match="batch"):
        args.handler(args)
    args = parse("audit", "local", "--targets", "1", "--sampling", "0.5")
    with pytest.raises(InvalidParameterError, match="num_targets"):
        args.handler(args)
