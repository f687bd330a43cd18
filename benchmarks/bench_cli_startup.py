"""Benchmark: the start-up of the ``dpcomm`` command, median of N interleaved wall-clock runs.

Each command runs in a fresh interpreter as the console script runs it (``dpcomm.cli.main``);
``python -c pass`` is the floor of every command, and ``import numpy, scipy.special`` the floor
of ``dpcomm account`` (its answer is computed with them). ``dpcomm account`` is a typical
accounting (the paper's scrambler: T = 20, σ = 0.2, n = 100, d = 50, δ = 1e-4), whose answer
takes milliseconds: the rest is importing what it computes with. Run it after ``make`` (byte
code compiled).

The commands are interleaved (each round runs every command once, in a shuffled order) so that
a shared machine's changing load falls on all of them alike; ``account_over_version`` is the
median, over the rounds, of a round's ``dpcomm account`` minus its ``dpcomm --version``.

``--entry MODULE`` times another console script's module (with ``PYTHONPATH=/path/to/src``
for another checkout).

Usage: python benchmarks/bench_cli_startup.py [--repeat N] [--entry MODULE] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

SCRIPT = "import sys; from {entry} import main; sys.exit(main())"
ACCOUNT = ["account", "scrambler", "--targets", "20", "--sampling", "0.2", "--batch", "100",
           "--dummies", "50", "--delta", "1e-4"]  # fmt: skip
FLOORS = {
    "python -c pass": "pass",
    "python -c 'import numpy, scipy.special'": "import numpy, scipy.special",
}
COMMANDS: dict[str, list[str]] = {
    "dpcomm --version": ["--version"],
    "dpcomm --help": ["--help"],
    "dpcomm run aggregate --help": ["run", "aggregate", "--help"],
    "dpcomm account scrambler ...": ACCOUNT,
    "dpcomm account local --targets 20 --sampling 0.2": [
        "account", "local", "--targets", "20", "--sampling", "0.2",
    ],
}  # fmt: skip


def seconds_of(command: list[str]) -> float:
    """Wall-clock seconds of one run of ``command`` (which must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ)
    return time.perf_counter() - start


def quartiles(values: list[float]) -> list[float]:
    """The first quartile, the median and the third quartile of ``values`` (seconds)."""
    low, middle, high = statistics.quantiles(values, n=4, method="inclusive")
    return [round(low, 3), round(middle, 3), round(high, 3)]


def main() -> None:
    """Time every command, interleaved, and print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=21, help="rounds (runs per command)")
    parser.add_argument("--entry", default="dpcomm.cli.main", help="the console script's module")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rounds' orders")
    args = parser.parse_args()
    script = SCRIPT.format(entry=args.entry)
    commands = {name: [sys.executable, "-c", code] for name, code in FLOORS.items()}
    commands |= {name: [sys.executable, "-c", script, *argv] for name, argv in COMMANDS.items()}
    runs: dict[str, list[float]] = {name: [] for name in commands}
    order = list(commands)
    shuffle = random.Random(args.seed).shuffle
    for _ in range(args.repeat):
        shuffle(order)
        for name in order:
            runs[name].append(seconds_of(commands[name]))
    over = [
        account - version
        for account, version in zip(
            runs["dpcomm account scrambler ..."], runs["dpcomm --version"], strict=True
        )
    ]
    print(
        json.dumps(
            {
                "rounds": args.repeat,
                "entry": args.entry,
                "quartiles_seconds": {name: quartiles(times) for name, times in runs.items()},
                "best_seconds": {name: round(min(times), 3) for name, times in runs.items()},
                "account_over_version_quartiles": quartiles(over),
                "load_average": round(os.getloadavg()[0], 2),
                "python": platform.python_version(),
            },
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
