"""Benchmark: the audit of traffic and noisy release together, at more runs than the tests.

For each setting, the correct mechanism and each seeded fault (injected into the library code
a run calls, as the tests inject them: a sensitivity computed half as large, hence noise of half
the scale; the clamp skipped), one JSON line: the empirical lower bound on ε against the
reported composed ε, and the CPU and wall time of the audit. The release's noise is OpenDP's,
never seeded: lower bounds vary from run to run (``--repeat`` audits each setting several times).

Usage: python benchmarks/bench_release_audit.py [--runs N] [--repeat K]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import dpcomm
import dpcomm.queries.analyst
import dpcomm.queries.release
from dpcomm.experiments.release_audit import RELEASE_AUDIT_SQL, audit_release

SETTINGS: list[dict[str, Any]] = [
    {
        "name": "scramblers n=5 d=400 σ=0.1 T=3, Laplace ε2=2, SUM",
        "countermeasure": dpcomm.Scramblers(sampling_rate=0.1, batch_size=5, num_dummies=400),
        "release": dpcomm.Laplace(2.0),
        "sql": RELEASE_AUDIT_SQL,
    },
    {
        "name": "scramblers n=5 d=400 σ=0.1 T=3, Laplace ε2=2, COUNT and SUM",
        "countermeasure": dpcomm.Scramblers(sampling_rate=0.1, batch_size=5, num_dummies=400),
        "release": dpcomm.Laplace(2.0),
        "sql": "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY k",
    },
    {
        "name": "scramblers n=5 d=400 σ=0.1 T=3, Gaussian ε2=2 δ2=1e-6, SUM",
        "countermeasure": dpcomm.Scramblers(sampling_rate=0.1, batch_size=5, num_dummies=400),
        "release": dpcomm.Gaussian(2.0, 1e-6),
        "sql": RELEASE_AUDIT_SQL,
    },
    {
        "name": "local flooding σ=0.5 d=1 T=3, Laplace ε2=1, SUM",
        "countermeasure": dpcomm.LocalFlooding(sampling_rate=0.5, num_dummies=1),
        "release": dpcomm.Laplace(1.0),
        "sql": RELEASE_AUDIT_SQL,
    },
]


@contextlib.contextmanager
def seeded_fault(kind: str) -> Iterator[None]:
    """The fault ``kind`` injected into the library for the duration (as the tests do)."""
    if kind == "none":
        yield
        return
    if kind == "half-noise-scale":
        computed = dpcomm.queries.release.aggregate_sensitivity

        def halved(*args: Any, **kwargs: Any) -> Any:
            sensitivity = computed(*args, **kwargs)
            return dataclasses.replace(sensitivity, l1=sensitivity.l1 / 2, l2=sensitivity.l2 / 2)

        with mock.patch.object(dpcomm.queries.release, "aggregate_sensitivity", halved):
            yield
        return
    with mock.patch.object(
        dpcomm.queries.analyst,
        "clamped_sql",
        lambda column, low, high: f'CAST("{column}" AS DOUBLE)',
    ):
        yield


def main() -> None:
    """Audit every setting under every fault and print one JSON line each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40_000, help="runs per table")
    parser.add_argument("--repeat", type=int, default=1, help="audits per setting and fault")
    args = parser.parse_args()
    for setting in SETTINGS:
        for fault in ("none", "half-noise-scale", "unclamped"):
            bounds = []
            cpu = wall = 0.0
            for seed in range(args.repeat):
                start, clock = time.process_time(), time.perf_counter()
                with seeded_fault(fault):
                    report = audit_release(
                        setting["countermeasure"],
                        setting["release"],
                        sql=setting["sql"],
                        runs=args.runs,
                        rng=seed,
                    )
                cpu += time.process_time() - start
                wall += time.perf_counter() - clock
                bounds.append(report.lower_bound)
            print(
                json.dumps(
                    {
                        "setting": setting["name"],
                        "fault": fault,
                        "runs_per_table": args.runs,
                        "traffic_epsilon": round(report.traffic_epsilon, 4),
                        "release_epsilon": report.release_epsilon,
                        "reported_epsilon": round(report.reported_epsilon, 4),
                        "lower_bounds": [round(b, 3) for b in bounds],
                        "verdict": "PASS" if max(bounds) <= report.reported_epsilon else "FAIL",
                        "cpu_seconds_per_audit": round(cpu / args.repeat, 2),
                        "wall_seconds_per_audit": round(wall / args.repeat, 2),
                    },
                    ensure_ascii=False,
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
