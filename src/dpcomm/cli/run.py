"""``dpcomm run aggregate|kmeans`` and ``dpcomm data synthetic``: parse, call, print."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np

from dpcomm.data import (
    diabetes_table,
    load_image_dataset,
    read_table,
    synthetic_table,
    write_table,
)
from dpcomm.engine.report import AggregateRun, KMeansRun, run_aggregate, run_kmeans
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import make_countermeasure
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_COMPUTE_NODES, AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

#: Defaults of the countermeasure options, per use case (the paper's settings, Section 5).
AGGREGATE_DEFAULTS = {"sampling": 0.2, "batch": 100, "dummies": 50}
KMEANS_DEFAULTS = {"sampling": 0.9, "batch": 100, "dummies": 50}


def _countermeasure(args: argparse.Namespace, defaults: dict[str, float]) -> Countermeasure:
    """The countermeasure of the options; unset options take the use case's defaults."""
    if args.mechanism == "none":
        return make_countermeasure(
            "none",
            sampling_rate=0.0 if args.sampling is None else args.sampling,
            batch_size=args.batch,
            num_dummies=0 if args.dummies is None else args.dummies,
            capped=args.capped,
        )
    sampling = defaults["sampling"] if args.sampling is None else args.sampling
    if args.mechanism == "local":
        return make_countermeasure(
            "local",
            sampling_rate=sampling,
            batch_size=args.batch,
            num_dummies=0 if args.dummies is None else args.dummies,
            capped=args.capped,
        )
    return make_countermeasure(
        args.mechanism,
        sampling_rate=sampling,
        batch_size=int(defaults["batch"]) if args.batch is None else args.batch,
        num_dummies=int(defaults["dummies"]) if args.dummies is None else args.dummies,
        capped=args.capped,
    )


def add_countermeasure_options(parser: argparse.ArgumentParser, defaults: dict[str, float]) -> None:
    """The countermeasure options, named as in ``dpcomm account``."""
    group = parser.add_argument_group("countermeasure (every data-dependent cluster)")
    group.add_argument(
        "--mechanism",
        choices=["none", "local", "scrambler"],
        default="scrambler",
        help="none; local sampling + flooding (Section 3); scramblers (Section 4). "
        "Default: scrambler",
    )
    group.add_argument(
        "--sampling",
        type=float,
        help=f"σ, sampling rate in [0, 1] (default {defaults['sampling']}; 0 for none)",
    )
    group.add_argument(
        "--batch",
        type=int,
        help=f"n, sources per scrambler (scrambler only; default {int(defaults['batch'])})",
    )
    group.add_argument(
        "--dummies",
        type=int,
        help="d, dummies per scrambler (default "
        f"{int(defaults['dummies'])}) or flooding dummies per source (local; default 0)",
    )
    group.add_argument(
        "--capped", action="store_true", help="capped scramblers S̄_d (at most n per target)"
    )
    group.add_argument(
        "--delta",
        type=float,
        default=1e-4,
        help="δ of each data-dependent cluster (default 1e-4); the plan's δ is their sum",
    )
    group.add_argument(
        "--target-epsilon",
        type=float,
        metavar="E",
        help="warn when the plan's ε exceeds E (e.g. the table's size changed the batches)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="seed of every draw, for a reproducible run (default: fresh operating-system "
        "entropy; a seeded run is not private against whoever knows the seed)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--progress", action="store_true", help="show progress bars")


def _json_ready(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return _json_ready(value.tolist())
    if isinstance(value, np.generic):
        return _json_ready(value.item())
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}f}"
    return str(value)


def _print_rows(rows: list[dict[str, Any]], limit: int) -> None:
    if not rows:
        print("  (no rows)")
        return
    columns = list(rows[0])
    shown = rows[:limit]
    cells = [[_fmt(row[c]) for c in columns] for row in shown]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    if len(rows) > limit:
        print(f"  ... {len(rows) - limit} more rows (--rows N to show more, --json for all)")


def _epsilon(value: Any) -> str:
    return "inf" if value == "inf" else _fmt(value)


