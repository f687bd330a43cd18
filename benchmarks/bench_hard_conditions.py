"""Benchmark: a deployed round on a busy machine and over a slow, lossy link, against idle.

* **Contention**: the red-team's round on the Auto MPG table (392 rows, a text column:
  ``dpcomm run aggregate --engine network --data autompg.csv --sql ... --mechanism scrambler
  --sampling 0 --batch 40 --dummies 10 --seed 1``) run as a user would, idle and beside
  (k − 1) × cores CPU-bound processes (k× oversubscribed). The goal: at most 1.5× the
  slowdown the CPU share explains (≤ 3× idle at 2×). Each run must print the result (exit 0,
  nothing left out).
* **Network**: one round with its infrastructure on host A and its sources on host B (two
  network namespaces, ``tests/integration/hosts.py``), over a plain veth link and over a link
  that delays every packet by 100 ms ± 30 ms and loses 1% (``tc netem``, or a TUN packet relay
  where the kernel has no netem). Needs root; skipped, saying why, elsewhere.

Usage: python benchmarks/bench_hard_conditions.py [--repeat R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

SQL = (
    "SELECT cylinders, origin, COUNT(*), AVG(mpg) FROM t GROUP BY GROUPING SETS ((cylinders), "
    "(origin))"
)
NAMES = [
    "cylinders", "displacement", "horsepower", "weight", "acceleration", "model year", "origin",
    "car name", "mpg",
]  # fmt: skip


def cars_csv(directory: Path) -> Path:
    """mlxtend's Auto MPG table (392 rows) as a CSV with a header."""
    import duckdb

    source = resources.files("mlxtend").joinpath("data/data/autompg.csv.gz")
    path = directory / "autompg.csv"
    duckdb.sql(
        f"COPY (SELECT * FROM read_csv('{source}', header = false, names = {NAMES!r})) "
        f"TO '{path}' (HEADER)"
    )
    return path


def deploy(data: Path) -> float:
    """Wall seconds of one deployed run (`--engine network`) of the red-team's round."""
    command = [
        str(Path(sys.executable).with_name("dpcomm")), "run", "aggregate", "--engine", "network",
        "--data", str(data),
        "--sql", SQL, "--mechanism", "scrambler", "--sampling", "0", "--batch", "40",
        "--dummies", "10", "--seed", "1", "--quiet",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the round failed ({seconds:.1f} s): {done.stderr.strip()[-400:]}")
    return seconds


def contention(data: Path, repeat: int) -> dict[str, list[float]]:
    from hosts import busy_processes

    cores = os.cpu_count() or 1
    results: dict[str, list[float]] = {}
    for factor in (1, 2, 4):
        label = "idle" if factor == 1 else f"{factor}x oversubscribed"
        with busy_processes((factor - 1) * cores):
            results[label] = [deploy(data) for _ in range(repeat)]
    return results


def network(repeat: int) -> dict[str, list[float]] | str:
    import pytest
    from engine_contract import SEED, autompg
    from hosts import lossy_link, run_on_hosts, veth_hosts

    from dpcomm.plan import Scramblers

    countermeasure = Scramblers(sampling_rate=0.2, batch_size=40, num_dummies=10)
    program = autompg(rows=120)
    results: dict[str, list[float]] = {}
    for label in ("veth", "lossy link"):
        for _ in range(repeat):
            try:
                link = veth_hosts() if label == "veth" else lossy_link()
                with link as hosts, tempfile.TemporaryDirectory() as folder:
                    if label == "veth":
                        host_a, host_b, name = hosts[0], hosts[1], label
                    else:
                        host_a, host_b, name = hosts.host_a, hosts.host_b, f"{label} ({hosts.how})"
                    started = time.perf_counter()
                    run = run_on_hosts(
                        program, countermeasure, seed=SEED, host_a=host_a, host_b=host_b,
                        directory=Path(folder),
                    )  # fmt: skip
                    results.setdefault(name, []).append(time.perf_counter() - started)
            except pytest.skip.Exception as skipped:
                return f"skipped: {skipped}"
            if run.details.failures:
                raise SystemExit(f"{label}: the round failed: {run.details.failures}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        data = cars_csv(Path(folder))
        document: dict[str, object] = {
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}",
            "contention": contention(data, args.repeat),
            "network": network(args.repeat),
        }
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(document["machine"])
    for section in ("contention", "network"):
        results = document[section]
        if isinstance(results, str):
            print(f"{section}: {results}")
            continue
        assert isinstance(results, dict)
        baseline = statistics.median(next(iter(results.values())))
        for label, times in results.items():
            median = statistics.median(times)
            runs = ", ".join(f"{t:.1f}" for t in times)
            print(f"{section}: {label}: median {median:.1f} s ({runs}); {median / baseline:.2f}x")


if __name__ == "__main__":
    main()
