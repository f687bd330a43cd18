"""Benchmark: `dpcomm run --engine network` at scale (10,000 sources, default deadlines).

Runs the command as a user would (``dpcomm run aggregate --engine network --diabetes --json
--targets 5 --dummies 10``: the embedded 10,000-row table, the default mechanism and deadlines,
and the T = 5, d = 10 that ``deploy local``, the command before it, defaulted to when these
numbers were first measured; the defaults are now ``run``'s, T = 20 and d = 50) in a
subprocess, samples the resident memory of the whole process tree (the launcher and every
worker) every 0.1 s from /proc, and reports the wall time, the peak total memory, the exit
status and how many sources were left out.

Usage: python benchmarks/bench_deploy_scale.py [--sources N] [--repeat R] [--sql Q] [--json]
(other than 10,000 sources, it runs ``--synthetic N`` with one grouping set instead.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

SQL = "SELECT A, COUNT(*), AVG(I) FROM t GROUP BY A"
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        rss[pid] = int(fields[21]) * PAGE
    tree, frontier = {root}, {root}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    return sum(rss.get(p, 0) for p in tree)


def run_once(sources: int, sql: str = SQL) -> dict[str, object]:
    """One deployment; its wall time, peak memory and outcome."""
    command = [sys.executable, "-m", "dpcomm.cli.main", "run", "aggregate", "--engine", "network"]
    command += ["--json"]
    command += ["--targets", "5", "--dummies", "10"]  # the configuration measured in the docs
    if sources == 10_000:
        command += ["--diabetes", "--sql", sql]
    else:
        command += ["--synthetic", str(sources), "--sql", "SELECT g1, COUNT(*) FROM t GROUP BY g1"]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(process.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    result: dict[str, object] = {
        "sources": sources,
        "exit_status": process.returncode,
        "wall_seconds": round(wall, 1),
        "peak_memory_mb": round(peak / 2**20),
        "stderr": stderr.strip()[-300:],
    }
    try:
        report = json.loads(stdout)["report"]
    except (ValueError, KeyError):
        return result
    left = {flow: len(rows) for flow, rows in report["left_out_sources"].items()}
    result.update(
        left_out=left,
        failures=report.get("failures", []),
        timings={k: round(v, 1) for k, v in report["wire"]["timings"].items()},
        frames=report["wire"]["frames"],
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--sql", default=SQL, help=f"the query (default: {SQL})")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [run_once(args.sources, args.sql) for _ in range(args.repeat)]
    document = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "runs": runs,
    }
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(document["machine"])
    for run in runs:
        print(
            f"{run['sources']:,} sources: exit {run['exit_status']}, {run['wall_seconds']} s, "
            f"peak {run['peak_memory_mb']} MB, left out {run.get('left_out')}, "
            f"timings {run.get('timings')}"
        )
        if run["exit_status"]:
            print(f"  {run['stderr']}")


if __name__ == "__main__":
    main()