def _print_privacy(privacy: dict[str, Any]) -> None:
    print("Privacy (what an observer of all traffic learns):")
    print(
        f"  plan: ε = {_epsilon(privacy['epsilon'])}, δ = {privacy['delta']:.3g}  "
        f"(Theorem 2 along the worst data path; each cluster at δ = "
        f"{privacy['delta_per_cluster']:.3g})"
    )
    dependent = [c for c in privacy["clusters"] if c["data_dependent"]]
    independent = [c for c in privacy["clusters"] if not c["data_dependent"]]
    for cluster in dependent:
        parts = ", ".join(
            f"{p['instances']}×n={p['batch_size']}: ε={_epsilon(p['epsilon'])}"
            for p in cluster["parts"]
            if p["batch_size"] is not None
        )
        detail = f" [{parts}]" if parts and len(cluster["parts"]) > 1 else ""
        print(
            f"  cluster {cluster['cluster']}: T={cluster['num_targets']}, "
            f"{cluster['num_senders']:,} senders, {cluster['countermeasure']}: "
            f"ε = {_epsilon(cluster['epsilon'])} ({cluster['method']}){detail}"
        )
    if independent:
        print(f"  {len(independent)} data-independent clusters (compute -> result, ...): ε = 0")
    for caveat in privacy["caveats"]:
        print(f"  note: {caveat}")


def _print_efficiency(efficiency: dict[str, Any]) -> None:
    print("Efficiency (against the same plan without countermeasures):")
    print(
        f"  messages: {efficiency['messages']:,} vs {efficiency['messages_nonprivate']:,} "
        f"(×{efficiency['message_overhead']:.2f}; {efficiency['dummy_messages']:,} dummies); "
        f"bytes: {efficiency['bytes']:,} ({efficiency['frame_bytes']} B frames)"
    )
    print(
        f"  secure channels per node: max {efficiency['max_channels_per_node']:,}, "
        f"mean {efficiency['mean_channels_per_node']:.2f} "
        f"(non-private: max {efficiency['max_channels_per_node_nonprivate']:,}, "
        f"mean {efficiency['mean_channels_per_node_nonprivate']:.2f})"
    )
    roles = ", ".join(f"{k} {v:,}" for k, v in efficiency["max_channels_by_role"].items())
    print(f"  max channels by role: {roles}")
    batches = "; ".join(
        f"{flow}: {'/'.join(str(s) for s in sizes)}"
        for flow, sizes in efficiency["batch_sizes"].items()
    )
    print(
        f"  scramblers: {efficiency['num_scramblers']:,}"
        + (f" (sources per scrambler: {batches})" if batches else "")
        + f"; extra consents to keep the non-private utility: {efficiency['extra_consents']:,}"
    )
    print(
        f"  {efficiency['engine']} engine: {efficiency['seconds']:.2f} s "
        f"({efficiency['messages_per_second']:,.0f} messages/s)"
    )


def _print_seed(report: dict[str, Any]) -> None:
    seed = report["seed"]
    if seed is None:
        print("Randomness: fresh operating-system entropy (no seed)")
    else:
        print(f"Randomness: seed {seed} (reproducible; not private against whoever knows it)")


def print_aggregate(outcome: AggregateRun, source: str, rows: int) -> None:
    """The text report of an Aggregate run (any engine)."""
    report = outcome.report
    print(f"{outcome.program.name}; data: {source}; engine: {report['engine']}")
    print(f"Countermeasure: {report['countermeasure']}")
    _print_seed(report)
    print()
    print(f"Result ({len(outcome.result)} rows, from the tuples that reached their compute node):")
    _print_rows(outcome.result, rows)
    print()
    _print_privacy(report["privacy"])
    print()
    utility = report["utility"]
    print("Utility:")
    for item in utility["grouping_sets"]:
        print(
            f"  {item['grouping_set']}: {item['tuples_used']:,} of {utility['sources']:,} tuples "
            f"used ({item['tuples_used_fraction']:.1%}); {item['groups_missing']} of "
            f"{item['groups']} groups missing"
        )
    for column, error in utility["mean_relative_error"].items():
        print(
            f"  {column}: mean relative error {error:.4f} "
            f"(max {utility['max_relative_error'][column]:.4f}) against the non-private result"
        )
    print()
    _print_efficiency(report["efficiency"])


def print_kmeans(outcome: KMeansRun, dataset: str) -> None:
    """The text report of a K-means run (any engine)."""
    report = outcome.report
    utility = report["utility"]
    print(
        f"{outcome.program.name} on {dataset}: {utility['sources']:,} sources, "
        f"{utility['test_points']:,} test points; engine: {report['engine']}"
    )
    print(f"Countermeasure: {report['countermeasure']}")
    _print_seed(report)
    print()
    print(
        f"Rand index on the test set: {outcome.rand_index:.4f} "
        f"(non-private K-means from the same start: {outcome.rand_index_nonprivate:.4f})"
    )
    used = ", ".join(f"{u:,}" for u in utility["tuples_used_per_iteration"])
    print(f"Tuples used per iteration: {used} ({utility['tuples_used_fraction']:.1%} on average)")
    print()
    _print_privacy(report["privacy"])
    print()
    _print_efficiency(report["efficiency"])


