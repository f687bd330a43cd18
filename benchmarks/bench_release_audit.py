"""Benchmark: the audit of traffic and noisy release together, at more runs than the tests.

For each setting, the correct mechanism and each seeded fault (injected into the library code
a run calls, as the tests inject them: a sensitivity computed half as large, hence noise of half
the scale; the clamp skipped; or the library's own, ``audit_release(fault=...)``), one JSON
line: the empirical lower bound on ε against the reported composed ε, and the CPU and wall
time of the audit. The release's noise is OpenDP's,
never seeded: lower bounds vary from run to run (``--repeat`` audits each setting several times).

``--default`` audits the audit's default configuration instead (T = 2, one scrambler of 2,000
sources, signed bounds; `dpcomm.experiments.release_audit.DEFAULT_COUNTERMEASURE`): the correct
mechanism and the library's seeded fault ``old-sensitivity`` (every view own-row: 2M for
signed bounds instead of M + W), at the default number of runs unless ``--runs`` is given.

Usage: python benchmarks/bench_release_audit.py [--runs N] [--repeat K] [--default]
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
import dpcomm.release.noise
from dpcomm.experiments.release_audit import (
    DEFAULT_RUNS,
    RELEASE_AUDIT_SQL,
    RELEASE_FAULT_KINDS,
    audit_release,
)

#: The small settings' traffic and bounds: T = 3, SUM's values in [0, 10], δ = 1e-4.
SMALL = {"num_targets": 3, "bounds": (0.0, 10.0), "delta": 1e-4}

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
    """The fault ``kind`` injected into the library for the duration (as the tests do).

    The library's own faults (`RELEASE_FAULT_KINDS`) are audit_release's ``fault=``.
    """
    if kind == "none" or kind in RELEASE_FAULT_KINDS:
        yield
        return
    if kind == "half-noise-scale":
        computed = dpcomm.release.noise.aggregate_sensitivity

        def halved(*args: Any, **kwargs: Any) -> Any:
            sensitivity = computed(*args, **kwargs)
            return dataclasses.replace(sensitivity, l1=sensitivity.l1 / 2, l2=sensitivity.l2 / 2)

        with mock.patch.object(dpcomm.release.noise, "aggregate_sensitivity", halved):
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
    parser.add_argument("--runs", type=int, help="runs per table (default 40,000)")
    parser.add_argument("--repeat", type=int, default=1, help="audits per setting and fault")
    parser.add_argument("--default", action="store_true", help="the default configuration")
    args = parser.parse_args()
    if args.default:
        settings: list[dict[str, Any]] = [{"name": "default configuration", "options": {}}]
        faults: tuple[str, ...] = ("none", *RELEASE_FAULT_KINDS)
        runs = DEFAULT_RUNS if args.runs is None else args.runs
    else:
        settings = [{**s, "options": SMALL} for s in SETTINGS]
        faults = ("none", "half-noise-scale", "unclamped")
        runs = 40_000 if args.runs is None else args.runs
    for setting in settings:
        for fault in faults:
            bounds = []
            chosen: list[str] = []
            cpu = wall = 0.0
            for seed in range(args.repeat):
                start, clock = time.process_time(), time.perf_counter()
                with seeded_fault(fault):
                    report = audit_release(
                        setting.get("countermeasure"),
                        setting.get("release"),
                        sql=setting.get("sql", RELEASE_AUDIT_SQL),
                        runs=runs,
                        fault=fault if fault in RELEASE_FAULT_KINDS else "none",
                        rng=seed,
                        **setting["options"],
                    )
                cpu += time.process_time() - start
                wall += time.perf_counter() - clock
                bounds.append(report.lower_bound)
                chosen.append(report.neighbours.pair.name)
            print(
                json.dumps(
                    {
                        "setting": setting["name"],
                        "fault": fault,
                        "runs_per_table": runs,
                        "traffic_epsilon": round(report.traffic_epsilon, 4),
                        "release_epsilon": report.release_epsilon,
                        "reported_epsilon": round(report.reported_epsilon, 4),
                        "lower_bounds": [round(b, 3) for b in bounds],
                        "pairs_chosen": chosen,
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
