"""Benchmark: the K-means release audit's lower bounds, at the sizes docs/audit.md reports.

One JSON line per audit: the setting, the fault, the view (every released vector or SUM(x)
alone), the empirical lower bound on ε against the claimed composed ε, and the audit's CPU
and wall time. The release's noise is OpenDP's, never seeded: lower bounds vary from audit
to audit (``--repeat`` audits each setting several times).

* small: one scrambler of n = 5 points, d = 400 dummies, σ = 0.1, K = 2, [0, 20], Laplace
  ε2 = 2, δ = 1e-4: the correct release (2,000 runs) and ``unclamped`` (1,000 runs);
* default (`dpcomm.experiments.kmeans_audit`'s defaults: n = 2,000, σ = 0.04, ε2 = 8,
  δ = 1e-2, 20,000 runs): the correct release and ``own-row`` observed through SUM(x) alone,
  and ``own-row`` observed through every vector.

Usage: python benchmarks/bench_kmeans_audit.py [--repeat K] [--small-only]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import dpcomm
from dpcomm.experiments.kmeans_audit import audit_kmeans_release

SMALL = {
    "countermeasure": dpcomm.Scramblers(sampling_rate=0.1, batch_size=5, num_dummies=400),
    "release": dpcomm.Laplace(2.0),
    "delta": 1e-4,
}

#: (setting, fault, observed vector, runs per table, arguments).
AUDITS: list[tuple[str, str, str | None, int, dict[str, Any]]] = [
    ("small", "none", None, 2000, SMALL),
    ("small", "unclamped", None, 1000, SMALL),
    ("default", "none", "SUM(x", 20_000, {}),
    ("default", "own-row", "SUM(x", 20_000, {}),
    ("default", "own-row", None, 20_000, {}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="audits per setting")
    parser.add_argument("--small-only", action="store_true", help="the small setting alone")
    args = parser.parse_args()
    for setting, fault, aggregate, runs, arguments in AUDITS:
        if args.small_only and setting != "small":
            continue
        for seed in range(args.repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            report = audit_kmeans_release(
                runs=runs, fault=fault, aggregate=aggregate, rng=seed, **arguments
            )
            line = {
                "setting": setting,
                "fault": fault,
                "observed": report.aggregate or "every vector",
                "runs_per_table": runs,
                "claimed_epsilon": round(report.reported_epsilon, 4),
                "lower_bound": round(report.lower_bound, 4),
                "verdict": "PASS" if report.passed else "FAIL",
                "pair": report.neighbours.pair,
                "cpu_seconds": round(time.process_time() - cpu, 1),
                "wall_seconds": round(time.perf_counter() - wall, 1),
            }
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
