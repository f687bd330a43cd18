"""Benchmark: the planner on the paper's scenario (goals: G = 1 <= 10 s, every one < 1 min).

S = 10,000 tuples used, T = 20, ε = 1, δ = 1e-4: Aggregate with G = 1 grouping set (with and
without a limit of 200 channels per node), G = 4 (with and without it), and K-means with
I = 10 iterations (K = 20 centroids). Each scenario runs in a fresh Python process (cold
caches, imports excluded from the timing), and prints wall and CPU time.

Usage: python benchmarks/bench_planner.py [--scenario NAME]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

SCENARIOS: dict[str, dict[str, int]] = {
    "aggregate-g1-200ch": {"grouping_sets": 1, "max_channels": 200},
    "aggregate-g1": {"grouping_sets": 1},
    "aggregate-g4": {"grouping_sets": 4},
    "aggregate-g4-200ch": {"grouping_sets": 4, "max_channels": 200},
    "kmeans-i10": {"iterations": 10},
}


def run_scenario(name: str) -> dict[str, object]:
    """Plan one scenario in this process; return its measurements."""
    from dpcomm.calibration import plan_countermeasures

    wall, cpu = time.perf_counter(), time.process_time()
    result = plan_countermeasures(
        num_sources=10_000, num_targets=20, epsilon=1.0, delta=1e-4, **SCENARIOS[name]
    )
    return {
        "scenario": name,
        "wall_seconds": round(time.perf_counter() - wall, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "chosen": result.configuration.describe(),
        "epsilon": round(result.epsilon, 6),
        "network_load_messages": result.network_load_messages,
        "max_channels_per_node": result.max_channels_per_node,
        "extra_consents": result.extra_consents,
        "candidates": result.num_candidates,
        "pareto": len(result.pareto),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--inline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inline:
        print(json.dumps(run_scenario(args.scenario)))
        return
    names = [args.scenario] if args.scenario else list(SCENARIOS)
    for name in names:
        output = subprocess.run(
            [sys.executable, __file__, "--inline", "--scenario", name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        row = json.loads(output)
        print(
            f"{row['scenario']:<19} wall {row['wall_seconds']:6.2f} s  "
            f"cpu {row['cpu_seconds']:6.2f} s"
            f"  candidates {row['candidates']}, Pareto {row['pareto']}; chosen: {row['chosen']}"
            f" (ε = {row['epsilon']}, {row['network_load_messages']:,} messages, "
            f"{row['max_channels_per_node']:,} channels, {row['extra_consents']:,} consents)"
        )


if __name__ == "__main__":
    main()
