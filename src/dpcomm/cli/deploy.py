"""``dpcomm deploy local|configs`` and ``dpcomm node run``: parse, call, print."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcomm.cli.run import (
    _countermeasure,
    _json_ready,
    _print_privacy,
    _print_rows,
    add_countermeasure_options,
)
from dpcomm.data import diabetes_table, load_image_dataset, read_table, synthetic_table
from dpcomm.engine.network.deploy import DeploymentReport, deploy_local, write_deployment
from dpcomm.engine.network.deploy_kmeans import deploy_local_kmeans
from dpcomm.engine.network.pki import NodeCredentials
from dpcomm.engine.network.runtime import run_node_group
from dpcomm.engine.network.runtime_spec import ROLES, DeploymentError, NodeConfig
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

DEFAULT_SYNTHETIC_ROWS = 1000
DEFAULT_COMPUTE_NODES = 5
DEPLOY_DEFAULTS = {"sampling": 0.2, "batch": 100, "dummies": 10}
KMEANS_DEPLOY_DEFAULTS = {"sampling": 0.9, "batch": 100, "dummies": 10}
DEFAULT_KMEANS_SOURCES = 500


def _program(args: argparse.Namespace) -> tuple[AggregateProgram, str]:
    if args.data is not None:
        table, source = read_table(args.data), args.data
    elif args.diabetes:
        table, source = diabetes_table(), "embedded diabetes table (synthetic patients)"
    else:
        rows = args.synthetic or DEFAULT_SYNTHETIC_ROWS
        table = synthetic_table(num_rows=rows, distribution=args.distribution, seed=args.seed)
        source = f"synthetic ({rows:,} rows, {args.distribution})"
    program = AggregateProgram.from_sql(args.sql, table, num_compute_nodes=args.compute_nodes)
    return program, source


def _print_wire(report: DeploymentReport) -> None:
    wire = report.wire_summary()
    simulated = report.simulated
    print("Measured on the wire (TLS application bytes written, every frame the same length):")
    print(
        f"  frames: {wire['frames']:,} ({wire['data_frames']:,} sealed data frames, "
        f"{wire['control_frames']:,} control frames); bytes: {wire['bytes']:,}; "
        f"frame size {wire['frame_size']} B; lengths observed: {wire['frame_lengths_observed']}"
    )
    print(
        f"  simulator for the same plan: {simulated['data_messages']:,} data messages "
        f"({simulated['messages']:,} with compute -> result), "
        f"{simulated['bytes_at_deployed_frame_size']:,} bytes at {wire['frame_size']} B"
    )
    roles = ", ".join(f"{k} {v:,}" for k, v in wire["max_data_channels_by_role"].items())
    print(
        f"  channels per node (data plane): max {wire['max_data_channels_per_node']:,}, mean "
        f"{wire['mean_data_channels_per_node']:.2f}; by role: {roles}; with the coordinator's "
        f"control channels: max {wire['max_channels_per_node']:,}"
    )
    busiest = sorted(report.links, key=lambda link: -link.data_frames)[:5]
    for link in busiest:
        print(
            f"  link {link.sender} -> {link.receiver}: {link.data_frames} data frames, "
            f"{link.frames} frames, {link.bytes:,} bytes"
        )
    print(f"  lost scramblers: {', '.join(report.lost_scramblers) or 'none'}")
    left = {flow: len(rows) for flow, rows in report.left_out_sources.items() if rows}
    print(f"  sources left out (deadline): {left or 'none'}")
    print(f"  dropped frames/connections: {report.dropped or 'none'}")
    timings = ", ".join(
        f"{k.removesuffix('_seconds')} {v:.2f} s" for k, v in report.timings.items()
    )
    print(f"  timings: {timings}")


def command_deploy_local_kmeans(args: argparse.Namespace) -> int:
    """``dpcomm deploy local kmeans``."""
    countermeasure = _countermeasure(args, KMEANS_DEPLOY_DEFAULTS)
    dataset = load_image_dataset(args.dataset)
    if args.sources < 1:
        raise InvalidParameterError("--sources", "an integer >= 1", args.sources)
    points = dataset.train_images[: args.sources]
    program = KMeansProgram(points, args.k, args.iterations, seed=args.seed)
    report = deploy_local_kmeans(
        program,
        countermeasure,
        test_points=dataset.test_images,
        test_labels=dataset.test_labels,
        delta=args.delta,
        seed=args.seed,
        workdir=args.workdir,
        timeout=args.timeout,
        collect_seconds=args.collect_seconds,
    )
    if args.json:
        document = {
            **report.summary(),
            "centroids": report.centroids.tolist(),
            "links": [vars(link) for link in report.links],
            "channels": report.channels,
        }
        print(json.dumps(_json_ready(document), indent=2))
        return 0 if not report.errors else 1
    print(
        f"{program.name} on {dataset.name}: {len(points):,} sources (the first training "
        f"points), {len(dataset.test_images):,} test points; deployed on this machine "
        "(loopback, mutual TLS 1.3)"
    )
    print(f"Countermeasure: {countermeasure.describe()}; seed {args.seed}")
    print()
    print(
        f"Rand index on the test set: {report.rand_index:.4f} deployed; simulator: "
        f"{report.rand_index_simulated:.4f} with the countermeasure, "
        f"{report.rand_index_nonprivate:.4f} non-private from the same start"
    )
    for iteration, used in enumerate(report.tuples_used_per_iteration, start=1):
        counts = ", ".join(str(c) for c in report.counts[iteration - 1])
        simulated = report.tuples_used_simulated[iteration - 1]
        print(
            f"  iteration {iteration}: {used:,} of {len(points):,} points used "
            f"(per compute node: {counts}; simulator: {simulated:,})"
        )
    print()
    _print_privacy(report.privacy)
    print()
    _print_wire(report.deployment)
    for node, message in report.errors.items():
        print(f"dpcomm: node {node} failed: {message}", file=sys.stderr)
    return 0 if not report.errors else 1


def command_deploy_local(args: argparse.Namespace) -> int:
    """``dpcomm deploy local [aggregate|kmeans]``."""
    if args.workload == "kmeans":
        return command_deploy_local_kmeans(args)
    if args.sql is None:
        raise InvalidParameterError("--sql", "a query (required for an Aggregate deployment)", None)
    countermeasure = _countermeasure(args, DEPLOY_DEFAULTS)
    program, source = _program(args)
    report = deploy_local(
        program,
        countermeasure,
        delta=args.delta,
        seed=args.seed,
        workdir=args.workdir,
        timeout=args.timeout,
        collect_seconds=args.collect_seconds,
        kill_scrambler=args.kill_scrambler,
    )
    if args.json:
        document = {
            "result": report.result,
            "privacy": report.privacy,
            "wire": report.wire_summary(),
            "simulated": report.simulated,
            "delivered": {flow: len(rows) for flow, rows in report.delivered.items()},
            "lost_scramblers": list(report.lost_scramblers),
            "left_out_sources": report.left_out_sources,
            "dropped": report.dropped,
            "timings": report.timings,
            "links": [vars(link) for link in report.links],
            "channels": report.channels,
            "errors": report.errors,
        }
        print(json.dumps(_json_ready(document), indent=2))
        return 0 if not report.errors else 1
    print(f"{program.name}; data: {source}; deployed on this machine (loopback, mutual TLS 1.3)")
    print(f"Countermeasure: {countermeasure.describe()}; seed {args.seed}")
    print()
    print(f"Result ({len(report.result)} rows, from the tuples that reached their compute node):")
    _print_rows(report.result, args.rows)
    for flow, rows in report.delivered.items():
        print(f"  {flow}: {len(rows):,} of {program.table.num_rows:,} tuples used")
    print()
    _print_privacy(report.privacy)
    print()
    _print_wire(report)
    for node, message in report.errors.items():
        print(f"dpcomm: node {node} failed: {message}", file=sys.stderr)
    return 0 if not report.errors else 1


def command_deploy_configs(args: argparse.Namespace) -> int:
    """``dpcomm deploy configs``."""
    countermeasure = _countermeasure(args, DEPLOY_DEFAULTS)
    program, _ = _program(args)
    paths = write_deployment(
        program,
        countermeasure,
        args.out,
        seed=args.seed,
        coordinator_host=args.coordinator_host,
        coordinator_port=args.coordinator_port,
        collect_seconds=args.collect_seconds,
        timeout=args.timeout,
    )
    print(
        f"wrote {len(paths):,} node configs to {Path(args.out) / 'configs'} and certificates "
        f"to {Path(args.out) / 'pki'}",
        file=sys.stderr,
    )
    return 0


def command_node_run(args: argparse.Namespace) -> int:
    """``dpcomm node run``."""
    config = NodeConfig.load(args.config)
    if config.role != args.role:
        raise DeploymentError(f"config {args.config} is for a {config.role}, not a {args.role}")
    credentials = NodeCredentials(
        name=config.name,
        cert_path=Path(args.ssl_certfile),
        key_path=Path(args.ssl_keyfile),
        ca_path=Path(args.ssl_ca_certfile),
    )
    outcome: dict[str, Any] = run_node_group([config], {config.name: credentials})
    text = json.dumps(_json_ready(outcome), indent=2)
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text)
    return 0 if not outcome["errors"] else 1


def _aggregate_options(parser: argparse.ArgumentParser, *, sql_required: bool = True) -> None:
    parser.add_argument(
        "--sql", required=sql_required, help="SELECT ... FROM t GROUP BY ... (Aggregate)"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", help="a CSV or Parquet file; the FROM table is bound to it")
    source.add_argument(
        "--synthetic",
        type=int,
        metavar="ROWS",
        help=f"synthetic table of ROWS (default {DEFAULT_SYNTHETIC_ROWS})",
    )
    source.add_argument("--diabetes", action="store_true", help="the embedded diabetes table")
    parser.add_argument("--distribution", choices=["uniform", "zipf"], default="uniform")
    parser.add_argument(
        "--compute-nodes",
        type=int,
        default=DEFAULT_COMPUTE_NODES,
        help=f"C, compute nodes per grouping set (default {DEFAULT_COMPUTE_NODES})",
    )
    parser.add_argument(
        "--collect-seconds",
        type=float,
        default=20.0,
        help="how long a scrambler waits for its n sources (default 20)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="hard deadline of the round (default 120 s)"
    )
    add_countermeasure_options(parser, DEPLOY_DEFAULTS)


def add_deploy_commands(commands: Any) -> None:
    """Register ``deploy`` and ``node`` on the top-level subparsers."""
    deploy = commands.add_parser(
        "deploy", help="run a round as a real deployment (processes, mutual TLS 1.3)"
    )
    kinds = deploy.add_subparsers(dest="kind", required=True)
    local = kinds.add_parser(
        "local",
        help="a whole Aggregate (or K-means) deployment on this machine (processes, loopback)",
        description=(
            "Start the coordinator, result, compute nodes, scramblers and sources as separate "
            "processes on 127.0.0.1, each node with its own certificate, run one Aggregate "
            "round and print the result, the privacy report of the plan and what was measured "
            "on the wire. `deploy local kmeans` runs K-means instead (I iterations, scramblers; "
            "countermeasure defaults σ 0.9, n 100, d 10) and prints the Rand index beside the "
            "simulator's."
        ),
    )
    local.add_argument(
        "workload",
        nargs="?",
        choices=["aggregate", "kmeans"],
        default="aggregate",
        help="aggregate (default; needs --sql) or kmeans",
    )
    _aggregate_options(local, sql_required=False)
    kmeans = local.add_argument_group("K-means (deploy local kmeans)")
    kmeans.add_argument("--dataset", default="mnist5k", help="image dataset (default mnist5k)")
    kmeans.add_argument("--k", type=int, default=4, help="K, centroids (default 4)")
    kmeans.add_argument("--iterations", type=int, default=2, help="I, iterations (default 2)")
    kmeans.add_argument(
        "--sources",
        type=int,
        default=DEFAULT_KMEANS_SOURCES,
        help=f"sources: the first N training points (default {DEFAULT_KMEANS_SOURCES})",
    )
    local.add_argument("--rows", type=int, default=20, help="result rows to print")
    local.add_argument("--workdir", help="keep certificates here (default: temporary)")
    local.add_argument(
        "--kill-scrambler",
        type=int,
        metavar="K",
        help="fault injection: scrambler K (global index) dies mid-forward",
    )
    local.set_defaults(handler=command_deploy_local)
    configs = kinds.add_parser(
        "configs",
        help="write certificates and one config per node, for `dpcomm node run` on many hosts",
    )
    _aggregate_options(configs)
    configs.add_argument("--out", required=True, help="output directory")
    configs.add_argument("--coordinator-host", default="127.0.0.1")
    configs.add_argument("--coordinator-port", type=int, default=7400)
    configs.set_defaults(handler=command_deploy_configs)

    node = commands.add_parser("node", help="run one node of a deployment")
    node_kinds = node.add_subparsers(dest="kind", required=True)
    run = node_kinds.add_parser("run", help="start one node from its config")
    run.add_argument("--role", required=True, choices=ROLES)
    run.add_argument("--config", required=True, help="the node's JSON config")
    run.add_argument("--ssl-certfile", required=True, help="the node's certificate (PEM)")
    run.add_argument("--ssl-keyfile", required=True, help="the node's private key (PEM)")
    run.add_argument("--ssl-ca-certfile", required=True, help="the deployment's CA (PEM)")
    run.add_argument("--output", help="write the node's outcome (JSON) here")
    run.set_defaults(handler=command_node_run)
