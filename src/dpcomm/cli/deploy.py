"""``dpcomm deploy configs`` and ``dpcomm node run``: a deployment on several hosts.

A deployment on this machine is ``dpcomm run aggregate|kmeans --engine network``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcomm.cli.budget import add_budget_options, budget_from_options, print_charge
from dpcomm.cli.defaults import DEFAULT_DELTA
from dpcomm.cli.options import (
    AGGREGATE_DEFAULTS,
    KMEANS_DEFAULTS,
    add_aggregate_options,
    add_countermeasure_options,
    add_data_seed_option,
    add_kmeans_options,
    add_release_options,
    add_round_options,
)
from dpcomm.cli.output import bounded_int, check_writable_file, check_writable_folder
from dpcomm.errors import DpcommError, InvalidParameterError


def command_deploy_configs(args: argparse.Namespace) -> int:
    """``dpcomm deploy configs``: an Aggregate query's deployment."""
    from dpcomm.cli.execute import aggregate_data, countermeasure_from_options, release_options

    _refuse_seed(args)
    from dpcomm.data.table import Table
    from dpcomm.pipeline.job import ReleaseSpec, compile_aggregate

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
        num_targets=args.num_targets,
        max_groups=args.max_groups,
        max_text_bytes=args.max_text_bytes,
    )
    return _write_configs(args, program, countermeasure)


def command_deploy_kmeans_configs(args: argparse.Namespace) -> int:
    """``dpcomm deploy kmeans-configs``: K-means's deployment (its noisy release included)."""
    from dpcomm.cli.execute import compile_kmeans_options, countermeasure_from_options

    _refuse_seed(args)
    if args.scale:
        raise InvalidParameterError(
            "--scale",
            "only with `run kmeans` (a deployment's compute nodes would publish scaled centroids)",
            "--scale",
        )
    check_writable_folder("--out", args.out)
    countermeasure = countermeasure_from_options(args, KMEANS_DEFAULTS)
    program = compile_kmeans_options(args, countermeasure)
    return _write_configs(args, program, countermeasure)


def _refuse_seed(args: argparse.Namespace) -> None:
    """A deployment's configs hold no seed: ``--seed`` is refused."""
    if args.seed is not None:
        raise InvalidParameterError(
            "--seed",
            "no seed for `deploy configs` (every node of a real deployment draws fresh "
            "operating-system entropy; use `run --engine network --seed` for a reproducible "
            "test round)",
            args.seed,
        )


def _write_configs(args: argparse.Namespace, program: Any, countermeasure: Any) -> int:
    """Account ``program``'s plan, write its deployment and say what guarantee it is for."""
    from dpcomm.engine.network.deploy import write_deployment
    from dpcomm.pipeline.job import planned_guarantee

    # The plan is accounted before any key is written: a bad --delta is refused, and the
    # operator sees the guarantee the configs are for.
    accounted = planned_guarantee(program, countermeasure, delta=args.delta)
    privacy = accounted.traffic.guarantee
    guarantee = f"the plan's guarantee: ε = {privacy.epsilon:.4g}, δ = {privacy.delta:.3g}"
    both = accounted.release
    if both is not None:
        guarantee += (
            f"; the release (drawn by the {_drawn_by(program)}): ε2 = {both.release_epsilon:.4g}, "
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


def _drawn_by(program: Any) -> str:
    """Who draws a release's noise: K-means's compute nodes, a query's result node."""
    return "result node" if getattr(program, "query", None) is not None else "compute nodes"


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
        for name, failed in outcome.errors.items():
            print(f"dpcomm: error: {name}: {failed}", file=sys.stderr)
        return 1
    return _round_status(config, outcome)


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


def _round_status(config: Any, outcome: Any) -> int:
    """A node's exit status: 1 if the round it saw lost more than it tolerates, else 0.

    The coordinator fails on the sources that never registered beyond ``--max-left-out`` and
    on its summary's failures (sources left out by refused or lost batches, dead compute
    nodes, no result); the result node on outputs it never got and on the summary it received;
    a compute node on an output it gave up on. Each reason is one line on stderr.
    """
    reasons: list[str] = []
    if outcome.coordinator is not None:
        summary = outcome.coordinator.summary
        if summary is None:
            reasons += _absent_sources(config, outcome.coordinator)
        else:
            reasons += list(summary.failures)
    if outcome.result is not None:
        reasons += list(outcome.result.failures)
    reasons += list(outcome.undelivered())
    for reason in dict.fromkeys(reasons):
        print(f"dpcomm: error: the round failed: {reason}", file=sys.stderr)
    return 1 if reasons else 0


def _absent_sources(config: Any, coordinator: Any) -> list[str]:
    """More sources never registered than ``--max-left-out`` allows: why, in one line."""
    from dpcomm.queries.program import num_sources

    spec = config.round
    total = num_sources(spec.public_program)
    absent = [name for name in coordinator.absent if name.startswith("source-")]
    if len(absent) <= spec.max_left_out * total:
        return []
    return [
        f"{len(absent):,} of {total:,} sources never "
        f"registered (first: {absent[0]}), more than --max-left-out {spec.max_left_out:g} allows"
    ]


def _add_configs_command(kinds: Any) -> None:
    """``deploy configs`` and ``deploy kmeans-configs``: certificates and one config per node."""
    configs = kinds.add_parser(
        "configs",
        help="write certificates and one config per node, for `dpcomm node run` on many hosts",
    )
    add_aggregate_options(configs, running=False)
    add_release_options(configs)
    add_data_seed_option(configs, aggregate=True, kmeans=False)
    _add_deployment_options(configs, AGGREGATE_DEFAULTS)
    configs.set_defaults(handler=command_deploy_configs)
    kmeans = kinds.add_parser(
        "kmeans-configs",
        help="likewise for K-means (its noisy release included): configs for `node run`",
    )
    add_kmeans_options(kmeans)
    add_data_seed_option(kmeans, aggregate=False, kmeans=True)
    _add_deployment_options(kmeans, KMEANS_DEFAULTS)
    kmeans.set_defaults(handler=command_deploy_kmeans_configs)


def _add_deployment_options(configs: Any, defaults: dict[str, Any]) -> None:
    """A deployment's round, countermeasure, ``--out`` and the coordinator's address."""
    add_round_options(configs)
    add_countermeasure_options(configs, defaults)
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


def _add_node_command(commands: Any) -> None:
    """``node run``: one node of a deployment, from its config."""
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


def add_deploy_commands(commands: Any) -> None:
    """Register ``deploy`` and ``node`` on the top-level subparsers."""
    deploy = commands.add_parser(
        "deploy",
        help="a real deployment on several hosts: certificates and node configs (processes, "
        "mutual TLS 1.3)",
    )
    _add_configs_command(deploy.add_subparsers(dest="kind", required=True))
    _add_node_command(commands)
