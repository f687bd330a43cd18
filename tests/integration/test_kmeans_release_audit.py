"""The K-means release audit: the correct mechanism passes, a seeded fault fails.

One iteration of K-means released (2-d points clamped to [0, 20]², K = T = 2 clusters, one
scrambler of n = 5 points at σ = 0.1 with d = 400 dummies: ε1 = 0.25 at δ = 1e-4; Laplace
ε2 = 2, reported ε = 2.21): the correct mechanism stays below the composed ε, and the seeded
fault ``unclamped`` (points summed without their clamp) is caught in 1,000 runs. The ``own-row``
fault (the sums' sensitivity of the row's own change alone) shows only at the audit's default
configuration (n = 2,000, 20,000 runs, half a minute): docs/audit.md gives its measurements.
"""

from __future__ import annotations

import json

import pytest

import dpcomm
from dpcomm.cli.main import main
from dpcomm.experiments.kmeans_audit import audit_kmeans_release

SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.1, batch_size=5, num_dummies=400)
SMALL = (
    "--batch", "5", "--sampling", "0.1", "--dummies", "400", "--release-epsilon", "2",
    "--delta", "1e-4",
)  # fmt: skip


def test_the_correct_mechanism_stays_below_the_composed_epsilon() -> None:
    report = audit_kmeans_release(SCRAMBLERS, dpcomm.Laplace(2.0), runs=2000, delta=1e-4, rng=0)
    assert report.reported_epsilon == pytest.approx(2.2089, abs=1e-3)
    assert report.traffic_epsilon == pytest.approx(0.2457, abs=1e-3)
    assert report.reported_epsilon <= report.summed_epsilon
    assert [name for name, _ in report.noise_scales] == [
        "SUM(x clamped to [0, 20], centred on 10)",
        "SUM(y clamped to [0, 20], centred on 10)",
        "COUNT(*)",
    ]
    assert report.passed


def test_points_summed_without_their_clamp_are_caught(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "kmeans-release", *SMALL, "--runs", "1000", "--fault", "unclamped"])
    out = capsys.readouterr().out
    assert code == 1
    claimed = float(out.split("claimed ε (δ = 0.0001): ", 1)[1].split()[0])
    lower = float(out.split("ε >= ")[-1].split()[0])
    assert claimed == pytest.approx(2.2089, abs=1e-3)  # still claimed
    assert lower > claimed + 1.0  # measured 4.1
    assert out.splitlines()[0].startswith("Audit of one iteration of K-means released")
    assert "seeded fault: unclamped" in out and "verdict: FAIL" in out
    assert "  SUM(x clamped to [0, 20], centred on 10): noise scale " in out


def test_cli_json_report_of_one_vector(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["audit", "kmeans-release", *SMALL, "--runs", "400", "--aggregate", "SUM(x", "--json"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "PASS"
    assert report["kind"] == "kmeans-release" and report["fault"] == "none"
    assert report["aggregate"] == "SUM(x clamped to [0, 20], centred on 10)"
    assert list(report["noise_scales"]) == [report["aggregate"]]
    assert [p["name"] for p in report["pairs"]] == ["others-on-destination", "others-on-source"]
    assert report["reported_epsilon"] < 2.2089  # the traffic and one vector's noise alone
