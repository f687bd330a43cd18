"""Benchmark: audit runs per second for the scrambler at n = 100, d = 50, T = 20, σ = 0.2.

A run is one execution of the mechanism on one of the two neighbouring inputs, through the role
steps every engine runs; the time covers the simulation, the statistics and the Appendix D view
(the accountant's part is negligible).

Usage: python benchmarks/bench_audit.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import platform

from dpcomm.accounting import ScramblerMechanism
from dpcomm.experiments.audit import audit


def main() -> None:
    """Run the benchmark and print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1_000_000, help="runs per input")
    args = parser.parse_args()
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
    )
    report = audit(mechanism, runs=args.runs, rng=0)
    print(
        json.dumps(
            {
                "runs_per_input": args.runs,
                "seconds": round(report.seconds, 2),
                "runs_per_second": round(report.runs_per_second),
                "lower_bound": round(report.lower_bound, 4),
                "upper_bound": round(report.upper_bound, 4),
                "verdict": "PASS" if report.passed else "FAIL",
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