def json_document(result: Any, report: dict[str, Any]) -> str:
    """The one JSON shape of every run: ``{"result": ..., "report": ...}``."""
    return json.dumps(_json_ready({"result": result, "report": report}), indent=2)


def aggregate_program(args: argparse.Namespace) -> tuple[AggregateProgram, str]:
    """The Aggregate program of ``--sql`` over ``--data``, ``--synthetic`` or the diabetes table."""
    if args.data is not None:
        table = read_table(args.data)
        source = args.data
    elif args.synthetic is not None:
        table = synthetic_table(
            num_rows=args.synthetic, distribution=args.distribution, seed=args.data_seed
        )
        source = f"synthetic ({args.synthetic:,} rows, {args.distribution})"
    else:
        table = diabetes_table()
        source = "embedded diabetes table (synthetic patients)"
    program = AggregateProgram.from_sql(args.sql, table, num_compute_nodes=args.compute_nodes)
    return program, source


def command_run_aggregate(args: argparse.Namespace) -> int:
    """``dpcomm run aggregate``."""
    countermeasure = _countermeasure(args, AGGREGATE_DEFAULTS)
    program, source = aggregate_program(args)
    outcome = run_aggregate(
        program,
        countermeasure,
        delta=args.delta,
        seed=args.seed,
        progress=args.progress,
        target_epsilon=args.target_epsilon,
    )
    if args.json:
        print(json_document(outcome.result, outcome.report))
        return 0
    print_aggregate(outcome, source, args.rows)
    return 0


def command_run_kmeans(args: argparse.Namespace) -> int:
    """``dpcomm run kmeans``."""
    countermeasure = _countermeasure(args, KMEANS_DEFAULTS)
    dataset = load_image_dataset(args.dataset)
    points = dataset.train_images
    if args.sources is not None:
        if args.sources < 1:
            raise InvalidParameterError("--sources", "an integer >= 1", args.sources)
        points = points[: args.sources]
    program = KMeansProgram(points, args.k, args.iterations, seed=args.data_seed)
    outcome = run_kmeans(
        program,
        countermeasure,
        test_points=dataset.test_images,
        test_labels=dataset.test_labels,
        delta=args.delta,
        seed=args.seed,
        progress=args.progress,
        target_epsilon=args.target_epsilon,
    )
    if args.json:
        print(json_document({"centroids": outcome.centroids}, outcome.report))
        return 0
    print_kmeans(outcome, dataset.name)
    return 0


def command_data_synthetic(args: argparse.Namespace) -> int:
    """``dpcomm data synthetic``."""
    table = synthetic_table(num_rows=args.rows, distribution=args.distribution, seed=args.seed)
    write_table(table, args.out)
    columns = ", ".join(f"{c.name} {c.sql_type}" for c in table.columns)
    print(f"wrote {table.num_rows:,} rows ({columns}) to {args.out}", file=sys.stderr)
    return 0


def add_run_commands(commands: Any) -> None:
    """Register ``run`` and ``data`` on the top-level subparsers."""
    run = commands.add_parser(
        "run",
        help="run a use case (Aggregate SQL, K-means) with countermeasures in the simulator",
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
        type=int,
        default=DEFAULT_COMPUTE_NODES,
        help=f"C, compute nodes per grouping set (default {DEFAULT_COMPUTE_NODES})",
    )
    aggregate.add_argument("--rows", type=int, default=20, help="result rows to print")
    aggregate.add_argument(
        "--data-seed", type=int, default=0, help="seed of the --synthetic table (default 0)"
    )
    add_countermeasure_options(aggregate, AGGREGATE_DEFAULTS)
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
    kmeans.add_argument("--k", type=int, default=10, help="K, number of centroids (default 10)")
    kmeans.add_argument(
        "--iterations", type=int, default=10, help="I, number of iterations (default 10)"
    )
    kmeans.add_argument(
        "--sources",
        type=int,
        help="sources: the first N training points (default: all of them)",
    )
    kmeans.add_argument(
        "--data-seed",
        type=int,
        default=0,
        help="seed of the choice of the initial centroids among the points (default 0)",
    )
    add_countermeasure_options(kmeans, KMEANS_DEFAULTS)
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
    synthetic.add_argument("--seed", type=int, default=0)
    synthetic.set_defaults(handler=command_data_synthetic)
