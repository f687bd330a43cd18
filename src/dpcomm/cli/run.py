"""``dpcomm run aggregate|kmeans`` and ``dpcomm data synthetic``: parse, call, print."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dpcomm.cli.budget import add_budget_options, budget_from_options, print_charge
from dpcomm.cli.execute import (
    AGGREGATE_DEFAULTS,
    KMEANS_DEFAULTS,
    add_aggregate_options,
    add_countermeasure_options,
    add_data_seed_option,
    add_kmeans_options,
    add_output_options,
    execute_aggregate,
    execute_kmeans,
    output_paths,
    print_run,
    write_outputs,
)
from dpcomm.cli.output import bounded_int, check_writable_file, non_negative_int
from dpcomm.data import synthetic_table, write_table
from dpcomm.engine.engines import Engine, make_engine
from dpcomm.errors import InvalidParameterError
from dpcomm.validation import MAX_COUNT


def engine_of_options(args: argparse.Namespace) -> Engine:
    """The engine of the engine options (``--engine``, ``--scheduler``, ...)."""
    return make_engine(
        args.engine,
        scheduler=args.scheduler,
        connect_timeout=args.connect_timeout,
        partitions=args.partitions,
        workers=args.workers,
    )


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The engine options: ``--engine``, ``--scheduler``, ``--connect-timeout``, ..."""
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
        "--connect-timeout",
        type=float,
        metavar="SECONDS",
        help="with --engine dask: how long to wait for the scheduler to answer before the run "
        "fails in one line (default 10)",
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


def command_run(args: argparse.Namespace) -> int:
    """``dpcomm run aggregate|kmeans``."""
    out, report = output_paths(args)
    execute = execute_aggregate if args.kind == "aggregate" else execute_kmeans
    budget = budget_from_options(args)
    outcome, data = execute(args, engine_of_options(args), budget)
    print_run(args, outcome, data)
    print_charge(budget)
    write_outputs(outcome, out, report)
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
    use_cases = (
        (
            "aggregate",
            "an SQL GROUP BY (GROUPING SETS, ROLLUP, CUBE) query",
            "Run an Aggregate query decentralized: every row is a source node; each grouping "
            "set's domain is split among T compute nodes (--targets). Without --data or "
            "--synthetic the embedded diabetes table of the paper's running example is used "
            "(columns A, B, I).",
            add_aggregate_options,
            AGGREGATE_DEFAULTS,
        ),
        (
            "kmeans",
            "K-means on a table's numeric columns or on MNIST-format images",
            "Run K-means decentralized: every point (a row of --data, or a training image of "
            "--dataset) is a source; K compute nodes per iteration. Utility: the Rand index, "
            "adjusted Rand index and normalized mutual information of the clusters against "
            "the labels (--label-column, or the dataset's test set).",
            add_kmeans_options,
            KMEANS_DEFAULTS,
        ),
    )
    for name, summary, description, add_options, defaults in use_cases:
        use_case = kinds.add_parser(name, help=summary, description=description)
        add_options(use_case)
        is_aggregate = name == "aggregate"
        add_data_seed_option(use_case, aggregate=is_aggregate, kmeans=not is_aggregate)
        add_countermeasure_options(use_case, defaults)
        add_engine_options(use_case)
        add_budget_options(use_case)
        add_output_options(use_case)
        use_case.set_defaults(handler=command_run)

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
