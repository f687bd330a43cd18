"""``dpcomm run aggregate|kmeans`` and ``dpcomm data synthetic``: parse, call, print."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcomm.cli.execute import (
    add_countermeasure_options,
    add_public_bounds_options,
    execute_aggregate,
    execute_kmeans,
    print_run,
)
from dpcomm.cli.output import MAX_COUNT, bounded_int, check_writable_file, non_negative_int
from dpcomm.data import synthetic_table, write_table
from dpcomm.engine.engines import Engine, MemoryEngine
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import DEFAULT_COMPUTE_NODES

#: Defaults of the countermeasure options, per use case (the paper's settings, Section 5).
AGGREGATE_DEFAULTS = {"sampling": 0.2, "batch": 100, "dummies": 50}
KMEANS_DEFAULTS = {"sampling": 0.9, "batch": 100, "dummies": 50}


def engine_of_options(args: argparse.Namespace, rows: Any = None) -> Engine:
    """The engine of ``--engine``, ``--scheduler``, ``--partitions`` and ``--workers``.

    ``rows``: the row source the Dask engine's workers read (Parquet, synthetic), or None.
    """
    if args.engine == "memory":
        for option, value in (
            ("--scheduler", args.scheduler),
            ("--partitions", args.partitions),
            ("--workers", args.workers),
        ):
            if value is not None:
                raise InvalidParameterError(option, "only with --engine dask", "--engine memory")
        return MemoryEngine()
    from dpcomm.engine.dask_engine import DaskEngine

    if args.scheduler is not None and args.workers is not None:
        raise InvalidParameterError(
            "--workers", "no --workers with --scheduler (the cluster has its own)", args.workers
        )
    return DaskEngine(
        scheduler=args.scheduler, partitions=args.partitions, workers=args.workers, rows=rows
    )


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--out`` and ``--report``."""
    group = parser.add_argument_group("output files")
    group.add_argument(
        "--out",
        metavar="FILE.csv|FILE.parquet",
        help="write the result (Aggregate: the result rows with DuckDB's column names; "
        "K-means: the centroids, and each source's centroid to FILE-assignments.csv|.parquet)",
    )
    group.add_argument(
        "--report", metavar="FILE.json", help="write the run's report (as --json prints it)"
    )


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine {memory,dask}``, ``--scheduler``, ``--partitions``, ``--workers``."""
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--engine",
        choices=["memory", "dask"],
        default="memory",
        help="memory: the vectorized simulator (default); dask: the roles of every partition "
        "of sources as Dask tasks on a distributed cluster (Parquet --data and --synthetic "
        "rows are read by the workers), the same run with the same --seed",
    )
    group.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="with --engine dask: the address of a running Dask scheduler, started with "
        "`dask scheduler` (default: $DASK_SCHEDULER_ADDRESS, else a LocalCluster started for "
        "the run and closed after)",
    )
    group.add_argument(
        "--partitions",
        type=bounded_int(1, MAX_COUNT),
        help="with --engine dask: partitions of the sources, each of whole scramblers "
        "(default: one per 500,000 sources, at least one per worker); the run does not "
        "depend on it",
    )
    group.add_argument(
        "--workers",
        type=bounded_int(1, 256),
        help="with --engine dask and no --scheduler: workers of the LocalCluster (default: "
        "one per core)",
    )


def _output_paths(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """``--out`` (.csv or .parquet) and ``--report`` (.json), checked before the run."""
    out = report = None
    if args.out is not None:
        out = check_writable_file("--out", args.out)
        if out.suffix.lower() not in (".csv", ".parquet"):
            raise InvalidParameterError("--out", "a .csv or .parquet file", args.out)
    if args.report is not None:
        report = check_writable_file("--report", args.report)
        if report.suffix.lower() != ".json":
            raise InvalidParameterError("--report", "a .json file", args.report)
    return out, report


def _write_rows(columns: list[str], rows: list[dict[str, Any]], path: Path) -> None:
    """``rows`` as a CSV or Parquet file, written by DuckDB (types from the values)."""
    import duckdb
    import pyarrow as pa

    if rows:
        table = pa.Table.from_pylist(rows)
    else:
        table = pa.table({name: pa.array([], type=pa.null()) for name in columns})
    relation = duckdb.from_arrow(table)
    if path.suffix.lower() == ".csv":
        relation.write_csv(str(path))
    else:
        relation.write_parquet(str(path))


def _write_outputs(outcome: Any, out: Path | None, report: Path | None, columns: list[str]) -> None:
    """The result (``--out``) and the report (``--report``) of a run, if asked for."""
    if out is not None:
        if columns:
            _write_rows(columns, outcome.rows, out)
            print(f"wrote {len(outcome.rows):,} result rows to {out}", file=sys.stderr)
        else:
            centroids = outcome.centroids
            names = [f"c{i}" for i in range(centroids.shape[1])]
            rows = [
                {"centroid": k, **dict(zip(names, map(float, row), strict=True))}
                for k, row in enumerate(centroids)
            ]
            _write_rows(["centroid", *names], rows, out)
            assigned = out.with_name(f"{out.stem}-assignments{out.suffix}")
            _write_rows(
                ["source", "centroid"],
                [{"source": i, "centroid": int(c)} for i, c in enumerate(outcome.assignments)],
                assigned,
            )
            print(
                f"wrote {len(rows)} centroids to {out} and each source's centroid to {assigned}",
                file=sys.stderr,
            )
    if report is not None:
        report.write_text(json.dumps(outcome.report.to_dict(), indent=2) + "\n")
        print(f"wrote the report to {report}", file=sys.stderr)


def command_run_aggregate(args: argparse.Namespace) -> int:
    """``dpcomm run aggregate``."""
    out, report = _output_paths(args)
    outcome, source = execute_aggregate(args, AGGREGATE_DEFAULTS, engine_of_options)
    if args.estimate == "unbiased":
        outcome = outcome.with_unbiased_estimate()
    print_run(args, outcome, source)
    _write_outputs(outcome, out, report, list(outcome.program.query.output_names))
    return 0


def command_run_kmeans(args: argparse.Namespace) -> int:
    """``dpcomm run kmeans``."""
    out, report = _output_paths(args)
    outcome, dataset = execute_kmeans(args, KMEANS_DEFAULTS, engine_of_options)
    print_run(args, outcome, dataset)
    _write_outputs(outcome, out, report, [])
    return 0


def command_data_synthetic(args: argparse.Namespace) -> int:
    """``dpcomm data synthetic``."""
    out = check_writable_file("--out", args.out)
    if out.suffix.lower() not in (".csv", ".parquet"):
        raise InvalidParameterError("--out", "a .csv or .parquet file", args.out)
    table = synthetic_table(num_rows=args.rows, distribution=args.distribution, seed=args.seed)
    write_table(table, out)
    columns = ", ".join(f"{c.name} {c.sql_type}" for c in table.columns)
    print(f"wrote {table.num_rows:,} rows ({columns}) to {args.out}", file=sys.stderr)
    return 0


def add_run_commands(commands: Any) -> None:
    """Register ``run`` and ``data`` on the top-level subparsers."""
    run = commands.add_parser(
        "run",
        help="run a use case (Aggregate SQL, K-means) with countermeasures in the simulator "
        "or on Dask",
    )
    kinds = run.add_subparsers(dest="kind", required=True)
    aggregate = kinds.add_parser(
        "aggregate",
        help="an SQL GROUP BY (GROUPING SETS, ROLLUP, CUBE) query",
        description=(
            "Run an Aggregate query decentralized: every row is a source node; each grouping "
            "set's domain is split among C compute nodes. Without --data or --synthetic the "
            "embedded diabetes table of the paper's running example is used (columns A, B, I)."
        ),
    )
    aggregate.add_argument("--sql", required=True, help="SELECT ... FROM t GROUP BY ...")
    source = aggregate.add_mutually_exclusive_group()
    source.add_argument("--data", help="a CSV or Parquet file; the FROM table is bound to it")
    source.add_argument("--synthetic", type=int, metavar="ROWS", help="synthetic table of ROWS")
    aggregate.add_argument(
        "--distribution",
        choices=["uniform", "zipf"],
        default="uniform",
        help="distribution of the synthetic grouping columns g1..g4",
    )
    aggregate.add_argument(
        "--compute-nodes",
        type=bounded_int(None, MAX_COUNT),
        default=DEFAULT_COMPUTE_NODES,
        help=f"C, compute nodes per grouping set (default {DEFAULT_COMPUTE_NODES})",
    )
    aggregate.add_argument(
        "--rows", type=non_negative_int, default=20, help="result rows to print (default 20)"
    )
    add_public_bounds_options(aggregate)
    aggregate.add_argument(
        "--data-seed",
        type=non_negative_int,
        default=0,
        help="seed of the --synthetic table (default 0)",
    )
    add_countermeasure_options(aggregate, AGGREGATE_DEFAULTS)
    add_engine_options(aggregate)
    add_output_options(aggregate)
    aggregate.add_argument(
        "--estimate",
        choices=["delivered", "unbiased"],
        default="delivered",
        help="delivered: the values over the tuples that arrived (default); unbiased: COUNT "
        "and SUM divided by the known probability P = 1 − σ + σ/T that a tuple arrives "
        "(labelled as estimates; AVG, MIN, MAX unchanged)",
    )
    aggregate.set_defaults(handler=command_run_aggregate)

    kmeans = kinds.add_parser(
        "kmeans",
        help="K-means on MNIST-format images",
        description=(
            "Run K-means decentralized: every training image is a source; K compute nodes per "
            "iteration. Utility is the Rand index on the test set."
        ),
    )
    kmeans.add_argument(
        "--dataset",
        default="mnist5k",
        help="mnist5k (embedded, 5,000 digits), fashion-mnist (make data), or a directory "
        "of MNIST-format IDX files",
    )
    kmeans.add_argument(
        "--k",
        type=bounded_int(None, MAX_COUNT),
        default=10,
        help="K, number of centroids (default 10)",
    )
    kmeans.add_argument(
        "--iterations",
        type=bounded_int(None, MAX_COUNT),
        default=10,
        help="I, number of iterations (default 10)",
    )
    kmeans.add_argument(
        "--sources",
        type=int,
        help="sources: the first N training points (default: all of them)",
    )
    kmeans.add_argument(
        "--data-seed",
        type=non_negative_int,
        default=0,
        help="seed of the choice of the initial centroids among the points (default 0)",
    )
    add_countermeasure_options(kmeans, KMEANS_DEFAULTS)
    add_engine_options(kmeans)
    add_output_options(kmeans)
    kmeans.set_defaults(handler=command_run_kmeans)

    data = commands.add_parser("data", help="datasets")
    data_kinds = data.add_subparsers(dest="kind", required=True)
    synthetic = data_kinds.add_parser(
        "synthetic",
        help="write a synthetic Aggregate table (g1..g4 grouping codes, m1, m2 measures)",
    )
    synthetic.add_argument("--rows", type=int, required=True, help="number of rows")
    synthetic.add_argument("--out", required=True, help="FILE.csv or FILE.parquet")
    synthetic.add_argument("--distribution", choices=["uniform", "zipf"], default="uniform")
    synthetic.add_argument("--seed", type=non_negative_int, default=0)
    synthetic.set_defaults(handler=command_data_synthetic)
