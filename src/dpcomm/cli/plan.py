"""``dpcomm plan`` (the planner) and ``dpcomm headline`` (the table): parse, call, print."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpcomm._json import json_ready
from dpcomm.cli.defaults import MAX_COUNT, MAX_SOURCES
from dpcomm.cli.options import add_release_scope_options
from dpcomm.cli.output import (
    add_progress_options,
    bounded_int,
    check_writable_file,
    non_negative_int,
    print_table,
    show_progress,
)
from dpcomm.errors import InvalidParameterError, require_extra

if TYPE_CHECKING:
    from dpcomm.api import Calibration
    from dpcomm.calibration import Configuration, PlanCandidate, PlannerResult, PlanShape
    from dpcomm.experiments.headline import HeadlineRow

PLAN_DESCRIPTION = """\
Find the countermeasure of least network load that gives the whole plan (ε, δ)-DP.

From the query: --sql and --data (a CSV or Parquet file) read the plan's shape as `dpcomm run
aggregate` compiles it: S = the table's rows, G = its non-empty grouping sets, T = --targets
(default 20). The empty grouping set () of ROLLUP or CUBE is free: its one compute node hears
every source whatever its data (ε = 0), so it is costed but not composed. The table is fixed:
--max-extra-consents defaults to 0. By hand: S (--sources) is the number of real tuples the
computation must use; the plan has G grouping sets (--grouping-sets, Aggregate, the non-empty
ones) or I iterations (--iterations, K-means with K = T centroids): G identical data-dependent
clusters of T targets. A configuration is local sampling + flooding (σ, d <= T - 1) or uncapped
scramblers (σ, n, d): ceil(S_t/n) scramblers whose batches differ by at most one source
(balanced), the largest n. S_t = ceil(S/(1 - σ + σ/T)) sources are recruited to keep the utility
(extra consents S_t - S); with --max-extra-consents c at most S + c, and the expected utility
min(1, S_t (1 - σ + σ/T)/S) must be at least --min-utility. The G clusters compose: a
configuration is feasible when the whole plan reaches (ε, δ) by composing the clusters' privacy
loss distributions (the Lemma 2 pair of the smallest balanced batch) or by Theorem 2 (each
cluster at ε/G and δ/G, exact accounting of every batch size). The search is exact over σ = 0,
0.01, ..., 0.99, every number of scramblers and d <= 20,000, pruned by bounds that cannot remove
the cheapest configuration. Network load counts every message of the plan with its
countermeasure, as the engines send them; channels are the most secure channels of any node. The
Pareto front over (load, channels, consents) of the feasible configurations the search evaluated
is printed too (its least-load members are exact; the pruned configurations all cost more than
the chosen one), and the `dpcomm run` command that runs the chosen configuration (on the table
of --data, or on a synthetic table of S_t rows), with --target-epsilon: a run whose ε would
exceed the target is refused. --max-messages limits the plan's network load.

With --release laplace|gaussian (and --bounds, --keys, --key-selection-delta as `dpcomm run
aggregate` takes them) the result is released with noise too, and (ε, δ) is the guarantee
against an observer of traffic and release together: it is split between the traffic (ε1, δ1)
and the release (ε2, δ2) for the least expected relative error of the released values, under
the limits. The traffic's share runs over 5%, 10%, ..., 95% of ε (δ1 = δ for Laplace, δ/2 for
Gaussian, after a key selection's δ is set aside), the release gets the largest ε2 whose
composition with the traffic (PLD composition or sum, as the run reports it) is at most ε.
Without limits the traffic takes the smallest share (on a small table, flooding every compute
node: ε1 = 0, the release gets all of ε); --max-messages trades error for load. Printed: the
split, the composed guarantee, the expected error, each share evaluated, and the
run command with the release.
"""

#: File formats ``--plot`` draws (by the file's extension).
PLOT_FORMATS = (".png", ".pdf", ".svg")


def run_arguments(
    result: PlannerResult,
    query: tuple[str, str] | None = None,
    calibration: Calibration | None = None,
) -> list[str] | None:
    """The ``dpcomm run`` arguments that run the chosen configuration (None if none can).

    Aggregate: a synthetic table of S_t rows (``--synthetic``) and a query with the plan's G
    grouping sets of T compute nodes (``--targets``); K-means: K = T centroids and I iterations
    on the first S_t points of the default dataset (``--sources``); the command is built by
    `dpcomm.plan.codec.run_command`. ``--delta`` is the whole plan's δ, ``--batch`` the
    largest balanced batch (the same batches as the planned n), and ``--target-epsilon`` the
    ε asked for, so that a run whose ε would exceed it is refused. With ``query`` (the SQL and
    the ``--data`` file it was calibrated from), that query over that file. With a
    ``calibration`` that releases the result, its release (``--release``,
    ``--release-epsilon`` ε2, ``--release-delta`` δ2, ``--bounds``, ``--keys``,
    ``--key-selection-delta``) and ``--target-epsilon`` the ε of traffic and release together.
    """
    from dataclasses import replace

    from dpcomm.data.synthetic import synthetic_sql
    from dpcomm.plan import codec
    from dpcomm.plan.countermeasures import Scramblers

    request = result.request
    if request is None:
        return None
    configuration = result.configuration
    countermeasure = configuration.countermeasure
    if isinstance(countermeasure, Scramblers) and configuration.batch_sizes is not None:
        countermeasure = replace(countermeasure, batch_size=max(configuration.batch_sizes))
    options: dict[str, Any] = {
        "num_targets": request.num_targets,
        "delta": request.delta,
        "target_epsilon": request.epsilon if calibration is None else calibration.target_epsilon,
        "options": [] if calibration is None else _release_arguments(calibration),
    }
    if query is not None:
        return codec.run_command(
            "aggregate", countermeasure, data=query[1], sql=query[0], **options
        )
    if request.workload == "aggregate":
        sql = synthetic_sql(request.num_clusters)
        if sql is None:
            return None
        return codec.run_command(
            "aggregate", countermeasure, synthetic=result.num_sources, sql=sql, **options
        )
    return codec.run_command(
        "kmeans",
        countermeasure,
        sources=result.num_sources,
        iterations=request.num_clusters,
        **options,
    )


def _release_arguments(calibration: Calibration) -> list[str]:
    """The options of a calibration's release (none without one), as `run_arguments` ends."""
    release = calibration.release
    if release is None:
        return []
    arguments = ["--release", release.name, "--release-epsilon", repr(release.epsilon)]
    if release.delta > 0.0:
        arguments += ["--release-delta", repr(release.delta)]
    by_column = calibration.bounds if isinstance(calibration.bounds, Mapping) else {}
    for column, (low, high) in by_column.items():  # K-means' per-coordinate bounds: Python
        arguments += ["--bounds", f"{column}={low!r}:{high!r}"]
    for column, values in (calibration.keys or {}).items():
        arguments += ["--keys", f"{column}=" + ",".join(str(v) for v in values)]
    if calibration.key_selection_delta is not None:
        arguments += ["--key-selection-delta", repr(calibration.key_selection_delta)]
    return arguments


def run_command(
    result: PlannerResult,
    query: tuple[str, str] | None = None,
    calibration: Calibration | None = None,
) -> str | None:
    """`run_arguments` as one shell command line."""
    arguments = run_arguments(result, query, calibration)
    return None if arguments is None else shlex.join(arguments)


def _configuration_json(configuration: Configuration) -> dict[str, Any]:
    """The countermeasure's dict form (`dpcomm.plan.codec`) and its number of scramblers."""
    from dpcomm.plan import codec

    return {
        **codec.countermeasure_to_dict(configuration.countermeasure),
        "num_scramblers": configuration.num_scramblers,
    }


def _candidate_json(candidate: PlanCandidate) -> dict[str, Any]:
    return {
        "configuration": _configuration_json(candidate.configuration),
        "epsilon": candidate.epsilon,
        "delta": candidate.delta,
        "network_load_messages": candidate.network_load_messages,
        "max_channels_per_node": candidate.max_channels_per_node,
        "extra_consents": candidate.extra_consents,
        "sources_recruited": candidate.num_sources,
    }


def _number(value: float) -> str:
    return f"{value:.4f}"  # ∞ prints as inf


def release_json(calibration: Calibration) -> dict[str, Any] | None:
    """The split of a calibration with a release, as ``dpcomm plan --json`` prints it."""
    split, release = calibration.split, calibration.release
    if split is None or release is None:
        return None
    both = split.composition
    document: dict[str, Any] = json_ready(
        {
            "mechanism": release.name,
            "target_epsilon": split.epsilon,
            "target_delta": split.delta,
            "traffic_epsilon": calibration.epsilon,
            "traffic_delta": calibration.delta,
            "release_epsilon": release.epsilon,
            "release_delta": both.release_delta,
            "epsilon": both.epsilon,
            "delta": both.delta,
            "composed_epsilon": both.composed_epsilon,
            "summed_epsilon": both.summed_epsilon,
            "expected_relative_error": split.expected_relative_error,
            "splits": calibration.splits.to_dict("records"),
        }
    )
    return document


def plan_json(
    result: PlannerResult,
    query: tuple[str, str] | None = None,
    shape: PlanShape | None = None,
    calibration: Calibration | None = None,
) -> dict[str, Any]:
    """The planner's answer as the JSON document ``dpcomm plan --json`` prints.

    ``epsilon`` is the smaller of ``epsilon_pld`` (the clusters' privacy loss distributions
    composed; null for one cluster) and ``epsilon_basic`` (Theorem 2's sum, each cluster at
    δ/G); ``epsilon_lower_bound`` is certified (composed explicit pairs).
    ``batch_sizes`` lists the sources of every scrambler of one cluster (null for local),
    ``sources_recruited`` is S_t and ``run_command`` the ``dpcomm run`` command line that runs
    the chosen configuration (null when no synthetic query has G grouping sets). From a query
    (``--sql``, ``--data``), ``grouping_sets`` names the composed grouping sets and
    ``free_grouping_sets`` the free ones (null by hand). With ``--release``, ``release`` gives
    the split (`release_json`; null without), and ``epsilon``, ``delta`` stay the
    traffic's (ε1, δ1).
    """
    sizes = result.configuration.batch_sizes
    privacy = result.privacy
    document: dict[str, Any] = json_ready(
        {
            "configuration": _configuration_json(result.configuration),
            "epsilon": result.epsilon,
            "delta": result.delta,
            "epsilon_pld": None if privacy is None else privacy.pld_epsilon,
            "epsilon_basic": None if privacy is None else privacy.basic_epsilon,
            "epsilon_lower_bound": None if privacy is None else privacy.lower_bound,
            "network_load_messages": result.network_load_messages,
            "max_channels_per_node": result.max_channels_per_node,
            "extra_consents": result.extra_consents,
            "sources_recruited": result.num_sources,
            "batch_sizes": None if sizes is None else list(sizes),
            "run_command": run_command(result, query, calibration),
            "grouping_sets": None if shape is None else list(shape.clusters),
            "free_grouping_sets": None if shape is None else list(shape.free_clusters),
            "pareto": [_candidate_json(c) for c in result.pareto],
            "release": None if calibration is None else release_json(calibration),
        }
    )
    return document


def _spread(items: tuple[PlanCandidate, ...], limit: int) -> list[PlanCandidate]:
    """At most ``limit`` items evenly spread over the sequence (first and last kept)."""
    if len(items) <= limit or limit < 2:
        return list(items[:limit]) if limit < 2 else list(items)
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def _print_split(calibration: Calibration) -> None:
    """The split of (ε, δ) between traffic and release, and every share evaluated."""
    split, release = calibration.split, calibration.release
    if split is None or release is None:
        return
    both = split.composition
    composed = "n/a" if both.composed_epsilon is None else f"{both.composed_epsilon:.4f}"
    print(
        f"Split of ε = {split.epsilon:g}, δ = {split.delta:g} between the traffic and a "
        f"{release.name} release (least expected relative error):"
    )
    print(f"  traffic: ε1 = {calibration.epsilon:.4f}, δ1 = {calibration.delta:.3g}")
    print(f"  release: ε2 = {release.epsilon:.4f}, δ2 = {both.release_delta:.3g}")
    print(
        f"  together: ε = {both.epsilon:.4f} at δ = {both.delta:.3g} (PLD composition "
        f"{composed}; sum {both.summed_epsilon:.4f})"
    )
    error = split.expected_relative_error
    print(f"  expected relative error of the released values: {error:.1%}")
    rows = []
    for point in split.points:
        traffic = point.traffic
        if traffic is None or point.release is None or point.composition is None:
            rows.append([f"{point.traffic_share:.0%}", "-", "-", "-", "-", "infeasible"])
            continue
        mark = "*" if point is split.chosen else " "
        rows.append(
            [
                f"{mark}{point.traffic_share:.0%}",
                f"{traffic.epsilon:.4f}",
                f"{point.release.epsilon:.4f}",
                f"{point.composition.epsilon:.4f}",
                f"{point.expected_relative_error:.1%}",
                f"{traffic.network_load_messages:,}",
            ]
        )
    print("  traffic shares evaluated (* = chosen):")
    print_table(["share", "ε1", "ε2", "ε", "error", "messages"], rows, indent="    ")


def _print_request(
    result: PlannerResult,
    query: tuple[str, str] | None,
    shape: PlanShape | None,
    calibration: Calibration | None,
) -> None:
    """The plan asked for: its size, its workload and the (ε, δ) it must reach."""
    request = result.request
    assert request is not None  # checked by _print_plan
    clusters = request.num_clusters
    kind = (
        f"Aggregate, G = {clusters} grouping sets"
        if request.workload == "aggregate"
        else f"K-means, I = {clusters} iterations"
    )
    target = f"target ε ≤ {request.epsilon:g}, δ ≤ {request.delta:g}"
    split = None if calibration is None else calibration.split
    if split is not None:
        target = (
            f"target ε ≤ {split.epsilon:g}, δ ≤ {split.delta:g} for traffic and release "
            f"together, of which the traffic's ε1 ≤ {request.epsilon:.4g}, δ1 ≤ {request.delta:g}"
        )
    print(
        f"Plan for {request.num_sources:,} tuples used, T = {request.num_targets} targets per "
        f"cluster, {kind}; {target}"
    )
    if shape is not None and query is not None:
        print(f"  from the query over {query[1]}: {shape.describe()}")


def _print_chosen(result: PlannerResult, clusters: int, cluster: str) -> None:
    """The chosen configuration: its privacy (composed over ``clusters``) and its costs."""
    print(f"Chosen (least network load): {result.configuration.describe()}")
    composed = "its cluster" if clusters == 1 else f"its {clusters} clusters composed"
    print(
        f"  privacy: ε = {result.epsilon:.4f}, δ = {result.delta:.3g} (the whole plan: {composed})"
    )
    privacy = result.privacy
    if privacy is not None and clusters == 1:
        if privacy.lower_bound is not None:
            print(f"    certified lower bound on ε: {_number(privacy.lower_bound)}")
    elif privacy is not None:
        parts = []
        if privacy.pld_epsilon is not None:
            parts.append(f"PLD composition {_number(privacy.pld_epsilon)}")
        parts.append(
            f"Theorem 2 sum {_number(privacy.basic_epsilon)} (each cluster at δ = "
            f"{privacy.delta_per_cluster:.3g})"
        )
        if privacy.lower_bound is not None:
            parts.append(f"certified lower bound {_number(privacy.lower_bound)}")
        print("    ε by " + "; ".join(parts))
    overhead = result.network_load_messages / result.nonprivate_load_messages
    print(
        f"  network load: {result.network_load_messages:,} messages "
        f"(non-private {result.nonprivate_load_messages:,}: ×{overhead:.2f})"
    )
    roles = ", ".join(f"{role} {count:,}" for role, count in result.channels_by_role.items())
    print(f"  max secure channels per node: {result.max_channels_per_node:,} ({roles})")
    if result.configuration.batch_sizes is not None:
        from dpcomm.calibration import describe_batches

        print(f"  batches per {cluster}: {describe_batches(result.configuration.batch_sizes)}")
    print(
        f"  sources recruited: S_t = {result.num_sources:,} ({result.extra_consents:,} extra "
        f"consents), expected utility {result.utility:.1%}"
    )


def _print_run_command(
    command: str | None, clusters: int, *, aggregate: bool, query: bool, release: bool
) -> None:
    """The ``dpcomm run`` command of the chosen configuration, and what it runs on."""
    if command is None:
        print(
            f"No synthetic query has {clusters} grouping sets: run your own query "
            "over a table of S_t rows with the countermeasure above (dpcomm run aggregate)."
        )
        return
    print("Run it:")
    print(f"  {command}")
    if query:
        print(
            "  (the same query over a table of another size gets other batches: the run "
            "refuses it if its ε"
            + (" with the release's" if release else "")
            + " exceeds --target-epsilon)"
        )
    elif aggregate:
        print(
            "  (any table of S_t rows and query with these grouping sets gives the same "
            "batches and ε: replace --synthetic and --sql by --data and your query)"
        )
    else:
        print(
            "  (add --dataset with at least S_t points: the first S_t are the sources; "
            "another number of sources changes the batches, and --target-epsilon refuses "
            "a run whose ε would exceed the target)"
        )


def _print_pareto(result: PlannerResult, limit: int) -> None:
    """At most ``limit`` rows of the Pareto front, the chosen configuration marked."""
    shown = _spread(result.pareto, limit)
    print(
        f"Pareto front over (network load, channels, extra consents): {len(result.pareto)} of "
        f"{result.num_candidates} feasible configurations"
        + (
            f", {len(shown)} shown (--pareto-rows N, --json for all)"
            if len(shown) < len(result.pareto)
            else ""
        )
    )
    header = ["mechanism", "σ", "n", "d", "scramblers", "messages", "channels", "consents"]
    chosen = (result.network_load_messages, result.max_channels_per_node, result.extra_consents)
    rows = []
    for candidate in shown:
        c = candidate.configuration
        rows.append(
            [
                ("*" if candidate.costs == chosen else " ") + c.mechanism,
                f"{c.sampling_rate:g}",
                "-" if c.batch_size is None else f"{c.batch_size:,}",
                f"{c.num_dummies:,}",
                "-" if c.num_scramblers is None else f"{c.num_scramblers:,}",
                f"{candidate.network_load_messages:,}",
                f"{candidate.max_channels_per_node:,}",
                f"{candidate.extra_consents:,}",
            ]
        )
    print_table(header, rows, indent="  ")
    print("  (* = chosen)")


def _print_plan(
    args: argparse.Namespace,
    result: PlannerResult,
    query: tuple[str, str] | None = None,
    shape: PlanShape | None = None,
    calibration: Calibration | None = None,
) -> None:
    """The planner's answer as text: the request, the choice, its command, the Pareto front."""
    request = result.request
    if request is None:
        raise InvalidParameterError("result", "a planner's answer with its request", result)
    aggregate = request.workload == "aggregate"
    _print_request(result, query, shape, calibration)
    _print_chosen(result, request.num_clusters, "grouping set" if aggregate else "iteration")
    command = run_command(result, query, calibration)
    if calibration is not None:
        _print_split(calibration)
    print()
    _print_run_command(
        command,
        request.num_clusters,
        aggregate=aggregate,
        query=query is not None,
        release=calibration is not None,
    )
    print()
    _print_pareto(result, args.pareto_rows)


#: An axis of the Pareto plot is logarithmic when its values span at least this ratio.
LOG_AXIS_RATIO = 10.0


def pareto_axis_scale(values: list[int] | list[float]) -> str:
    """``"log"`` when the values span a ratio of at least `LOG_AXIS_RATIO`, else ``"linear"``.

    A log axis over a narrow range (say 199 to 200) only has ticks like ``1.992×10²``.
    """
    low, high = min(values), max(values)
    return "log" if low > 0 and high / low >= LOG_AXIS_RATIO else "linear"


def _format_axis(axes: Any, which: str, values: list[int] | list[float]) -> None:
    """Axis ``which`` (x or y): log or linear, linear ticks as integers with separators."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    if pareto_axis_scale(values) == "log":
        (axes.set_xscale if which == "x" else axes.set_yscale)("log")
        return
    axis = axes.xaxis if which == "x" else axes.yaxis
    axis.set_major_locator(MaxNLocator(nbins=5, integer=True))
    axis.set_major_formatter(FuncFormatter(lambda value, _position: f"{value:,.0f}"))


def plot_pareto(result: PlannerResult, path: str | Path) -> Path:
    """Draw the Pareto front (network load vs max channels, colour = extra consents) to a PNG.

    Each axis is logarithmic only over a wide range (`pareto_axis_scale`); the colour bar
    is drawn when the extra consents differ between points (else the legend gives the value).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = [c.network_load_messages for c in result.pareto]
    channels = [c.max_channels_per_node for c in result.pareto]
    consents = [c.extra_consents for c in result.pareto]
    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    try:
        varied = len(set(consents)) > 1
        points = axes.scatter(
            loads,
            channels,
            c=consents if varied else None,
            cmap="viridis" if varied else None,
            s=36,
            zorder=2,
            label=None if varied else f"extra consents: {consents[0]:,} at every point",
        )
        axes.scatter(
            [result.network_load_messages],
            [result.max_channels_per_node],
            s=160,
            facecolors="none",
            edgecolors="red",
            linewidths=1.5,
            zorder=3,
            label="chosen (minimal load)",
        )
        if varied:
            figure.colorbar(points, ax=axes, label="extra consents")
        axes.set_xlabel("network load (messages)")
        axes.set_ylabel("max secure channels per node")
        _format_axis(axes, "x", loads)
        _format_axis(axes, "y", channels)
        axes.margins(0.08)
        axes.set_title(
            f"Pareto front, ε = {result.epsilon:.3g}, δ = {result.delta:.2g}", fontsize=10
        )
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize=8)
        figure.tight_layout()
        output = Path(path)
        figure.savefig(output, dpi=120)
    finally:
        plt.close(figure)
    return output


def command_plan(args: argparse.Namespace) -> int:
    """``dpcomm plan``."""
    from dpcomm.api import query_shape
    from dpcomm.calibration import plan_countermeasures
    from dpcomm.calibration.advice import PYTHON_PARAMETER_NAMES
    from dpcomm.cli.execute import release_options

    if args.plot is not None:
        require_extra("figures", "--plot", ("matplotlib",))
        plot = check_writable_file("--plot", args.plot)
        if plot.suffix.lower() not in PLOT_FORMATS:
            raise InvalidParameterError("--plot", f"a {', '.join(PLOT_FORMATS)} file", args.plot)
    if args.release is None:
        release_options(args)  # refuses every release option without it
    elif args.sql is None or args.data is None:
        raise InvalidParameterError(
            "--release", "given with --sql and --data (the query's aggregates)", args.release
        )
    else:
        return _plan_release(args)
    query: tuple[str, str] | None = None
    shape: PlanShape | None = None
    sources, grouping_sets = args.sources, args.grouping_sets
    targets, free, consents = args.num_targets, 0, args.max_extra_consents
    if args.sql is not None or args.data is not None:
        if args.sql is None or args.data is None:
            missing = "--sql" if args.sql is None else "--data"
            raise InvalidParameterError(missing, "given with the other (the query's table)", None)
        for flag, value in (
            ("--sources", args.sources),
            ("--grouping-sets", args.grouping_sets),
            ("--iterations", args.iterations),
        ):
            if value is not None:
                raise InvalidParameterError(
                    flag, "not given with --sql (read from the query)", value
                )
        shape = query_shape(args.sql, args.data, num_targets=args.num_targets)
        query = (args.sql, args.data)
        sources, grouping_sets, targets = shape.num_sources, shape.num_clusters, shape.num_targets
        free = len(shape.free_clusters)
        consents = 0 if consents is None else consents  # the table is fixed
    else:
        if args.sources is None:
            raise InvalidParameterError(
                "--sources", "S, the tuples used (or --sql and --data)", None
            )
        if args.num_targets is None:
            raise InvalidParameterError("--targets", "T, the targets per cluster", None)
        if (args.grouping_sets is None) == (args.iterations is None):
            raise InvalidParameterError(
                "--grouping-sets/--iterations",
                "exactly one of them (or --sql and --data)",
                "both" if args.grouping_sets is not None else "neither",
            )
    result = plan_countermeasures(
        num_sources=sources,
        num_targets=targets,
        grouping_sets=grouping_sets,
        iterations=args.iterations,
        free_grouping_sets=free,
        max_extra_consents=consents,
        parameter_names={name: args.flags[name] for name in PYTHON_PARAMETER_NAMES},
        **_limits(args),
    )
    return _show_plan(args, result, query, shape)


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """The (ε, δ) and cost limits of `_add_limit_options`, and progress, as keyword arguments.

    What `plan_countermeasures` and `dpcomm.calibrate` take alike (``--max-extra-consents``
    is read by each caller: its default depends on the query).
    """
    return {
        "epsilon": args.epsilon,
        "delta": args.delta,
        "max_channels": args.max_channels,
        "min_utility": args.min_utility,
        "max_messages": args.max_messages,
        "progress": show_progress(args),
    }


def _plan_release(args: argparse.Namespace) -> int:
    """``dpcomm plan --sql --data --release``: `dpcomm.calibrate` with a release."""
    from dpcomm.api import calibrate
    from dpcomm.cli.execute import parse_bounds, parse_keys

    calibration = calibrate(
        args.sql,
        args.data,
        num_targets=args.num_targets,
        max_extra_consents=args.max_extra_consents,
        **_limits(args),
        release=args.release,
        bounds=parse_bounds(args.bounds),
        keys=parse_keys(args.keys),
        key_selection_delta=args.key_selection_delta,
    )  # its errors name the flags (dpcomm.cli.output.with_flags)
    query = (args.sql, args.data)
    return _show_plan(args, calibration.details, query, calibration.shape, calibration)


def _show_plan(
    args: argparse.Namespace,
    result: PlannerResult,
    query: tuple[str, str] | None,
    shape: PlanShape | None,
    calibration: Calibration | None = None,
) -> int:
    """Print (or draw) the planner's answer."""
    if args.plot is not None:
        plot_pareto(result, args.plot)
    if args.json:
        print(json.dumps(plan_json(result, query, shape, calibration), indent=2))
        return 0
    _print_plan(args, result, query, shape, calibration)
    if args.plot is not None:
        print(f"Pareto front drawn to {args.plot}")
    return 0


def headline_json(rows: tuple[HeadlineRow, ...]) -> list[dict[str, Any]]:
    """The headline rows as JSON objects."""
    return [
        {
            "method": row.method,
            "label": row.label,
            "status": row.status,
            "num_dummies": row.num_dummies,
            "num_scramblers": row.num_scramblers,
            "num_sources": row.num_sources,
            "batch_sizes": list(row.batch_sizes),
            "messages": row.messages,
            "nonprivate_messages": row.nonprivate_messages,
            "overhead": row.overhead,
            "note": row.note,
        }
        for row in rows
    ]


def command_headline(args: argparse.Namespace) -> int:
    """``dpcomm headline``."""
    from dpcomm.experiments.headline import headline_markdown, headline_rows

    rows = headline_rows(monte_carlo_samples=args.monte_carlo_samples, seed=args.seed)
    if args.json:
        print(json.dumps(headline_json(rows), indent=2))
    else:
        print(headline_markdown(rows))
    return 0


#: The plan's counts given by hand: flag, largest value, help.
_SHAPE_COUNTS = (
    ("--sources", MAX_SOURCES, "S, real tuples the computation must use (by hand, without --sql)"),
    (
        "--targets",
        MAX_COUNT,
        "T, targets (compute nodes) per cluster (required by hand; with --sql, default 20)",
    ),
    ("--grouping-sets", MAX_COUNT, "G, grouping sets (Aggregate; exclusive with --iterations)"),
    ("--iterations", MAX_COUNT, "I, iterations (K-means with K = T)"),
)


def _add_shape_options(parser: argparse.ArgumentParser) -> None:
    """The plan's shape: from a query (``--sql``, ``--data``) or by hand (S, T, G or I)."""
    parser.add_argument(
        "--sql",
        help="an Aggregate query: its plan's shape is read from it, over --data",
    )
    parser.add_argument(
        "--data",
        metavar="FILE",
        help="a CSV or Parquet file, the query's table (S = its rows)",
    )
    for flag, most, text in _SHAPE_COUNTS:
        # --targets is stored as num_targets, the name the API gives T.
        named: dict[str, Any] = (
            {"dest": "num_targets", "metavar": "TARGETS"} if flag == "--targets" else {}
        )
        parser.add_argument(flag, type=bounded_int(None, most), help=text, **named)


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    """The (ε, δ) the plan must reach and the limits on its costs and utility."""
    parser.add_argument("--epsilon", type=float, required=True, help="ε of the whole plan (> 0)")
    parser.add_argument(
        "--delta", type=float, required=True, help="δ of the whole plan, in [0, 1) (0: a pure plan)"
    )
    parser.add_argument("--max-channels", type=int, help="k, most secure channels per node")
    parser.add_argument(
        "--max-extra-consents",
        type=int,
        help="c, most extra sources recruited (S_t - S; default 0 with --data, else no limit)",
    )
    parser.add_argument(
        "--min-utility",
        type=float,
        default=1.0,
        help="u, least expected tuples used / S when --max-extra-consents limits S_t (default 1.0)",
    )
    parser.add_argument(
        "--max-messages",
        type=bounded_int(1, None),
        help="most messages in the plan (network load, dummies included)",
    )


def _add_release_options(parser: argparse.ArgumentParser) -> None:
    """``--release`` and its options, as ``dpcomm run aggregate`` takes them."""
    parser.add_argument(
        "--release",
        choices=["laplace", "gaussian"],
        default=None,
        help="with --sql and --data: the result is released with noise too (as `dpcomm run "
        "aggregate --release`); (ε, δ) is then split between the traffic and the release for "
        "the least expected relative error of the released values",
    )
    add_release_scope_options(
        parser,
        keys_help="with --release: the public values of grouping column COL (repeatable)",
        selection_help="with --release: grouping sets whose columns have no --keys get their "
        "keys by OpenDP's threshold at δ = D, set aside from --delta first (e.g. 1e-6)",
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    """What is printed or drawn: ``--json``, ``--plot``, ``--pareto-rows``, progress."""
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the Pareto front to a PNG")
    parser.add_argument(
        "--pareto-rows",
        type=non_negative_int,
        default=20,
        help="Pareto rows to print (default 20)",
    )
    add_progress_options(parser)


def _add_headline_command(commands: Any) -> None:
    """Register ``headline``: the dummies needed for ε ≤ 1 per accounting method."""
    headline = commands.add_parser(
        "headline",
        help="dummies needed for ε ≤ 1 in the paper's scenario, per accounting method",
        description=(
            "The headline table: S = 10,000 tuples used, T = 20, δ = 1e-4, scramblers n = 100, "
            "σ = 0.2; for each accounting method the least d per scrambler for ε ≤ 1, the "
            "scramblers, the messages of the cluster and the overhead against no countermeasure."
        ),
    )
    headline.add_argument("--json", action="store_true", help="print the rows as JSON")
    headline.add_argument(
        "--mc-samples",
        dest="monte_carlo_samples",
        metavar="MC_SAMPLES",
        type=int,
        default=5000,
        help="R of Algorithm 2 (default 5000)",
    )
    headline.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the Monte Carlo estimate"
    )
    headline.set_defaults(handler=command_headline)


def add_plan_commands(commands: Any) -> None:
    """Register ``plan`` and ``headline`` on the top-level subparsers."""
    plan = commands.add_parser(
        "plan",
        help="the cheapest countermeasure meeting (ε, δ) under channel and consent limits",
        description=PLAN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_shape_options(plan)
    _add_limit_options(plan)
    _add_release_options(plan)
    _add_output_options(plan)
    plan.set_defaults(handler=command_plan)
    _add_headline_command(commands)
