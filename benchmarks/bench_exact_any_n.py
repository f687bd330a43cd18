"""Benchmark: exact accounting of one uncapped scrambler at any batch size n (issue 12).

T = 20, d = 100, δ = 1e-6; ε = the smallest ε with ExactLemma2(m).delta(ε) ≤ δ, found by
``ExactLemma2.epsilon_for_delta`` (bisection bracketed by Hoeffding's ε); the old tables by
``epsilon_for_delta`` on [0, ε0] (the new evaluator too with ``--plain``). Each point runs in a
fresh child process; it prints wall time (set-up + search) and the child's peak RSS. ``--old``
also runs the former full-table evaluation (tests/unit/_exact_tables.py) where it fits.

Usage: python benchmarks/bench_exact_any_n.py [--sigma 0.2] [--sizes 1000,10000] [--old] [--plain]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path


def run_point(n: int, sigma: float, old: bool, plain: bool = False) -> dict[str, object]:
    """One (n, σ) in this process: ε for δ = 1e-6, wall seconds and peak RSS."""
    import resource

    from dpcomm.accounting.exact import ExactLemma2
    from dpcomm.accounting.mechanisms import ScramblerMechanism
    from dpcomm.accounting.search import epsilon_for_delta

    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=sigma, batch_size=n, num_dummies=100
    )
    if old:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
        from _exact_tables import ExactLemma2Tables

        evaluator = ExactLemma2Tables
    else:
        evaluator = ExactLemma2  # type: ignore[assignment]
    upper = math.log(1.0 + (1.0 - sigma) * 20 / sigma) if sigma > 0 else 60.0
    start = time.perf_counter()
    if old or plain:
        epsilon = epsilon_for_delta(evaluator(mechanism).delta, 1e-6, upper=upper)
    else:
        epsilon = ExactLemma2(mechanism).epsilon_for_delta(1e-6)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "n": n,
        "sigma": sigma,
        "method": "old" if old else ("new-plain" if plain else "new"),
        "epsilon": epsilon,
        "seconds": round(wall, 2),
        "peak_rss_mib": round(peak),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sigma", type=float, default=0.2)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--old", action="store_true", help="also the former tables (n <= 1e5)")
    parser.add_argument(
        "--plain", action="store_true", help="also the new evaluator bisected on [0, ε0]"
    )
    parser.add_argument("--inline", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inline:
        n, sigma, method = int(args.inline[0]), float(args.inline[1]), args.inline[2]
        print(json.dumps(run_point(n, sigma, method == "old", method == "plain")))
        return
    for n in (int(size) for size in args.sizes.split(",")):
        methods = ["new"] + (["plain"] if args.plain else [])
        for method in methods + (["old"] if args.old and n <= 100_000 else []):
            output = subprocess.run(
                [sys.executable, __file__, "--inline", str(n), str(args.sigma), method],
                check=True,
                capture_output=True,
                text=True,
            )
            point = json.loads(output.stdout)
            print(
                f"n={point['n']:>8}  σ={point['sigma']}  {point['method']}  "
                f"ε={point['epsilon']:.6f}  {point['seconds']:>6} s  "
                f"{point['peak_rss_mib']:>5} MiB",
                flush=True,
            )


if __name__ == "__main__":
    main()
