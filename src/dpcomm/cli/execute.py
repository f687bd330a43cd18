"""Shared by ``run`` and ``deploy``: the options, one call into the front door, the report.

``run aggregate|kmeans`` and ``deploy local aggregate|kmeans`` take the same data, program and
countermeasure options with the same defaults (`add_aggregate_options`,
`add_kmeans_options`, `add_countermeasure_options`) and call the functions Python
users call, `dpcomm.run_sql` and `dpcomm.kmeans`, on the engine their options name
(`dpcomm.engine.engines.make_engine`): the same flags and seed give the same run in every
command. The report prints as text or as the one JSON document of every run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from dpcomm.api import DEFAULT_DELTA, kmeans, run_sql
from dpcomm.budget.budget import Budget
from dpcomm.cli.output import (
    add_progress_options,
    bounded_int,
    check_writable_file,
    non_negative_float,
    non_negative_int,
    print_table,
    same_file,
    show_progress,
    within,
)
from dpcomm.data import diabetes_table, load_image_dataset, read_points, read_table
from dpcomm.data.points import TablePoints
from dpcomm.engine.engines import Engine
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.pipeline.report import EfficiencyReport, PrivacyReport, Report
from dpcomm.pipeline.runs import AggregateRun, KMeansRun
from dpcomm.pipeline.utility import ReleaseUtility
from dpcomm.plan.codec import countermeasure_from_arguments
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES
from dpcomm.queries.kmeans import INIT_METHODS
from dpcomm.validation import MAX_COUNT

#: Defaults of the countermeasure options, per use case (the paper's settings, Section 5),
#: shared by ``run`` and ``deploy``.
AGGREGATE_DEFAULTS = {"sampling": 0.2, "batch": 100, "dummies": 50}
KMEANS_DEFAULTS = {"sampling": 0.9, "batch": 100, "dummies": 50}
#: Most rows of a synthetic table (its rows are drawn where they are read, by ranges).
MAX_ROWS = 10**12
#: K-means' defaults: K centroids, I iterations, on the embedded digits.
KMEANS_CENTROIDS = 10
KMEANS_ITERATIONS = 10
KMEANS_DATASET = "mnist5k"


def countermeasure_from_options(
    args: argparse.Namespace, defaults: dict[str, float]
) -> Countermeasure:
    """The countermeasure of the options; unset options take the use case's defaults."""
    return countermeasure_from_arguments(
        mechanism=args.mechanism,
        sampling=args.sampling,
        batch=args.batch,
        dummies=args.dummies,
        capped=args.capped,
        defaults=defaults,
    )


