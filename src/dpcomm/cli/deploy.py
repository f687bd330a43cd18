"""``dpcomm deploy local|configs`` and ``dpcomm node run``: parse, call, print."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcomm._json import json_ready
from dpcomm.cli.execute import (
    add_countermeasure_options,
    add_public_bounds_options,
    aggregate_program,
    countermeasure_from_options,
    execute_aggregate,
    execute_kmeans,
    print_run,
)
from dpcomm.cli.output import (
    MAX_COUNT,
    bounded_int,
    check_writable_file,
    check_writable_folder,
    non_negative_int,
    positive_float,
)
from dpcomm.engine.engines import Engine
from dpcomm.engine.network.report import DeploymentDetails
from dpcomm.engine.report import Report
from dpcomm.errors import DpcommError, InvalidParameterError

DEFAULT_SYNTHETIC_ROWS = 1000
DEFAULT_COMPUTE_NODES = 5
DEPLOY_DEFAULTS = {"sampling": 0.2, "batch": 100, "dummies": 10}
KMEANS_DEPLOY_DEFAULTS = {"sampling": 0.9, "batch": 100, "dummies": 10}
DEFAULT_KMEANS_SOURCES = 500


def _print_wire(report: Report[Any]) -> None:
    details = report.details
    if not isinstance(details, DeploymentDetails):
        return
    wire = details.wire
    print("Measured on the wire (TLS application bytes written, every frame the same length):")
    print(
        f"  frames: {wire.frames:,} ({wire.data_frames:,} sealed data frames, "
        f"{wire.control_frames:,} control frames); bytes: {wire.bytes:,}; "
        f"frame size {wire.frame_size} B; lengths observed: {list(wire.frame_lengths_observed)}"
    )
    messages = sum(flow.messages for flow in report.efficiency.traffic)
    print(f"  messages of the plan's flows: {messages:,} (the simulator's count for this plan)")
    roles = ", ".join(f"{k} {v:,}" for k, v in wire.max_data_channels_by_role.items())
    print(
        f"  channels per node (data plane): max {wire.max_data_channels_per_node:,}, mean "
        f"{wire.mean_data_channels_per_node:.2f}; by role: {roles}; with the coordinator's "
        f"control channels: max {wire.max_channels_per_node:,}"
    )
    busiest = sorted(wire.links, key=lambda link: -link.data_frames)[:5]
    for link in busiest:
        print(
            f"  link {link.sender} -> {link.receiver}: {link.data_frames} data frames, "
            f"{link.frames} frames, {link.bytes:,} bytes"
        )
    print(f"  lost scramblers: {', '.join(details.lost_scramblers) or 'none'}")
    left = {flow: len(rows) for flow, rows in details.left_out_sources.items() if rows}
    print(f"  sources left out (deadline): {left or 'none'}")
    print(f"  dropped frames/connections: {dict(wire.dropped) or 'none'}")
    for kind, drops in (("attacks", wire.attacks), ("overload", wire.overload)):
        if drops:
            print(f"  of which {kind}: {dict(drops)}")
    timings = ", ".join(f"{k.removesuffix('_seconds')} {v:.2f} s" for k, v in wire.timings.items())
    print(f"  timings: {timings}")


def _network_engine(args: argparse.Namespace, rows: Any = None) -> Engine:
    """The TLS deployment on this machine that the options describe (its rows in memory)."""
    from dpcomm.engine.network.deploy import Faults, NetworkEngine

    faults = Faults(kill_scrambler=args.kill_scrambler)
    return NetworkEngine(
        transport="tls",
        timeout=args.timeout,
        collect_seconds=args.collect_seconds,
        workdir=args.workdir,
        faults=faults,
        max_left_out=args.max_left_out,
    )


def _finish(args: argparse.Namespace, report: Report[Any]) -> int:
    """What was measured on the wire (text only), the nodes that failed, the exit status."""
    if not args.json:
        print()
        _print_wire(report)
    details = report.details
    failures = details.failures if isinstance(details, DeploymentDetails) else ()
    if failures:
        print(f"dpcomm: error: the round failed: {'; '.join(failures)}", file=sys.stderr)
    return 0 if not failures else 1


def _default_to_synthetic(args: argparse.Namespace) -> None:
    """Without ``--data``, ``--synthetic`` or ``--diabetes``: a synthetic table (default size)."""
    if args.data is None and args.synthetic is None and not args.diabetes:
        args.synthetic = DEFAULT_SYNTHETIC_ROWS


def _check_workdir(args: argparse.Namespace) -> None:
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


#: Options of one workload only, with their defaults: given to the other one, they are refused.
KMEANS_ONLY_OPTIONS = {
    "dataset": "mnist5k",
    "k": 4,
    "iterations": 2,
    "sources": DEFAULT_KMEANS_SOURCES,
}
AGGREGATE_ONLY_OPTIONS = {
    "sql": None,
    "data": None,
    "synthetic": None,
    "diabetes": False,
    "distribution": "uniform",
    "compute_nodes": DEFAULT_COMPUTE_NODES,
    "rows": 20,
}


def _check_workload_options(args: argparse.Namespace) -> None:
    """Refuse the options of the other workload instead of ignoring them."""
    others = KMEANS_ONLY_OPTIONS if args.workload == "aggregate" else AGGREGATE_ONLY_OPTIONS
    for name, default in others.items():
        if getattr(args, name) != default:
            option = "--" + name.replace("_", "-")
            raise InvalidParameterError(
                option, f"unset for `deploy local {args.workload}`", getattr(args, name)
            )


def command_deploy_local(args: argparse.Namespace) -> int:
    """``dpcomm deploy local [aggregate|kmeans]``."""
    _check_workload_options(args)
    _check_workdir(args)
    if args.workload == "kmeans":
        kmeans, dataset = execute_kmeans(args, KMEANS_DEPLOY_DEFAULTS, _network_engine)
        sources = kmeans.program.num_sources
        print_run(args, kmeans, f"{dataset} (the first {sources:,} training points)")
        return _finish(args, kmeans.report)
    if args.sql is None:
        raise InvalidParameterError("--sql", "a query (required for an Aggregate deployment)", None)
    _default_to_synthetic(args)
    aggregate, source = execute_aggregate(args, DEPLOY_DEFAULTS, _network_engine)
    print_run(args, aggregate, f"{source}; deployed on this machine (loopback, mutual TLS 1.3)")
    return _finish(args, aggregate.report)


def command_deploy_configs(args: argparse.Namespace) -> int:
    """``dpcomm deploy configs``."""
    from dpcomm.engine.network.deploy import write_deployment

    if args.seed is not None:
        raise InvalidParameterError(
            "--seed",
            "no seed for `deploy configs` (every node of a real deployment draws fresh "
            "operating-system entropy; use `deploy local --seed` for a reproducible test round)",
            args.seed,
        )
    check_writable_folder("--out", args.out)
    countermeasure = countermeasure_from_options(args, DEPLOY_DEFAULTS)
    _default_to_synthetic(args)
    program, _, _ = aggregate_program(args)
    from dpcomm.engine.run import prepare

    # The plan is accounted before any key is written: a bad --delta is refused, and the
    # operator sees the guarantee the configs are for.
    accounted = prepare(program, countermeasure, delta=args.delta).privacy
    assert accounted is not None  # a delta was given
    privacy = accounted.guarantee
    paths = write_deployment(
        program,
        countermeasure,
        args.out,
        coordinator_host=args.coordinator_host,
        coordinator_port=args.coordinator_port,
        collect_seconds=args.collect_seconds,
        timeout=args.timeout,
    )
    print(
        f"wrote {len(paths):,} node configs to {Path(args.out) / 'configs'} and certificates "
        f"to {Path(args.out) / 'pki'}; the plan's guarantee: ε = {privacy.epsilon:.4g}, "
        f"δ = {privacy.delta:.3g}",
        file=sys.stderr,
    )
    return 0


def command_node_run(args: argparse.Namespace) -> int:
    """``dpcomm node run``."""
    from dpcomm.engine.network.launcher import run_tls_group
    from dpcomm.engine.network.pki import NodeCredentials
    from dpcomm.engine.network.spec import DeploymentError, NodeConfig

    if args.output:
        check_writable_file("--output", args.output)  # before the round: its result is kept
    config = NodeConfig.load(args.config)
    if config.role != args.role:
        raise DeploymentError(f"config {args.config} is for a {config.role}, not a {args.role}")
    credentials = NodeCredentials(
        name=config.name,
        cert_path=Path(args.ssl_certfile),
        key_path=Path(args.ssl_keyfile),
        ca_path=Path(args.ssl_ca_certfile),
    )
    outcome: dict[str, Any] = run_tls_group([config], {config.name: credentials})
    text = json.dumps(json_ready(outcome), indent=2)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as error:  # e.g. a full disk: the round's outcome goes to stdout instead
            print(text)
            raise DpcommError(
                f"cannot write {args.output} ({error.strerror}); the outcome was printed instead"
            ) from error
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
        "--data-seed",
        type=non_negative_int,
        default=0,
        help="seed of the --synthetic table (default 0)",
    )
    parser.add_argument(
        "--compute-nodes",
        type=bounded_int(None, MAX_COUNT),
        default=DEFAULT_COMPUTE_NODES,
        help=f"C, compute nodes per grouping set (default {DEFAULT_COMPUTE_NODES})",
    )
    add_public_bounds_options(parser)
    parser.add_argument(
        "--collect-seconds",
        type=positive_float,
        help="how long a scrambler waits for its n sources, per stage (default: 20 s + 6.7 ms "
        "per source and grouping set, so that none misses it; a scrambler stops waiting once "
        "all have arrived)",
    )
    parser.add_argument(
        "--max-left-out",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="fraction of the sources that may be left out (late, unreachable, or behind a "
        "dead scrambler) before the round counts as failed, exit status 1 (default 0)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        help="hard deadline of the round in seconds (default: grows with the sources and "
        "stages, see docs/deployment.md)",
    )


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
            "processes on 127.0.0.1, each node with its own certificate, run the program's "
            "round and print the report `dpcomm run` prints and what was measured on the "
            "wire. Given the same data, program and countermeasure options and the same "
            "--seed, it is the run `dpcomm run` makes: the same result, delivered tuples and "
            "messages per flow. Its defaults are smaller than run's (a deployment starts one "
            "process per 600 sources and a TLS handshake per node): a synthetic table of 1,000 "
            "rows, C = 5 compute nodes, d = 10 dummies; `deploy local kmeans`: mnist5k, 500 "
            "sources, K = 4, I = 2, σ 0.9, n 100, d 10. Pass them to `dpcomm run` to compare."
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
    kmeans.add_argument(
        "--k", type=bounded_int(None, MAX_COUNT), default=4, help="K, centroids (default 4)"
    )
    kmeans.add_argument(
        "--iterations",
        type=bounded_int(None, MAX_COUNT),
        default=2,
        help="I, iterations (default 2)",
    )
    kmeans.add_argument(
        "--sources",
        type=int,
        default=DEFAULT_KMEANS_SOURCES,
        help=f"sources: the first N training points (default {DEFAULT_KMEANS_SOURCES})",
    )
    local.add_argument(
        "--rows", type=non_negative_int, default=20, help="result rows to print (default 20)"
    )
    local.add_argument("--workdir", help="keep certificates here (default: temporary)")
    local.add_argument(
        "--force",
        action="store_true",
        help="replace the certificates and keys an existing --workdir holds",
    )
    local.add_argument(
        "--kill-scrambler",
        type=int,
        metavar="K",
        help="fault injection: scrambler K (global index) dies mid-forward",
    )
    add_countermeasure_options(local, DEPLOY_DEFAULTS)
    local.set_defaults(handler=command_deploy_local)
    configs = kinds.add_parser(
        "configs",
        help="write certificates and one config per node, for `dpcomm node run` on many hosts",
    )
    _aggregate_options(configs)
    add_countermeasure_options(configs, DEPLOY_DEFAULTS)
    configs.add_argument("--out", required=True, help="output directory")
    configs.add_argument(
        "--coordinator-host",
        default="127.0.0.1",
        help="address the coordinator binds and nodes reach (default 127.0.0.1, loopback "
        "only: give the host's address for a deployment on several hosts)",
    )
    configs.add_argument(
        "--coordinator-port", type=bounded_int(1, 65535), default=7400, help="(default 7400)"
    )
    configs.set_defaults(handler=command_deploy_configs)

    node = commands.add_parser("node", help="run one node of a deployment")
    node_kinds = node.add_subparsers(dest="kind", required=True)
    run = node_kinds.add_parser("run", help="start one node from its config")
    run.add_argument(
        "--role", required=True, choices=["coordinator", "result", "source", "scrambler", "compute"]
    )
    run.add_argument("--config", required=True, help="the node's JSON config")
    run.add_argument("--ssl-certfile", required=True, help="the node's certificate (PEM)")
    run.add_argument("--ssl-keyfile", required=True, help="the node's private key (PEM)")
    run.add_argument("--ssl-ca-certfile", required=True, help="the deployment's CA (PEM)")
    run.add_argument("--output", help="write the node's outcome (JSON) here")
    run.set_defaults(handler=command_node_run)
