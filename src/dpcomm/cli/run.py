"""``dpcomm run aggregate|kmeans`` and ``dpcomm data synthetic``: parse, call, print.

One command runs a use case on any engine (``--engine memory|dask|network``); the network
engine deploys the round on this machine, every node a process with its own certificate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpcomm.cli.budget import add_budget_options, budget_from_options, print_charge
from dpcomm.cli.options import (
    AGGREGATE_DEFAULTS,
    KMEANS_DEFAULTS,
    add_aggregate_options,
    add_countermeasure_options,
    add_data_seed_option,
    add_engine_options,
    add_kmeans_options,
    add_output_options,
)
from dpcomm.cli.output import check_writable_file, check_writable_folder, non_negative_int
from dpcomm.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpcomm.engine.engines import Engine


def engine_of_options(args: argparse.Namespace) -> Engine:
    """The engine of the engine options (``--engine``, ``--scheduler``, ``--timeout``, ...).

    The options of another engine are refused by `dpcomm.engine.engines.make_engine`, which
    names them.
    """
    from dpcomm.engine.engines import make_engine

    network = args.engine == "network"
    if not network and args.kill_scrambler is not None:
        raise InvalidParameterError(
            "kill_scrambler", "only with --engine network", args.kill_scrambler
        )
    if not network and args.force:
        raise InvalidParameterError("force", "only with --engine network", True)
    faults = None
    if network:
        from dpcomm.engine.network.deploy import Faults

        faults = Faults(kill_scrambler=args.kill_scrambler)
    return make_engine(
        args.engine,
        scheduler=args.scheduler,
        connect_timeout=args.connect_timeout,
        partitions=args.partitions,
        workers=args.workers,
        transport="tls" if network else None,
        timeout=args.timeout,
        idle_seconds=args.idle_seconds,
        workdir=args.workdir,
        faults=faults,
        max_left_out=args.max_left_out,
    )


def check_workdir(args: argparse.Namespace) -> None:
    """``--workdir`` must be writable; one holding a CA or keys is refused unless ``--force``.

    With ``--force`` the old certificates and keys of ``DIR/pki`` are removed (never through
    a symbolic link: the links themselves are removed) before the round certifies its nodes.
    """
    if args.workdir is None:
        return
    check_writable_folder("--workdir", args.workdir)
    pki = Path(args.workdir) / "pki"
    if pki.is_symlink() or (pki.exists() and not pki.is_dir()):
        raise InvalidParameterError(
            "--workdir", "a folder whose pki is a plain folder", args.workdir
        )
    old = sorted(p for p in pki.glob("*") if p.suffix in (".pem", ".key")) if pki.is_dir() else []
    if old and not args.force:
        raise InvalidParameterError(
            "--workdir",
            f"a folder without certificates or keys ({pki} holds {len(old)} such files; "
            "--force replaces them)",
            args.workdir,
        )
    for path in old:
        path.unlink()


def command_run(args: argparse.Namespace) -> int:
    """``dpcomm run aggregate|kmeans``, on the engine of ``--engine``.

    A deployed round (``--engine network``) also prints what was measured on the wire, and
    exits with status 1 when the round failed.
    """
    from dpcomm.cli.execute import (
        execute_aggregate,
        execute_kmeans,
        finish_deployment,
        output_paths,
        print_run,
        write_outputs,
    )

    out, report = output_paths(args)
    network = args.engine == "network"
    if network:
        check_workdir(args)
    # Charged before the run starts (refused: nothing runs, the ledger unchanged).
    budget = budget_from_options(args)
    engine = engine_of_options(args)
    execute = execute_aggregate if args.kind == "aggregate" else execute_kmeans
    outcome, data = execute(args, engine, budget)
    if network and args.kind == "aggregate":
        data = f"{data}; deployed on this machine (loopback, mutual TLS 1.3)"
    print_run(args, outcome, data)
    print_charge(budget)
    write_outputs(outcome, out, report)
    return finish_deployment(args, outcome.report) if network else 0


def command_data_synthetic(args: argparse.Namespace) -> int:
    """``dpcomm data synthetic``."""
    from dpcomm.data import synthetic_table, write_table

    out = check_writable_file("--out", args.out)
    if out.suffix.lower() not in (".csv", ".parquet"):
        raise InvalidParameterError("--out", "a .csv or .parquet file", args.out)
    table = synthetic_table(num_rows=args.rows, distribution=args.distribution, seed=args.seed)
    write_table(table, out)
    columns = ", ".join(f"{c.name} {c.sql_type}" for c in table.columns)
    print(f"wrote {table.num_rows:,} rows ({columns}) to {args.out}", file=sys.stderr)
    return 0


#: ``run``'s use cases: name, summary, description, their options, countermeasure defaults.
USE_CASES = (
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


def add_run_commands(commands: Any) -> None:
    """Register ``run`` and ``data`` on the top-level subparsers."""
    run = commands.add_parser(
        "run",
        help="run a use case (Aggregate SQL, K-means) with countermeasures in the simulator, "
        "on Dask or as a deployment on this machine",
    )
    kinds = run.add_subparsers(dest="kind", required=True)
    for name, summary, description, add_options, defaults in USE_CASES:
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