def add_countermeasure_options(
    parser: argparse.ArgumentParser,
    defaults: dict[str, float],
    *,
    kmeans_defaults: dict[str, float] | None = None,
) -> None:
    """The countermeasure options, named as in ``dpcomm account``.

    ``kmeans_defaults``: K-means' own defaults, for a command running either use case.
    """

    def default(name: str, kind: type = float) -> str:
        shown = f"default {kind(defaults[name])}"
        if kmeans_defaults is not None and kmeans_defaults[name] != defaults[name]:
            shown += f", K-means {kind(kmeans_defaults[name])}"
        return shown

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
        help=f"σ, sampling rate in [0, 1] ({default('sampling')}; 0 for none)",
    )
    group.add_argument(
        "--batch",
        type=int,
        help=f"n, sources per scrambler (scrambler only; {default('batch', int)})",
    )
    group.add_argument(
        "--dummies",
        type=int,
        help=f"d, dummies per scrambler ({default('dummies', int)}) or flooding dummies per "
        "source (local; default 0)",
    )
    group.add_argument(
        "--capped", action="store_true", help="capped scramblers S̄_d (at most n per target)"
    )
    group.add_argument(
        "--delta",
        type=float,
        default=DEFAULT_DELTA,
        help=(
            f"δ of the whole plan (default {DEFAULT_DELTA:g}): the clusters on a data path "
            "compose by PLD at this δ, or by Theorem 2 with δ split among them, whichever "
            "gives the smaller ε"
        ),
    )
    group.add_argument(
        "--target-epsilon",
        type=non_negative_float,
        metavar="E",
        help="refuse, before running, a plan whose ε exceeds E (e.g. the table's size changed "
        "the batches; with --release, the ε of traffic and release together)",
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


def _key(value: Any, sql_type: str) -> str:
    """A grouping key as DuckDB prints it: 2007, not 2,007 (years, identifiers, zip codes).

    Integers without thousands separators, booleans as ``true``/``false``, a DOUBLE at its
    shortest exact form (``0.1``, ``1e+20``, ``3.0``) and a FLOAT at float32's (``0.1``, not
    ``0.10000000149011612``); any other value as `_fmt` prints it (NULL, text, DECIMAL,
    dates and times are already DuckDB's).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(np.float32(value)) if sql_type.upper() in {"FLOAT", "REAL"} else repr(value)
    return _fmt(value)


def _print_rows(
    rows: list[dict[str, Any]], limit: int, keys: Mapping[str, str] | None = None
) -> None:
    """The first ``limit`` rows as a table; ``keys``: grouping column -> SQL type, see `_key`.

    Grouping keys print as DuckDB prints them; aggregate values keep the report's formatting
    (thousands separators, four decimals).
    """
    if not rows:
        print("  (no rows)")
        return
    columns = list(rows[0])
    types = keys or {}
    cells = [
        [_key(row[c], types[c]) if c in types else _fmt(row[c]) for c in columns]
        for row in rows[:limit]
    ]
    print_table(columns, cells, indent="  ")
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
        f"(×{efficiency.message_overhead:.2f}"
        + ("" if efficiency.dummy_messages is None else f"; {efficiency.dummy_messages:,} dummies")
        + "); "
        f"bytes: {efficiency.bytes:,} ({efficiency.frame_bytes} B frames)"
    )
    print(
        f"  secure channels per node: max {efficiency.max_channels_per_node:,}, "
        f"mean {efficiency.mean_channels_per_node:.2f}"
        + (
            ""
            if efficiency.max_channels_per_node_nonprivate is None
            or efficiency.mean_channels_per_node_nonprivate is None
            else f" (non-private: max {efficiency.max_channels_per_node_nonprivate:,}, "
            f"mean {efficiency.mean_channels_per_node_nonprivate:.2f})"
        )
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
    if efficiency.seconds is None or efficiency.messages_per_second is None:
        print(f"  {efficiency.engine} engine (its timing is withheld under a noisy release)")
    else:
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


def _print_release(release: Any) -> None:
    """The release's noise and the guarantee against an observer of traffic and release."""
    print(
        f"Release ({release.mechanism}, {release.keys}): ε = {release.epsilon:.4g}, "
        f"δ = {release.delta:g} against a reader of the result"
    )
    composed = "n/a" if release.composed_epsilon is None else f"{release.composed_epsilon:.4f}"
    print(
        f"  traffic and release together: ε = {release.epsilon_total:.4f} at "
        f"δ = {release.composed_delta:g} (PLD composition {composed}; "
        f"sum {release.summed_epsilon:.4f})"
    )
    for item in release.aggregates:
        print(
            f"  {item.aggregate}: {item.noise} noise, scale {item.scale:.4g} "
            f"(sensitivity L1 {item.sensitivity_l1:g}, L2 {item.sensitivity_l2:.4g}); "
            f"95% of the noise within ±{item.half_width_95:.4g}"
        )
    if release.key_selection is not None:
        print(f"  {release.key_selection.describe()}")


def _print_expected_utility(utility: ReleaseUtility) -> None:
    """A release's expected utility: public quantities only, never a comparison with the data."""
    print("Utility (expected, from public quantities; the release is not compared with the data):")
    for name, p in utility.delivery_probability.items():
        bias = utility.sampling_relative_bias[name]
        text = (
            f"  {name}: delivery probability P = {p:.4g}, about "
            f"{utility.expected_tuples_used[name]:,.0f} of {utility.sources:,} tuples used; "
            f"{utility.groups_released[name]:,} groups released"
        )
        if bias > 0:
            text += f"; COUNT and SUM expected {bias:.1%} below their value over every tuple"
        print(text)
    for label, deviation in utility.noise_standard_deviation.items():
        print(
            f"  {label}: noise standard deviation {deviation:.4g} "
            f"(95% within ±{utility.noise_half_width_95[label]:.4g})"
        )


def print_aggregate(outcome: AggregateRun, source: str, rows: int) -> None:
    """The text report of an Aggregate run (any engine)."""
    report = outcome.report
    print(f"{report.query}; data: {source}; engine: {report.engine}")
    print(f"Countermeasure: {report.countermeasure}")
    _print_seed(report)
    print()
    if report.release is not None:
        print(f"Result ({len(outcome.rows)} rows): {report.result_semantics}")
        if report.estimate is not None:
            print(f"  estimates: {report.estimate.describe()}")
    elif report.estimate is None:
        print(
            f"Result ({len(outcome.rows)} rows): exact over the tuples that reached their "
            "compute node, not differentially private (the countermeasures hide the traffic, "
            "not the values)"
        )
    else:
        print(f"Result ({len(outcome.rows)} rows): {report.result_semantics}")
        print(f"  estimates: {report.estimate.describe()}")
    _print_rows(outcome.rows, rows, outcome.program.query.result_key_types)
    print()
    _print_privacy(report.privacy)
    if report.release is not None:
        _print_release(report.release)
    print()
    utility = report.utility
    if isinstance(utility, ReleaseUtility):
        _print_expected_utility(utility)
        print()
        _print_efficiency(report.efficiency)
        return
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
            f"(max {utility.max_relative_error[column]:.4f}) against the exact result"
        )
    print()
    _print_efficiency(report.efficiency)


