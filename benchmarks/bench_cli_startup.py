"""Benchmark: the start-up of the ``dpcomm`` command, best of N wall-clock runs per command.

Each command runs in a fresh interpreter as the console script runs it (``dpcomm.cli.main``);
``python -c pass`` is the floor. ``dpcomm account`` is a typical accounting (the paper's
scrambler: T = 20, σ = 0.2, n = 100, d = 50, δ = 1e-4), whose answer takes milliseconds: the
rest is importing what it computes with. Run it after ``make`` (byte code compiled).

``--entry MODULE`` times another console script's module (``dpcomm.cli.entry`` on a checkout
from before the parser was built without the library, with ``PYTHONPATH=/path/to/src``).

Usage: python benchmarks/bench_cli_startup.py [--repeat N] [--entry MODULE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

SCRIPT = "import sys; from {entry} import main; sys.exit(main())"
ACCOUNT = ["account", "scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100",
           "--dummies", "50", "--delta", "1e-4"]  # fmt: skip
COMMANDS: dict[str, list[str] | None] = {
    "python -c pass": None,
    "dpcomm --version": ["--version"],
    "dpcomm --help": ["--help"],
    "dpcomm run aggregate --help": ["run", "aggregate", "--help"],
    "dpcomm account scrambler ...": ACCOUNT,
    "dpcomm account local --targets 20 --sampling 0.2": [
        "account", "local", "--targets", "20", "--sampling", "0.2",
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
    parser.add_argument("--entry", default="dpcomm.cli.main", help="the console script's module")
    args = parser.parse_args()
    script = SCRIPT.format(entry=args.entry)
    seconds = {}
    for name, argv in COMMANDS.items():
        command = [sys.executable, "-c", "pass" if argv is None else script, *(argv or [])]
        seconds[name] = round(best_seconds(command, args.repeat), 3)
    version = seconds["dpcomm --version"]
    print(
        json.dumps(
            {
                "best_of": args.repeat,
                "entry": args.entry,
                "seconds": seconds,
                "account_over_version": round(seconds["dpcomm account scrambler ..."] - version, 3),
                "load_average": round(os.getloadavg()[0], 2),
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
