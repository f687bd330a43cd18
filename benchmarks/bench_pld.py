"""Time to build a scrambler's dominating pair and to compose its PLD over R rounds.

Usage: .venv/bin/python benchmarks/bench_pld.py [--quick]

Prints a Markdown table: (T, σ, n, d), the pair's atoms and build time, and for each R the
composed ε at δ = 1e-4 with its time (PLD grid 1e-4), beside Theorem 2's sum.
"""

from __future__ import annotations

import argparse
import time

from dpcomm.accounting import ScramblerMechanism, account, pld as pld_module

DELTA = 1e-4
CASES = [
    (20, 0.2, 100, 50),
    (20, 0.2, 100, 275),
    (20, 0.5, 158, 20),
    (20, 0.2, 1_000, 100),
    (20, 0.2, 10_000, 100),
]


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer cases and rounds")
    args = parser.parse_args()
    cases = CASES[:2] if args.quick else CASES
    rounds = (4, 10) if args.quick else (2, 4, 10, 20)
    print("| T, σ, n, d | atoms | pair build | R | PLD ε | compose + invert | Theorem 2 sum ε |")
    print("|---|---|---|---|---|---|---|")
    for size, sigma, n, d in cases:
        mechanism = ScramblerMechanism(
            num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
        )
        start = time.perf_counter()
        pair = pld_module.scrambler_pair(mechanism)
        built = time.perf_counter() - start
        distribution = pair.pld()
        for count in rounds:
            start = time.perf_counter()
            composed = pld_module.compose([distribution], counts=[count])
            epsilon = pld_module.epsilon_for_delta(composed, DELTA)
            spent = time.perf_counter() - start
            report = account(mechanism, delta=DELTA / count, monte_carlo_samples=0)
            print(
                f"| {size}, {sigma:g}, {n:,}, {d} | {pair.losses.size:,} | {built * 1e3:.0f} ms "
                f"| {count} | {epsilon:.4f} | {spent * 1e3:.0f} ms "
                f"| {count * report.guarantee.epsilon:.4f} |"
            )


if __name__ == "__main__":
    main()