def print_kmeans(outcome: KMeansRun, dataset: str) -> None:
    """The text report of a K-means run (any engine)."""
    report = outcome.report
    utility = report.utility
    tested = "" if utility.test_points is None else f", {utility.test_points:,} labelled points"
    print(
        f"{report.query} on {dataset}: {utility.sources:,} sources{tested}; engine: {report.engine}"
    )
    print(f"Countermeasure: {report.countermeasure}")
    _print_seed(report)
    print()
    if utility.rand_index is not None:
        print(
            f"Clusters of the {utility.test_points:,} labelled points against their labels "
            "(non-private K-means from the same start):"
        )
        for label, private, nonprivate in (
            ("Rand index", utility.rand_index, utility.rand_index_nonprivate),
            (
                "adjusted Rand index",
                utility.adjusted_rand_index,
                utility.adjusted_rand_index_nonprivate,
            ),
            (
                "normalized mutual information",
                utility.normalized_mutual_info,
                utility.normalized_mutual_info_nonprivate,
            ),
        ):
            print(f"  {label}: {private:.4f} ({nonprivate:.4f})")
    used = ", ".join(f"{u:,}" for u in utility.tuples_used_per_iteration)
    print(f"Tuples used per iteration: {used} ({utility.tuples_used_fraction:.1%} on average)")
    print()
    _print_privacy(report.privacy)
    print()
    _print_efficiency(report.efficiency)


def json_document(outcome: AggregateRun | KMeansRun) -> str:
    """The one JSON shape of every run: ``{"result": ..., "report": ...}``."""
    return json.dumps(outcome.to_dict(), indent=2)


