"""Shared by ``run`` and ``deploy``: execute the program of the options, print its report.

The countermeasure options of :func:`add_countermeasure_options`, the Aggregate or K-means
program of the data options, one run on an engine (in memory unless given) and its report as
text or as the one JSON document of every run.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from dpcomm.cli.output import (
    add_progress_options,
    non_negative_float,
    print_table,
    show_progress,
)
from dpcomm.data import diabetes_table, load_image_dataset, read_table, synthetic_table
from dpcomm.engine.engines import Engine
from dpcomm.engine.report import EfficiencyReport, PrivacyReport, Report
from dpcomm.engine.runs import AggregateRun, KMeansRun, run_aggregate, run_kmeans
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import make_countermeasure
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_TEXT_BYTES, AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram


def countermeasure_from_options(
    args: argparse.Namespace, defaults: dict[str, float]
) -> Countermeasure:
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
        help=(
            "δ of the whole plan (default 1e-4): the clusters on a data path compose by PLD at "
            "this δ, or by Theorem 2 with δ split among them, whichever gives the smaller ε"
        ),
    )
    group.add_argument(
        "--target-epsilon",
        type=non_negative_float,
        metavar="E",
        help="warn when the plan's ε exceeds E (e.g. the table's size changed the batches)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="seed of every draw, for a reproducible run (default: fresh operating-system "
        "entropy; a seeded run is not private against whoever knows the seed)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print one JSON document (null is SQL NULL; NaN and ±∞ are "NaN", "inf", '
        '"-inf"; DECIMAL values are exact strings)',
    )
    add_progress_options(parser)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):  # ∞ prints as inf
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}f}"
    if isinstance(value, Decimal):
        return format(value, "f")  # as DuckDB prints it: 0.0000000001, not 1E-10
    if isinstance(value, datetime.time | datetime.datetime) and "." in str(value):
        return str(value).rstrip("0")  # 01:02:03.25, as DuckDB prints it
    return str(value)


def _print_rows(rows: list[dict[str, Any]], limit: int) -> None:
    if not rows:
        print("  (no rows)")
        return
    columns = list(rows[0])
    print_table(columns, [[_fmt(row[c]) for c in columns] for row in rows[:limit]], indent="  ")
    if len(rows) > limit:
        print(f"  ... {len(rows) - limit} more rows (--rows N to show more, --json for all)")


def _composition(privacy: PrivacyReport) -> str:
    """How the plan's ε was composed, with the other composition's value beside it."""
    basic = (
        f"Theorem 2 sum ε = {_fmt(privacy.epsilon_basic)} "
        f"(each cluster at δ = {privacy.delta_per_cluster:.3g})"
    )
    if privacy.epsilon_pld is None:
        return basic
    return f"PLD composition ε = {_fmt(privacy.epsilon_pld)}; {basic}"


def _print_privacy(privacy: PrivacyReport) -> None:
    print("Privacy (what an observer of all traffic learns):")
    print(
        f"  plan: ε = {_fmt(privacy.epsilon)}, δ = {privacy.delta:.3g}  "
        f"(the worst data path: {_composition(privacy)})"
    )
    if privacy.epsilon_lower_bound is not None:
        print(
            "  certified lower bound on the plan's ε at this δ: "
            f"{_fmt(privacy.epsilon_lower_bound)}"
        )
    dependent = [c for c in privacy.clusters if c.data_dependent]
    independent = [c for c in privacy.clusters if not c.data_dependent]
    for cluster in dependent:
        parts = ", ".join(
            f"{p.instances}×n={p.batch_size}: ε={_fmt(p.epsilon)}"
            for p in cluster.parts
            if p.batch_size is not None
        )
        detail = f" [{parts}]" if parts and len(cluster.parts) > 1 else ""
        print(
            f"  cluster {cluster.cluster}: T={cluster.num_targets}, "
            f"{cluster.num_senders:,} senders, {cluster.countermeasure}: "
            f"ε = {_fmt(cluster.epsilon)} ({cluster.method}){detail}"
        )
        if cluster.why_infinite:
            print(f"    why ε = ∞: {cluster.why_infinite}")
    if independent:
        print(f"  {len(independent)} data-independent clusters (compute -> result, ...): ε = 0")
    for caveat in privacy.caveats:
        print(f"  note: {caveat}")
    for note in privacy.notes:
        print(f"  note: {note}")


def _print_efficiency(efficiency: EfficiencyReport) -> None:
    print("Efficiency (against the same plan without countermeasures):")
    print(
        f"  messages: {efficiency.messages:,} vs {efficiency.messages_nonprivate:,} "
        f"(×{efficiency.message_overhead:.2f}; {efficiency.dummy_messages:,} dummies); "
        f"bytes: {efficiency.bytes:,} ({efficiency.frame_bytes} B frames)"
    )
    print(
        f"  secure channels per node: max {efficiency.max_channels_per_node:,}, "
        f"mean {efficiency.mean_channels_per_node:.2f} "
        f"(non-private: max {efficiency.max_channels_per_node_nonprivate:,}, "
        f"mean {efficiency.mean_channels_per_node_nonprivate:.2f})"
    )
    roles = ", ".join(f"{k} {v:,}" for k, v in efficiency.max_channels_by_role.items())
    print(f"  max channels by role: {roles}")
    batches = "; ".join(
        f"{flow}: {'/'.join(str(s) for s in sizes)}"
        for flow, sizes in efficiency.batch_sizes.items()
    )
    print(
        f"  scramblers: {efficiency.num_scramblers:,}"
        + (f" (sources per scrambler: {batches})" if batches else "")
        + f"; extra consents to keep the non-private utility: {efficiency.extra_consents:,}"
    )
    print(
        f"  {efficiency.engine} engine: {efficiency.seconds:.2f} s "
        f"({efficiency.messages_per_second:,.0f} messages/s)"
    )


def _print_seed(report: Report[Any]) -> None:
    if report.seed is None:
        print("Randomness: fresh operating-system entropy (no seed)")
    else:
        print(
            f"Randomness: seed {report.seed} (reproducible; not private against whoever knows it)"
        )


def print_aggregate(outcome: AggregateRun, source: str, rows: int) -> None:
    """The text report of an Aggregate run (any engine)."""
    report = outcome.report
    print(f"{report.query}; data: {source}; engine: {report.engine}")
    print(f"Countermeasure: {report.countermeasure}")
    _print_seed(report)
    print()
    what = "exact over" if report.estimate is None else "estimated from"
    print(
        f"Result ({len(outcome.rows)} rows): {what} the tuples that reached their compute "
        "node, not differentially private (the countermeasures hide the traffic, not the values)"
    )
    if report.estimate is not None:
        print(f"  estimates: {report.estimate}")
    _print_rows(outcome.rows, rows)
    print()
    _print_privacy(report.privacy)
    print()
    utility = report.utility
    print("Utility:")
    for item in utility.grouping_sets:
        print(
            f"  {item.grouping_set}: {item.tuples_used:,} of {utility.sources:,} tuples "
            f"used ({item.tuples_used_fraction:.1%}); {item.groups_missing} of "
            f"{item.groups} groups missing"
        )
    for column, error in utility.mean_relative_error.items():
        print(
            f"  {column}: mean relative error {error:.4f} "
            f"(max {utility.max_relative_error[column]:.4f}) against the non-private result"
        )
    print()
    _print_efficiency(report.efficiency)


def print_kmeans(outcome: KMeansRun, dataset: str) -> None:
    """The text report of a K-means run (any engine)."""
    report = outcome.report
    utility = report.utility
    tested = "" if utility.test_points is None else f", {utility.test_points:,} test points"
    print(
        f"{report.query} on {dataset}: {utility.sources:,} sources{tested}; engine: {report.engine}"
    )
    print(f"Countermeasure: {report.countermeasure}")
    _print_seed(report)
    print()
    if utility.rand_index is not None and utility.rand_index_nonprivate is not None:
        print(
            f"Rand index on the test set: {utility.rand_index:.4f} "
            f"(non-private K-means from the same start: {utility.rand_index_nonprivate:.4f})"
        )
    used = ", ".join(f"{u:,}" for u in utility.tuples_used_per_iteration)
    print(f"Tuples used per iteration: {used} ({utility.tuples_used_fraction:.1%} on average)")
    print()
    _print_privacy(report.privacy)
    print()
    _print_efficiency(report.efficiency)


def json_document(outcome: AggregateRun | KMeansRun) -> str:
    """The one JSON shape of every run: ``{"result": ..., "report": ...}``."""
    return json.dumps(outcome.to_dict(), indent=2)


def aggregate_program(
    args: argparse.Namespace, *, partitioned: bool = False
) -> tuple[AggregateProgram, str, Any]:
    """The Aggregate program of ``--sql`` over ``--data``, ``--synthetic`` or the diabetes table.

    With ``partitioned`` (the Dask engine), Parquet files and synthetic rows are not read here:
    the program is bound to their schema and the rows are read by the workers, partition by
    partition. Returns the program, a description of the data and the row source (or None).
    """
    from dpcomm.data.partitioned import ParquetRows, SyntheticRows

    rows: Any = None
    if args.data is not None:
        path = Path(args.data)
        if path.is_dir() or path.suffix.lower() == ".parquet":
            rows = ParquetRows(path)
            source = f"{args.data} ({rows.num_rows:,} rows)"
        else:
            table = read_table(args.data)
            source = args.data
    elif args.synthetic is not None:
        source = f"synthetic ({args.synthetic:,} rows, {args.distribution})"
        if partitioned:
            rows = SyntheticRows(
                args.synthetic, seed=args.data_seed, distribution=args.distribution
            )
        else:
            table = synthetic_table(
                num_rows=args.synthetic, distribution=args.distribution, seed=args.data_seed
            )
    else:
        table = diabetes_table()
        source = "embedded diabetes table (synthetic patients)"
    options = {
        "num_compute_nodes": args.compute_nodes,
        "max_groups": args.max_groups,
        "max_text_bytes": args.max_text_bytes,
    }
    if rows is not None and partitioned:
        return AggregateProgram.from_row_source(args.sql, rows, **options), source, rows
    if rows is not None:
        table = rows.read(0, rows.num_rows)
    return AggregateProgram.from_sql(args.sql, table, **options), source, None


def add_public_bounds_options(parser: argparse.ArgumentParser) -> None:
    """``--max-groups`` and ``--max-text-bytes``: public sizes that the data must fit."""
    parser.add_argument(
        "--max-groups",
        type=int,
        metavar="G",
        help="public bound on the groups one compute node outputs; every output is padded to "
        "it so that its size does not depend on the data (default: the number of sources, "
        "which nothing exceeds; a smaller bound makes outputs smaller and fails the run, "
        "in every engine, if a compute node has more groups)",
    )
    parser.add_argument(
        "--max-text-bytes",
        type=int,
        default=DEFAULT_TEXT_BYTES,
        metavar="B",
        help="public bound on the UTF-8 bytes of a text value the query reads; every payload "
        "is as wide as if each text value had B bytes, so that the frame size does not depend "
        f"on the data (default {DEFAULT_TEXT_BYTES}; a longer value is refused)",
    )


#: Builds the engine of a run from the options (the memory engine when there is none).
EngineOfOptions = Callable[[argparse.Namespace, Any], Engine]


def _run_options(
    args: argparse.Namespace, engine: EngineOfOptions | None, rows: Any = None
) -> dict[str, Any]:
    """The arguments of :func:`run_aggregate` and :func:`run_kmeans` that the options set.

    ``rows``: the row source an engine reads partition by partition (or None).
    """
    return {
        "delta": args.delta,
        "seed": args.seed,
        "progress": show_progress(args),
        "engine": None if engine is None else engine(args, rows),
        "target_epsilon": args.target_epsilon,
    }


def execute_aggregate(
    args: argparse.Namespace, defaults: dict[str, float], engine: EngineOfOptions | None = None
) -> tuple[AggregateRun, str]:
    """Run the Aggregate program of the options on their engine; also describe its data."""
    countermeasure = countermeasure_from_options(args, defaults)
    partitioned = getattr(args, "engine", "memory") == "dask"
    program, source, rows = aggregate_program(args, partitioned=partitioned)
    return run_aggregate(program, countermeasure, **_run_options(args, engine, rows)), source


def execute_kmeans(
    args: argparse.Namespace, defaults: dict[str, float], engine: EngineOfOptions | None = None
) -> tuple[KMeansRun, str]:
    """Run K-means on the first ``--sources`` training points on the options' engine.

    Returns the run and the dataset's name.
    """
    countermeasure = countermeasure_from_options(args, defaults)
    dataset = load_image_dataset(args.dataset)
    points = dataset.train_images
    if args.sources is not None:
        if not 1 <= args.sources <= len(points):
            raise InvalidParameterError(
                "--sources",
                f"an integer in [1, {len(points)}] (the training points of {args.dataset})",
                args.sources,
            )
        points = points[: args.sources]
    program = KMeansProgram(points, args.k, args.iterations, seed=args.data_seed)
    outcome = run_kmeans(
        program,
        countermeasure,
        test_points=dataset.test_images,
        test_labels=dataset.test_labels,
        **_run_options(args, engine),
    )
    return outcome, dataset.name


def print_run(args: argparse.Namespace, outcome: AggregateRun | KMeansRun, data: str) -> None:
    """The run's JSON document with ``--json``, else its text report (``data`` names the data)."""
    if args.json:
        print(json_document(outcome))
    elif isinstance(outcome, AggregateRun):
        print_aggregate(outcome, data, args.rows)
    else:
        print_kmeans(outcome, data)
