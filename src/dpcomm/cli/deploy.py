"""``dpcomm deploy local|configs`` and ``dpcomm node run``: parse, call, print."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcomm.api import DEFAULT_DELTA
from dpcomm.cli.budget import add_budget_options, budget_from_options, print_charge
from dpcomm.cli.execute import (
    AGGREGATE_DEFAULTS,
    KMEANS_CENTROIDS,
    KMEANS_DEFAULTS,
    KMEANS_ITERATIONS,
    add_aggregate_options,
    add_countermeasure_options,
    add_data_seed_option,
    add_kmeans_options,
    add_output_options,
    add_release_options,
    aggregate_data,
    countermeasure_from_options,
    execute_aggregate,
    execute_kmeans,
    output_paths,
    print_run,
    release_options,
    write_outputs,
)
from dpcomm.cli.output import (
    bounded_int,
    check_writable_file,
    check_writable_folder,
    flags_in,
    positive_float,
)
from dpcomm.engine.engines import Engine, make_engine
from dpcomm.engine.network.report import DeploymentDetails
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.pipeline.report import Report
from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES


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
    print(f"  sources left out (absent, late or unreachable): {left or 'none'}")
    print(f"  dropped frames/connections: {dict(wire.dropped) or 'none'}")
    for kind, drops in (("attacks", wire.attacks), ("overload", wire.overload)):
        if drops:
            print(f"  of which {kind}: {dict(drops)}")
    timings = ", ".join(f"{k.removesuffix('_seconds')} {v:.2f} s" for k, v in wire.timings.items())
    print(f"  timings: {timings or 'withheld under a noisy release (they may depend on the data)'}")


def _network_engine(args: argparse.Namespace) -> Engine:
    """The TLS deployment on this machine that the options describe."""
    from dpcomm.engine.network.deploy import Faults

    return make_engine(
        "network",
        transport="tls",
        timeout=args.timeout,
        idle_seconds=args.idle_seconds,
        workdir=args.workdir,
        faults=Faults(kill_scrambler=args.kill_scrambler),
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
        print(f"dpcomm: error: the round failed: {flags_in('; '.join(failures))}", file=sys.stderr)
    return 0 if not failures else 1


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
    "dataset": None,
    "columns": None,
    "label_column": None,
    "k": KMEANS_CENTROIDS,
    "iterations": KMEANS_ITERATIONS,
    "init": "random",
    "init_data": None,
    "sources": None,
    "drop_non_finite": False,
}
AGGREGATE_ONLY_OPTIONS: dict[str, object] = {
    "sql": None,
    "synthetic": None,
    "diabetes": False,
    "distribution": "uniform",
    "targets": DEFAULT_NUM_TARGETS,
    "max_groups": None,
    "max_text_bytes": DEFAULT_TEXT_BYTES,
    "rows": 20,
    "estimate": "delivered",
    "release": None,
    "release_epsilon": None,
    "release_delta": None,
    "bounds": [],
    "keys": [],
    "key_selection_delta": None,
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
    out, report = output_paths(args)
    _check_workdir(args)
    # Charged before the round starts (refused: nothing runs, the ledger unchanged).
    budget = budget_from_options(args)
    if args.workload == "kmeans":
        kmeans, dataset = execute_kmeans(args, _network_engine(args), budget)
        print_run(args, kmeans, dataset)
        print_charge(budget)
        write_outputs(kmeans, out, report)
        return _finish(args, kmeans.report)
    aggregate, source = execute_aggregate(args, _network_engine(args), budget)
    print_run(args, aggregate, f"{source}; deployed on this machine (loopback, mutual TLS 1.3)")
    print_charge(budget)
    write_outputs(aggregate, out, report)
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
    from dpcomm.data.table import Table
    from dpcomm.pipeline.job import ReleaseSpec, compile_aggregate, planned_guarantee

    check_writable_folder("--out", args.out)
    countermeasure = countermeasure_from_options(args, AGGREGATE_DEFAULTS)
    data, _ = aggregate_data(args)
    table = data if isinstance(data, Table) else data.read(0, data.num_rows)
    asked = release_options(args)
    program = compile_aggregate(
        args.sql,
        table,
        release=ReleaseSpec.of(asked.pop("release", None), **asked),
        countermeasure=countermeasure,
        num_targets=args.targets,
        max_groups=args.max_groups,
        max_text_bytes=args.max_text_bytes,
    )
    # The plan is accounted before any key is written: a bad --delta is refused, and the
    # operator sees the guarantee the configs are for.
    accounted = planned_guarantee(program, countermeasure, delta=args.delta)
    privacy = accounted.traffic.guarantee
    guarantee = f"the plan's guarantee: ε = {privacy.epsilon:.4g}, δ = {privacy.delta:.3g}"
    both = accounted.release
    if both is not None:
        guarantee += (
            f"; the release (drawn by the result node): ε2 = {both.release_epsilon:.4g}, "
            f"δ2 = {both.release_delta:.3g}; traffic and release together: ε = "
            f"{both.epsilon:.4g} at δ = {both.delta:.3g} (with every batch as planned)"
        )
    paths = write_deployment(
        program,
        countermeasure,
        args.out,
        coordinator_host=args.coordinator_host,
        coordinator_port=args.coordinator_port,
        idle_seconds=args.idle_seconds,
        timeout=args.timeout,
        max_left_out=args.max_left_out,
    )
    print(
        f"wrote {len(paths):,} node configs to {Path(args.out) / 'configs'} and certificates "
        f"to {Path(args.out) / 'pki'}; {guarantee}",
        file=sys.stderr,
    )
    return 0


def command_node_run(args: argparse.Namespace) -> int:
    """``dpcomm node run``."""
    from dpcomm.engine.network.deploy import published_result
    from dpcomm.engine.network.launcher import run_tls_group
    from dpcomm.engine.network.pki import NodeCredentials
    from dpcomm.engine.network.records import to_text
    from dpcomm.engine.network.spec import DeploymentError, NodeConfig

    if args.output:
        check_writable_file("--output", args.output)  # before the round: its result is kept
    config = NodeConfig.load(args.config)
    if config.role != args.role:
        raise DeploymentError(f"config {args.config} is for a {config.role}, not a {args.role}")
    budget, delta = _coordinator_budget(args)
    if config.round.seed is not None:
        # Said now, not after the round: the operator may stop the node before it draws.
        print(
            f"dpcomm: warning: config {args.config} holds a seed: whoever "
            "holds the config can predict this node's draws (its sampled targets, dummies and "
            "shuffles), so its traffic hides nothing from them; `dpcomm deploy configs` writes "
            "no seed (fresh operating-system entropy on every node)",
            file=sys.stderr,
            flush=True,
        )
    if budget is not None:
        from dpcomm.pipeline.charge import charge_round

        # The coordinator charges the round before any node registers: refused, nothing runs.
        charge_round(budget, config.round, delta=delta)
        print_charge(budget)
    credentials = NodeCredentials(
        name=config.name,
        cert_path=Path(args.ssl_certfile),
        key_path=Path(args.ssl_keyfile),
        ca_path=Path(args.ssl_ca_certfile),
    )
    outcome = run_tls_group([config], {config.name: credentials})
    published = published_result(config.round, outcome) if config.role == "result" else None
    # Under a noisy release the result node publishes the released rows, not the exact ones.
    text = to_text(outcome) if published is None else json.dumps(published, indent=2)
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
    if outcome.errors:
        return 1
    return _absent_sources_status(config, outcome)


def _coordinator_budget(args: argparse.Namespace) -> tuple[Any, float]:
    """The budget of ``--ledger`` and the δ to charge at: only the coordinator charges."""
    from dpcomm.validation import check_delta

    if args.ledger is not None and args.role != "coordinator":
        allowed = "only with --role coordinator (the coordinator charges the round)"
        raise InvalidParameterError("--ledger", allowed, args.ledger)
    if args.delta is not None and args.ledger is None:
        raise InvalidParameterError("--delta", "given with --ledger FILE", args.delta)
    delta = check_delta("--delta", DEFAULT_DELTA if args.delta is None else args.delta)
    return budget_from_options(args), delta


def _absent_sources_status(config: Any, outcome: Any) -> int:
    """The coordinator's exit status: 1 if more sources were absent than the round tolerates."""
    from dpcomm.queries.program import num_sources

    if outcome.coordinator is None:
        return 0
    spec = config.round
    total = num_sources(spec.public_program)
    absent = [name for name in outcome.coordinator.absent if name.startswith("source-")]
    if len(absent) <= spec.max_left_out * total:
        return 0
    print(
        f"dpcomm: error: the round failed: {len(absent):,} of {total:,} sources never "
        f"registered (first: {absent[0]}), more than --max-left-out {spec.max_left_out:g} allows",
        file=sys.stderr,
    )
    return 1