def add_aggregate_options(
    parser: argparse.ArgumentParser, *, sql_required: bool = True, running: bool = True
) -> None:
    """The query and its data: ``--sql``, ``--data|--synthetic|--diabetes``, ``--targets``, ...

    ``running``: also ``--rows`` and ``--estimate`` (what a run prints).
    """
    parser.add_argument(
        "--sql",
        required=sql_required,
        help="SELECT ... FROM t GROUP BY ..." + ("" if sql_required else " (Aggregate)"),
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--data",
        help="a CSV or Parquet file; the FROM table is bound to it"
        + ("" if sql_required else " (K-means: the table whose --columns are the points)"),
    )
    source.add_argument(
        "--synthetic", type=bounded_int(1, MAX_ROWS), metavar="ROWS",
        help="synthetic table of ROWS (g1..g4 grouping codes, m1, m2 measures)",
    )  # fmt: skip
    source.add_argument(
        "--diabetes",
        action="store_true",
        help="the embedded diabetes table of the paper's running example (10,000 rows, columns "
        "A, B, I; the default)",
    )
    parser.add_argument(
        "--distribution",
        choices=["uniform", "zipf"],
        default="uniform",
        help="distribution of the synthetic grouping columns g1..g4",
    )
    parser.add_argument(
        "--targets",
        type=bounded_int(None, MAX_COUNT),
        default=DEFAULT_NUM_TARGETS,
        help=f"T, targets (compute nodes) per grouping set (default {DEFAULT_NUM_TARGETS})",
    )
    add_public_bounds_options(parser)
    if running:
        parser.add_argument(
            "--rows", type=non_negative_int, default=20, help="result rows to print (default 20)"
        )
        parser.add_argument(
            "--estimate",
            choices=["delivered", "unbiased"],
            default="delivered",
            help="delivered: the values over the tuples that arrived (default); unbiased: "
            "estimates over every tuple, COUNT and SUM divided by the known probability "
            "P = 1 − σ + σ/T that a tuple arrives, AVG their ratio, each with its standard "
            "error and 95%% interval (columns NAME (estimate), NAME (se), NAME (95%% low), "
            "NAME (95%% high)); groups that received no tuple are estimated as 0; MIN, MAX "
            "of the delivered tuples; with --release, from the released values, the "
            "intervals covering the noise too",
        )
        add_release_options(parser)


#: ε of a release without ``--release-epsilon``, δ of a Gaussian one without ``--release-delta``.
DEFAULT_RELEASE_EPSILON = 1.0
DEFAULT_RELEASE_DELTA = 1e-6


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """The noisy release's options (what `release_options` reads).

    ``--release``, ``--release-epsilon``, ``--release-delta``, ``--bounds``, ``--keys`` and
    ``--key-selection-delta``.
    """
    parser.add_argument(
        "--release",
        choices=["laplace", "gaussian"],
        default=None,
        help="release the result with noise drawn by OpenDP at the result node (central "
        "DP on top of the traffic's): COUNT, SUM and AVG only; needs --keys for every "
        "grouping column (or --key-selection-delta) and --bounds for every column a SUM "
        "or AVG reads",
    )
    parser.add_argument(
        "--release-epsilon",
        type=float,
        default=None,
        metavar="E",
        help="with --release: ε of the release, split equally among its aggregates "
        f"(default {DEFAULT_RELEASE_EPSILON:g})",
    )
    parser.add_argument(
        "--release-delta",
        type=float,
        default=None,
        metavar="D",
        help=f"with --release gaussian: δ of the release (default {DEFAULT_RELEASE_DELTA:g})",
    )
    parser.add_argument(
        "--bounds",
        action="append",
        default=[],
        metavar="COL=LO:HI",
        help="with --release: clamp COL to [LO, HI] on each source's row (repeatable)",
    )
    parser.add_argument(
        "--keys",
        action="append",
        default=[],
        metavar="COL=V1,V2,...",
        help="with --release: the public values of grouping column COL; every one is "
        "released, absent ones too, and no other (repeatable)",
    )
    parser.add_argument(
        "--key-selection-delta",
        type=float,
        default=None,
        metavar="D",
        help="with --release: select the keys of grouping sets whose columns have no "
        "--keys by OpenDP's threshold on their noisy count, at δ = D (added to the "
        "release's δ; e.g. 1e-6)",
    )


