"""``dpcomm audit``: parse, run, print (the parser is built here with add_audit_command)."""

from __future__ import annotations

import argparse
import inspect
import json

import pytest

from dpcomm.cli.audit import add_audit_command
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments import release_audit


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


# ------------------------------------------------------------------- audit release

#: A small, fast configuration of the release audit: scramblers of 10 sources, 400 runs.
SMALL_RELEASE = ("audit", "release", "--batch", "10", "--runs", "400")


def test_release_text_report(capsys):
    code, out = run(capsys, *SMALL_RELEASE)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Audit of traffic and noisy release together"
    assert "traffic: scramblers n=10, d=0 dummies each, sampling σ=0.04, T=2" in out
    assert "  SUM(v clamped to [-10, 10]): noise scale 10" in lines
    tried = lines[lines.index("pairs tried (best event's lower bound on the selection half):") :]
    names = [line.split()[0] for line in tried[1:5]]
    assert names == ["third-key", "signed", "others-on-destination", "others-on-source"]
    assert all(" ε >= " in line for line in tried[1:5])
    chosen = [line.split()[0] for line in tried[1:5] if line.endswith("<- chosen")]
    assert len(chosen) == 1
    assert f"chosen pair: {chosen[0]}: source 0 holds" in out
    assert "claimed ε (traffic and release together, δ = 0.01): " in out
    assert "Bonferroni over 10 events): ε >= " in out
    assert "verdict: PASS" in out
    assert "seeded fault" not in out


def test_release_json_report(capsys):
    code, out = run(
        capsys, *SMALL_RELEASE, "--targets", "3", "--bounds", "0:10", "--release", "gaussian",
        "--release-epsilon", "2", "--release-delta", "1e-5", "--delta", "1e-4", "--json",
    )  # fmt: skip
    assert code == 0
    report = json.loads(out)
    assert report["kind"] == "release" and report["fault"] == "none"
    assert report["countermeasure"] == {
        "name": "scrambler", "sampling_rate": 0.04, "batch_size": 10, "num_dummies": 0,
        "capped": False,
    }  # fmt: skip
    assert report["release"] == {"mechanism": "gaussian", "epsilon": 2.0, "delta": 1e-5}
    assert report["num_targets"] == 3 and report["bounds"] == [0.0, 10.0]
    assert report["runs_per_table"] == 400 and report["confidence"] == 0.95
    assert report["delta"] == pytest.approx(1e-4 + 1e-5)  # the composed δ the run reports
    assert list(report["noise_scales"]) == ["SUM(v clamped to [0, 10])"]
    # [0, 10]: no signed pair.
    assert [p["name"] for p in report["pairs"]] == [
        "third-key", "others-on-destination", "others-on-source",
    ]  # fmt: skip
    chosen = [p["name"] for p in report["pairs"] if p["chosen"]]
    assert chosen == [report["chosen_pair"]["name"]]
    assert report["verdict"] == "PASS"
    assert 0 <= report["lower_bound"] <= report["reported_epsilon"] <= report["summed_epsilon"]
    assert report["events_tried"] == 10


def test_release_defaults_are_the_librarys():
    args = parse("audit", "release")
    defaults = inspect.signature(release_audit.audit_release).parameters
    traffic = release_audit.DEFAULT_COUNTERMEASURE
    assert (args.num_targets, args.batch_size, args.sampling_rate, args.num_dummies) == (
        release_audit.DEFAULT_TARGETS,
        traffic.batch_size,
        traffic.sampling_rate,
        traffic.num_dummies,
    )
    release = release_audit.DEFAULT_RELEASE
    assert (args.release, args.release_epsilon) == (release.name, release.epsilon) == ("laplace", 3)
    assert args.release_delta is None  # Laplace: δ2 = 0
    assert args.bounds == release_audit.DEFAULT_BOUNDS
    assert args.runs == defaults["runs"].default == release_audit.DEFAULT_RUNS
    assert args.delta == defaults["delta"].default == release_audit.DEFAULT_DELTA
    assert args.confidence == defaults["confidence"].default
    assert args.fault is None and args.seed == 0


def test_release_audits_a_query_of_its_own_and_one_aggregate():
    sql = "SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY k"
    args = parse("audit", "release", "--sql", sql, "--aggregate", "MEDIAN")
    assert (args.sql, args.aggregate) == (sql, "MEDIAN")
    assert parse("audit", "release").sql == release_audit.RELEASE_AUDIT_SQL