def round_seconds(text: str) -> float:
    """An argparse type: a number of seconds in (0, one day], a round's longest deadline.

    The bound is the network engine's (``MAX_ROUND_SECONDS``), read when a value is given:
    ``deploy configs`` writes it into every node's config, where a deadline of 10^23 seconds
    would never end a round.
    """
    from dpcomm.engine.network.deploy import MAX_ROUND_SECONDS

    value = positive_float(text)
    if value > MAX_ROUND_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds in (0, {MAX_ROUND_SECONDS:,.0f}] (one day), got {text!r}"
        )
    return value


def _round_options(parser: argparse.ArgumentParser) -> None:
    """The deadlines of a round and what it tolerates."""
    parser.add_argument(
        "--idle-seconds",
        type=round_seconds,
        help="T: a phase of the round ends after T seconds without progress: registration "
        "when no node registered for T (an absent source is left out), a scrambler's window "
        "when no message came for T (it closes at once when all its sources are in), a link "
        "when its peer stayed unreachable for T (default 30; 120 for deploy configs, whose "
        "hosts are started by hand)",
    )
    parser.add_argument(
        "--max-left-out",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="fraction of the sources that may be left out (absent at registration, late, "
        "unreachable, or behind a dead scrambler) before the round counts as failed, exit "
        "status 1 (default 0); with deploy configs the coordinator's node checks the sources "
        "that never registered",
    )
    parser.add_argument(
        "--timeout",
        type=round_seconds,
        help="cap on the whole round in seconds, at most one day (default: 600 s + 0.1 s per "
        "source and stage; a round that makes progress is never cut by T)",
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
            "wire. It takes run's options with run's defaults: given the same options and the "
            "same --seed, it is the run `dpcomm run` makes (the same result, delivered tuples "
            "and messages per flow). A deployment starts a process per 600 sources and a TLS "
            "handshake per source and grouping set (about 17 ms of CPU per source on a small "
            "machine), so the defaults are slow here: the embedded 10,000-row table takes "
            "minutes, K-means on all 4,000 digits over 10 iterations longer. For a quick round "
            "pass a smaller table (--synthetic 1000) or, for K-means, --sources 500 --k 4 "
            "--iterations 2 (and the same options to `dpcomm run` to compare). With --ledger "
            "FILE the round is charged before it starts, at the weakest guarantee it can "
            "report (every scrambler at any batch size late sources could leave it); refused, "
            "nothing starts."
        ),
    )
    local.add_argument(
        "workload",
        nargs="?",
        choices=["aggregate", "kmeans"],
        default="aggregate",
        help="aggregate (default; needs --sql) or kmeans",
    )
    add_aggregate_options(local, sql_required=False)
    add_data_seed_option(local, aggregate=True, kmeans=True)
    add_kmeans_options(local.add_argument_group("K-means (deploy local kmeans)"), data=False)
    _round_options(local)
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
    add_countermeasure_options(local, AGGREGATE_DEFAULTS, kmeans_defaults=KMEANS_DEFAULTS)
    add_budget_options(local)
    add_output_options(local)
    local.set_defaults(handler=command_deploy_local)
    configs = kinds.add_parser(
        "configs",
        help="write certificates and one config per node, for `dpcomm node run` on many hosts",
    )
    add_aggregate_options(configs, running=False)
    add_release_options(configs)
    add_data_seed_option(configs, aggregate=True, kmeans=False)
    _round_options(configs)
    add_countermeasure_options(configs, AGGREGATE_DEFAULTS)
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
    add_budget_options(run)
    run.add_argument(
        "--delta",
        type=float,
        metavar="D",
        help=f"with --ledger: δ of the whole plan the round is charged at (default "
        f"{DEFAULT_DELTA:g}, as deploy configs' --delta)",
    )
    run.set_defaults(handler=command_node_run)