def add_data_seed_option(parser: Any, *, aggregate: bool, kmeans: bool) -> None:
    """``--data-seed``: of the synthetic table, of K-means' initial centroids, or of both."""
    what = " and ".join(
        text
        for text, wanted in (
            ("the --synthetic table", aggregate),
            ("the choice of the initial centroids (K-means, --init)", kmeans),
        )
        if wanted
    )
    parser.add_argument(
        "--data-seed", type=non_negative_int, default=0, help=f"seed of {what} (default 0)"
    )


def add_kmeans_options(parser: Any, *, data: bool = True) -> None:
    """The K-means program and its points: ``--dataset`` or ``--data``, ``--k``, ``--init``, ...

    ``--drop-non-finite`` too: what [`dpcomm.kmeans`][] refuses unless asked to drop it.
    ``data``: also ``--data`` (``deploy local`` has it already, for either workload).
    """
    parser.add_argument(
        "--dataset",
        help=f"{KMEANS_DATASET} (embedded, 4,000 training and 1,000 test digits; the default), "
        "fashion-mnist (make data), or a directory of MNIST-format IDX files",
    )
    if data:
        parser.add_argument(
            "--data",
            metavar="FILE.csv|FILE.parquet",
            help="cluster the rows of this table instead of a dataset (one source per row), on "
            "its --columns",
        )
    parser.add_argument(
        "--columns",
        metavar="C1,C2,...",
        help="with --data: the numeric columns (integer, decimal, floating-point) that are "
        "the points' coordinates",
    )
    parser.add_argument(
        "--label-column",
        metavar="L",
        help="with --data: a column of labels (any type, no NULL) to score the clusters "
        "against (Rand index, adjusted Rand index, NMI); never sent anywhere",
    )
    parser.add_argument(
        "--k",
        type=bounded_int(None, MAX_COUNT),
        default=KMEANS_CENTROIDS,
        help=f"K, number of centroids and of compute nodes per iteration, at most one per "
        f"source (default {KMEANS_CENTROIDS})",
    )
    parser.add_argument(
        "--iterations",
        type=bounded_int(None, MAX_COUNT),
        default=KMEANS_ITERATIONS,
        help=f"I, number of iterations (default {KMEANS_ITERATIONS})",
    )
    parser.add_argument(
        "--init",
        choices=INIT_METHODS,
        default="random",
        help="how --data-seed chooses the K initial centroids: random (K distinct points, the "
        "default) or k-means++ (D² seeding, which reads every point); chosen among the "
        "sources' points they are sent to every node as they are (the report's privacy notes "
        "say so), unless chosen among --init-data",
    )
    parser.add_argument(
        "--init-data",
        metavar="FILE.csv|FILE.parquet",
        help="with --data: public points (the same --columns) to choose the initial centroids "
        "among, so that they reveal nothing about the sources",
    )
    parser.add_argument(
        "--sources",
        type=int,
        help="sources: the first N training points or rows (default: all of them)",
    )
    parser.add_argument(
        "--drop-non-finite",
        action="store_true",
        help="drop the points holding NULL, NaN, ±inf or a value beyond float32's range (a "
        "float IDX file, a table's cells), saying how many, instead of refusing the data",
    )


def aggregate_data(args: argparse.Namespace) -> tuple[Any, str]:
    """The rows of ``--data``, ``--synthetic`` or the diabetes table, and their description.

    Parquet files and synthetic rows are row sources: `dpcomm.run_sql` reads them whole,
    or leaves them to an engine whose workers read them partition by partition (Dask).
    """
    from dpcomm.data.partitioned import ParquetRows
    from dpcomm.data.synthetic import SyntheticRows

    if args.data is not None:
        path = Path(args.data)
        if path.is_dir() or path.suffix.lower() == ".parquet":
            files = ParquetRows(path)
            return files, f"{args.data} ({files.num_rows:,} rows)"
        return read_table(args.data), args.data
    if args.synthetic is not None:
        drawn = SyntheticRows(args.synthetic, seed=args.data_seed, distribution=args.distribution)
        return drawn, f"synthetic ({args.synthetic:,} rows, {args.distribution})"
    return diabetes_table(), "embedded diabetes table (synthetic patients)"


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