def test_release_pairs_are_chosen_by_name():
    assert parse("audit", "release").pairs is None  # every pair that applies
    args = parse("audit", "release", "--pair", "signed", "--pair", "quantile-near-tie")
    assert args.pairs == ["signed", "quantile-near-tie"]


def test_quantile_uncharged_fails_on_the_near_tie_pair(capsys):
    """A median drawn but left out of the composition (``quantile-uncharged``), its view claimed
    at the traffic's ε1 alone: on the pair where one value tips the median (the others' values
    at two adjacent candidates on both keys), the audit's bound is far above that claim
    (measured 0.63 – 0.93 against 0.295 at ε2 = 5; docs/audit.md)."""
    code, out = run(
        capsys, "audit", "release", "--sql", "SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t "
        "GROUP BY k", "--release-epsilon", "5", "--fault", "quantile-uncharged", "--aggregate",
        "MEDIAN", "--pair", "quantile-near-tie", "--runs", "2000", "--json",
    )  # fmt: skip
    assert code == 1
    report = json.loads(out)
    assert report["fault"] == "quantile-uncharged" and report["verdict"] == "FAIL"
    assert report["chosen_pair"]["name"] == "quantile-near-tie"
    assert report["reported_epsilon"] == pytest.approx(report["traffic_epsilon"])  # ε1 alone
    assert report["lower_bound"] > report["reported_epsilon"] + 0.15


def test_release_bounds_take_a_negative_low_after_an_equals_sign():
    assert parse("audit", "release", "--bounds=-5:5").bounds == (-5.0, 5.0)


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (["--bounds", "5:1"], "--bounds"),
        (["--bounds", "0-10"], "--bounds"),
        (["--release-delta", "1e-6"], "--release-delta"),
        (["--release", "gaussian", "--release-delta", "2"], "--release-delta"),
        (["--release-epsilon", "0"], "--release-epsilon"),
        (["--release", "uniform"], "--release"),
        (["--targets", "1"], "--targets"),
        (["--sampling", "1.5"], "--sampling"),
        (["--batch", "0"], "--batch"),
        (["--dummies", "-1"], "--dummies"),
        (["--runs", "10"], "--runs"),
        (["--confidence", "1"], "--confidence"),
        (["--delta", "1"], "--delta"),
        (["--fault", "no-shuffle"], "--fault"),
        (["--fault", "quantile-add-remove"], "--fault"),  # the default SQL has no quantile
        (
            [
                "--sql",
                "SELECT k, MEDIAN(v) AS m FROM t GROUP BY k",
                "--fault",
                "quantile-uncharged",
            ],
            "--fault",
        ),
        (["--aggregate", "MEDIAN"], "--aggregate"),
        (["--pair", "quantile-near-tie"], "--pair"),  # the default SQL has no quantile
        (["--pair", "nowhere"], "--pair"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_release_bad_input_is_one_line(cli, options, flag):
    status, out, err = cli("audit", "release", *options)
    assert status not in (0, None), err
    assert out == ""
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "error" in err and flag in err, err


@pytest.mark.slow
def test_release_old_sensitivity_fails_at_the_default_configuration(cli):
    """The library's seeded fault ``old-sensitivity`` (`seeded_release_fault`: every view
    ``own-row``, max(2M, W) = 2M for signed bounds against M + W = 3M) at the default
    configuration, with half its runs (20,000 per table, about 6 s of CPU): its bound, 3.68 –
    3.79 measured (3.70 – 3.93 at the default 40,000), is far above the claimed 3.291
    (docs/audit.md); exit status 1. The correct mechanism passes at the default runs
    (tests/integration/test_release_audit.py)."""
    status, out, err = cli(
        "audit", "release", "--fault", "old-sensitivity", "--runs", "20000", "--json"
    )
    assert status == 1, err
    report = json.loads(out)
    assert report["runs_per_table"] == 20_000
    assert report["fault"] == "old-sensitivity" and report["verdict"] == "FAIL"
    assert report["noise_scales"] == {"SUM(v clamped to [-10, 10])": pytest.approx(20.0 / 3.0)}
    assert report["reported_epsilon"] == pytest.approx(3.291, abs=2e-3)  # still claimed
    assert report["lower_bound"] > report["reported_epsilon"] + 0.1
    chosen = report["chosen_pair"]["name"]
    assert chosen in ("others-on-destination", "others-on-source")
    assert [p["name"] for p in report["pairs"] if p["chosen"]] == [chosen]
