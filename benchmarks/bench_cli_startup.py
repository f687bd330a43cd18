"""Benchmark: the start-up of the ``dpcomm`` command, best of N wall-clock runs per command.

Each command runs in a fresh interpreter as the console script runs it (``dpcomm.cli.main``);
``python -c pass`` is the floor. ``dpcomm account`` is a typical accounting (the paper's
scrambler: T = 20, σ = 0.2, n = 100, d = 50, δ = 1e-4), whose answer takes milliseconds: the
rest is importing what it computes with. Run it after ``make`` (byte code compiled).

Usage: python benchmarks/bench_cli_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

SCRIPT = "import sys; from dpcomm.cli.main import main; sys.exit(main())"
ACCOUNT = ["account", "scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100",
           "--dummies", "50", "--delta", "1e-4"]  # fmt: skip
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "dpcomm --version": [sys.executable, "-c", SCRIPT, "--version"],
    "dpcomm --help": [sys.executable, "-c", SCRIPT, "--help"],
    "dpcomm run aggregate --help": [sys.executable, "-c", SCRIPT, "run", "aggregate", "--help"],
    "dpcomm account scrambler ...": [sys.executable, "-c", SCRIPT, *ACCOUNT],
    "dpcomm account local --targets 20 --sampling 0.2": [
        sys.executable, "-c", SCRIPT, "account", "local", "--targets", "20", "--sampling", "0.2",
    ],
}  # fmt: skip


def best_seconds(command: list[str], repeat: int) -> float:
    """The least wall-clock seconds of ``repeat`` runs of ``command`` (each must succeed)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Time every command and print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (best kept)")
    args = parser.parse_args()
    seconds = {
        name: round(best_seconds(command, args.repeat), 3) for name, command in COMMANDS.items()
    }
    version = seconds["dpcomm --version"]
    print(
        json.dumps(
            {
                "best_of": args.repeat,
                "seconds": seconds,
                "account_over_version": round(seconds["dpcomm account scrambler ..."] - version, 3),
                "load_average": round(os.getloadavg()[0], 2),
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