def execute_aggregate(
    args: argparse.Namespace, engine: Engine, budget: Budget | None = None
) -> tuple[AggregateRun, str]:
    """`dpcomm.run_sql` with the options, on ``engine``; also describe the data."""
    if args.sql is None:
        raise InvalidParameterError("--sql", "a query (required for an Aggregate run)", None)
    data, source = aggregate_data(args)
    outcome = run_sql(
        args.sql,
        data,
        countermeasure=countermeasure_from_options(args, AGGREGATE_DEFAULTS),
        num_targets=args.targets,
        delta=args.delta,
        seed=args.seed,
        engine=engine,
        max_groups=args.max_groups,
        max_text_bytes=args.max_text_bytes,
        estimate=args.estimate,
        progress=show_progress(args),
        target_epsilon=args.target_epsilon,
        budget=budget,
        **release_options(args),
    )
    return outcome, source


#: The options of a noisy release that mean nothing without ``--release`` (flag, attribute).
RELEASE_ONLY_OPTIONS = (
    ("--release-epsilon", "release_epsilon"),
    ("--release-delta", "release_delta"),
    ("--bounds", "bounds"),
    ("--keys", "keys"),
    ("--key-selection-delta", "key_selection_delta"),
)


def release_options(args: argparse.Namespace) -> dict[str, Any]:
    """``release``, ``bounds``, ``keys`` and ``key_selection_delta`` of `dpcomm.run_sql`.

    Every release option without ``--release`` is refused (it would run exactly and print
    exact values), as is ``--release-delta`` with a Laplace release (whose δ is 0).
    """
    if getattr(args, "release", None) is None:
        for flag, name in RELEASE_ONLY_OPTIONS:
            given = getattr(args, name, None)
            if given is not None and given != []:
                shown = given[0] if isinstance(given, list) else given
                raise InvalidParameterError(flag, "only with --release", shown)
        return {}
    return {
        "release": release_mechanism(args),
        "bounds": parse_bounds(args.bounds),
        "keys": parse_keys(args.keys),
        "key_selection_delta": args.key_selection_delta,
    }


def release_mechanism(args: argparse.Namespace) -> Any:
    """``--release``, ``--release-epsilon`` and ``--release-delta`` as the release's mechanism.

    ``--release-delta`` is refused with a Laplace release (whose δ is 0); an invalid ε or δ is
    named by its flag.
    """
    from dpcomm.release.mechanisms import Gaussian, Laplace

    epsilon = DEFAULT_RELEASE_EPSILON if args.release_epsilon is None else args.release_epsilon
    if args.release == "laplace" and args.release_delta is not None:
        raise InvalidParameterError(
            "--release-delta",
            "only with --release gaussian (a Laplace release has δ = 0)",
            args.release_delta,
        )
    delta = DEFAULT_RELEASE_DELTA if args.release_delta is None else args.release_delta
    try:
        return Laplace(epsilon) if args.release == "laplace" else Gaussian(epsilon, delta)
    except InvalidParameterError as error:  # the release's ε and δ have their own flags
        flags = {"epsilon": "--release-epsilon", "delta": "--release-delta"}
        raise InvalidParameterError(
            flags.get(error.name, error.name), error.allowed, error.given
        ) from None


def parse_bounds(items: list[str]) -> dict[str, tuple[float, float]]:
    """``--bounds COL=LO:HI`` (repeated) as ``{COL: (LO, HI)}``."""
    bounds: dict[str, tuple[float, float]] = {}
    for item in items:
        column, _, pair = item.rpartition("=")
        low, colon, high = pair.partition(":")
        try:
            if not column or not colon:
                raise ValueError(item)
            bounds[column] = (float(low), float(high))
        except ValueError:
            raise InvalidParameterError(
                "--bounds", "COL=LO:HI (e.g. mass=2500:6500)", item
            ) from None
    return bounds


def parse_keys(items: list[str]) -> dict[str, list[str]]:
    """``--keys COL=V1,V2,...`` (repeated) as ``{COL: [V1, V2, ...]}``."""
    keys: dict[str, list[str]] = {}
    for item in items:
        column, equals, values = item.partition("=")
        if not column or not equals or not values:
            raise InvalidParameterError("--keys", "COL=V1,V2,... (e.g. sex=FEMALE,MALE)", item)
        keys[column] = values.split(",")
    return keys


@contextmanager
def _named_by_flags(flags: Mapping[str, str], *, nulls: bool = False) -> Iterator[None]:
    """Errors naming a parameter of ``flags`` re-raised naming its flag instead.

    ``nulls``: the points had NULL cells (read as NaN), which an error about them says.
    """
    try:
        yield
    except InvalidParameterError as error:
        if error.name not in flags:
            raise
        given = error.given
        if nulls and error.name == "points":
            given = f"{given}; NULL cells are read as NaN"
        raise InvalidParameterError(flags[error.name], error.allowed, given) from None


def _kmeans_table(args: argparse.Namespace) -> tuple[TablePoints, Any, str]:
    """The points of ``--data``, the public points of ``--init-data``, and their columns."""
    if args.dataset is not None:
        raise InvalidParameterError(
            "--dataset", "unset with --data (K-means runs on the table's --columns)", args.dataset
        )
    if args.columns is None:
        raise InvalidParameterError(
            "--columns", "the numeric columns to cluster on with --data, e.g. x,y", None
        )
    columns = [name.strip() for name in args.columns.split(",")]
    flags = {"data": "--data", "columns": "--columns", "label_column": "--label-column"}
    with _named_by_flags(flags):
        table = read_points(args.data, columns, label_column=args.label_column)
    public = None
    if args.init_data is not None:
        with _named_by_flags({"data": "--init-data", "columns": "--columns"}):
            public = read_points(args.init_data, columns).points
    described = f"; columns {', '.join(table.columns)}"
    if table.label_column is not None:
        described += f"; labels {table.label_column}"
    return table, public, described


def execute_kmeans(
    args: argparse.Namespace, engine: Engine, budget: Budget | None = None
) -> tuple[KMeansRun, str]:
    """[`dpcomm.kmeans`][] on the first ``--sources`` points, on ``engine``.

    The points are a dataset's training images, whose test set the scores are measured on, or
    a table's ``--columns`` (``--data``), whose ``--label-column`` they are measured against.
    Returns the run and a description of its points.
    """
    labels = test_points = test_labels = init_points = None
    nulls = False
    if args.data is not None:
        table, init_points, detail = _kmeans_table(args)
        points, labels, nulls, what = table.points, table.labels, table.null_rows > 0, "rows"
        name = args.data
    else:
        for flag, value in (
            ("--columns", args.columns),
            ("--label-column", args.label_column),
            ("--init-data", args.init_data),
        ):
            if value is not None:
                raise InvalidParameterError(flag, "only with --data (a table's columns)", value)
        dataset = load_image_dataset(args.dataset or KMEANS_DATASET)
        points, test_points, test_labels = (
            dataset.train_images,
            dataset.test_images,
            dataset.test_labels,
        )
        name, what, detail = dataset.name, "training points", ""
    total = len(points)
    if args.sources is not None:
        if not 1 <= args.sources <= total:
            raise InvalidParameterError(
                "--sources", f"an integer in [1, {total}] (the {what} of {name})", args.sources
            )
        points = points[: args.sources]
        labels = None if labels is None else labels[: args.sources]
    flags = {"points": "--data", "labels": "--label-column", "init_points": "--init-data"}
    with _named_by_flags(flags if args.data is not None else {}, nulls=nulls):
        outcome = kmeans(
            points,
            k=args.k,
            iterations=args.iterations,
            countermeasure=countermeasure_from_options(args, KMEANS_DEFAULTS),
            labels=labels,
            test_points=test_points,
            test_labels=test_labels,
            seed=args.seed,
            delta=args.delta,
            engine=engine,
            start_seed=args.data_seed,
            progress=show_progress(args),
            target_epsilon=args.target_epsilon,
            drop_non_finite=args.drop_non_finite,
            budget=budget,
            init=args.init,
            init_points=init_points,
        )
    described = (
        f"every {what[:-1]}" if len(points) == total else f"the first {len(points):,} {what}"
    )
    return outcome, f"{name} ({described}{detail})"


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


def assignments_path(out: Path) -> Path:
    """Where K-means writes each source's centroid beside ``--out``: FILE-assignments.csv."""
    return out.with_name(f"{out.stem}-assignments{out.suffix}")


def output_paths(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """``--out`` (.csv or .parquet) and ``--report`` (.json), checked before the run.

    Each must be a file that can be written (`check_writable_file`; for K-means, the
    assignments file beside ``--out`` too), neither may be the input (``--data``, or a file
    inside a ``--data`` folder of Parquet files) nor the other one.
    """
    out = report = None
    written: list[tuple[str, Path]] = []
    if args.out is not None:
        out = check_writable_file("--out", args.out)
        if out.suffix.lower() not in (".csv", ".parquet"):
            raise InvalidParameterError("--out", "a .csv or .parquet file", args.out)
        written.append(("--out", out))
        if (getattr(args, "workload", None) or args.kind) == "kmeans":
            assigned = assignments_path(out)
            try:
                check_writable_file("--out", str(assigned))
            except InvalidParameterError as error:
                allowed = f"a file whose assignments file {assigned} is {error.allowed}"
                raise InvalidParameterError("--out", allowed, args.out) from None
            written.append(("--out", assigned))
    if args.report is not None:
        report = check_writable_file("--report", args.report)
        if report.suffix.lower() != ".json":
            raise InvalidParameterError("--report", "a .json file", args.report)
        if out is not None and any(same_file(report, path) for _, path in written):
            raise InvalidParameterError("--report", "a file other than --out", args.report)
        written.append(("--report", report))
    data = getattr(args, "data", None)
    if data is not None:
        source = Path(data)
        for option, path in written:
            if same_file(path, source) or (source.is_dir() and within(path, source)):
                raise InvalidParameterError(
                    option, "a file other than the input --data (never overwritten)", str(path)
                )
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
    try:
        if path.suffix.lower() == ".csv":
            relation.write_csv(str(path))
        else:
            relation.write_parquet(str(path))
    except duckdb.Error as error:  # the file went away, the disk is full, ...
        raise DpcommError(f"cannot write {path}: {str(error).splitlines()[0]}") from error


def write_outputs(outcome: AggregateRun | KMeansRun, out: Path | None, report: Path | None) -> None:
    """The result (``--out``) and the report (``--report``) of a run, if asked for."""
    if out is not None and isinstance(outcome, AggregateRun):
        _write_rows(list(outcome.columns), outcome.rows, out)
        print(f"wrote {len(outcome.rows):,} result rows to {out}", file=sys.stderr)
    elif out is not None and isinstance(outcome, KMeansRun):
        centroids = outcome.centroids
        names = [f"c{i}" for i in range(centroids.shape[1])]
        rows = [
            {"centroid": k, **dict(zip(names, map(float, row), strict=True))}
            for k, row in enumerate(centroids)
        ]
        _write_rows(["centroid", *names], rows, out)
        assigned = assignments_path(out)
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


def print_run(args: argparse.Namespace, outcome: AggregateRun | KMeansRun, data: str) -> None:
    """The run's JSON document with ``--json``, else its text report (``data`` names the data)."""
    if args.json:
        print(json_document(outcome))
    elif isinstance(outcome, AggregateRun):
        print_aggregate(outcome, data, args.rows)
    else:
        print_kmeans(outcome, data)
