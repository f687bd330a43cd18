"""What ``run`` does once parsed: one call into the front door, the report.

``run aggregate|kmeans`` calls the functions Python users call, `dpcomm.run_sql` and
`dpcomm.kmeans`, on the engine its options name (`dpcomm.engine.engines.make_engine`):
the same flags and seed give the same run on every engine. The report prints as text or as
the one JSON document of every run; a deployed round also prints what was measured on the
wire. Imported when a command runs, never to build the parser (`dpcomm.cli.options`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from dpcomm.api import compile_kmeans, kmeans, run_sql
from dpcomm.budget.budget import Budget
from dpcomm.cli.options import (
    AGGREGATE_DEFAULTS,
    DEFAULT_RELEASE_DELTA,
    DEFAULT_RELEASE_EPSILON,
    KMEANS_DATASET,
    KMEANS_DEFAULTS,
)
from dpcomm.cli.output import (
    check_writable_file,
    flags_in,
    print_table,
    same_file,
    show_progress,
    within,
)
from dpcomm.data import diabetes_table, load_image_dataset, read_points, read_table
from dpcomm.data.points import TablePoints
from dpcomm.engine.engines import Engine
from dpcomm.engine.network.report import DeploymentDetails
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.pipeline.report import EfficiencyReport, PrivacyReport, Report
from dpcomm.pipeline.runs import AggregateRun, KMeansRun
from dpcomm.pipeline.utility import ReleaseUtility
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.plan.privacy import NO_DATA


def countermeasure_from_options(
    args: argparse.Namespace, defaults: dict[str, float]
) -> Countermeasure:
    """The countermeasure of the options; unset options take the use case's defaults.

    Read by the one codec (`dpcomm.plan.codec.countermeasure_from_arguments`).
    """
    from dpcomm.plan.codec import countermeasure_from_arguments

    return countermeasure_from_arguments(
        mechanism=args.mechanism,
        sampling=args.sampling_rate,
        batch=args.batch_size,
        dummies=args.num_dummies,
        capped=args.capped,
        defaults=defaults,
    )


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
    if privacy.method == NO_DATA:
        return "no row, so no neighbouring table: a neighbour has as many rows"
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
        f"({'' if privacy.method == NO_DATA else 'the worst data path: '}"
        f"{_composition(privacy)})"
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


#: Released aggregates a text report lists one by one (beyond: the first ones and the last).
MAX_AGGREGATES_SHOWN = 8


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
    shown = release.aggregates
    if len(shown) > MAX_AGGREGATES_SHOWN:  # K-means of many columns: the first few, and the count
        shown = (*shown[: MAX_AGGREGATES_SHOWN - 1], shown[-1])
        print(
            f"  ε2 = {release.epsilon:.4g} split {release.split_rule} over "
            f"{len(release.aggregates):,} released vectors (all in --report); the first "
            f"{MAX_AGGREGATES_SHOWN - 1} and the last:"
        )
    else:
        print(f"  {release.describe_split()}")
    for item in shown:
        if item.half_width_95 != item.half_width_95:  # NaN: a quantile, error in its units
            print(
                f"  {item.aggregate}: {item.noise}, scale {item.scale:.4g} "
                f"({item.sensitivity_l1:g} values moved per replaced row); one candidate"
            )
            continue
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
        if deviation != deviation:  # NaN: a quantile's error depends on the data
            continue
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
    if report.release is None:
        used = ", ".join(f"{u:,}" for u in utility.tuples_used_per_iteration)
        print(f"Tuples used per iteration: {used} ({utility.tuples_used_fraction:.1%} on average)")
    elif utility.rand_index is not None:
        print("  (the scores read the labelled points: an evaluation, not part of the release)")
    print()
    _print_privacy(report.privacy)
    if report.release is not None:
        _print_release(report.release)
    print()
    _print_efficiency(report.efficiency)


def json_document(outcome: AggregateRun | KMeansRun) -> str:
    """The one JSON shape of every run: ``{"result": ..., "report": ...}``."""
    return json.dumps(outcome.to_dict(), indent=2)


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
        drawn = SyntheticRows(args.synthetic, seed=args.start_seed, distribution=args.distribution)
        return drawn, f"synthetic ({args.synthetic:,} rows, {args.distribution})"
    return diabetes_table(), "embedded diabetes table (synthetic patients)"


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
        num_targets=args.num_targets,
        max_groups=args.max_groups,
        max_text_bytes=args.max_text_bytes,
        estimate=args.estimate,
        **_run_options(args, engine, budget),
        **release_options(args),
    )
    return outcome, source


def _run_options(args: argparse.Namespace, engine: Engine, budget: Budget | None) -> dict[str, Any]:
    """What `dpcomm.run_sql` and `dpcomm.kmeans` take alike (δ, seed, engine, progress, ...)."""
    return {
        "delta": args.delta,
        "seed": args.seed,
        "engine": engine,
        "progress": show_progress(args),
        "target_epsilon": args.target_epsilon,
        "budget": budget,
    }


#: The options of a noisy release that mean nothing without ``--release``, by destination.
RELEASE_ONLY_OPTIONS = (
    "release_epsilon",
    "release_delta",
    "bounds",
    "keys",
    "key_selection_delta",
    "consistent_totals",
)


def release_options(args: argparse.Namespace) -> dict[str, Any]:
    """``release``, ``bounds``, ``keys``, ``key_selection_delta`` (``consistent_totals``).

    Every release option without ``--release`` is refused (it would run exactly and print
    exact values), as is ``--release-delta`` with a Laplace release (whose δ is 0).
    """
    if getattr(args, "release", None) is None:
        for name in RELEASE_ONLY_OPTIONS:
            given = getattr(args, name, None)
            if given is not None and given != []:
                shown = given[0] if isinstance(given, list) else given
                raise InvalidParameterError(name, "only with --release", shown)
        return {}
    return {
        "release": release_mechanism(args),
        "bounds": parse_bounds(args.bounds),
        "keys": parse_keys(args.keys),
        "key_selection_delta": args.key_selection_delta,
        **({"consistent_totals": True} if getattr(args, "consistent_totals", None) else {}),
    }


def release_mechanism(args: argparse.Namespace) -> Any:
    """``--release``, ``--release-epsilon`` and ``--release-delta`` as the release's mechanism.

    ``--release-delta`` is refused with a Laplace release (whose δ is 0); an invalid ε or δ is
    named by its flag.
    """
    import dpcomm  # the public Laplace and Gaussian

    epsilon = DEFAULT_RELEASE_EPSILON if args.release_epsilon is None else args.release_epsilon
    if args.release == "laplace" and args.release_delta is not None:
        raise InvalidParameterError(
            "--release-delta",
            "only with --release gaussian (a Laplace release has δ = 0)",
            args.release_delta,
        )
    delta = DEFAULT_RELEASE_DELTA if args.release_delta is None else args.release_delta
    try:
        if args.release == "laplace":
            return dpcomm.Laplace(epsilon)
        return dpcomm.Gaussian(epsilon, delta)
    except InvalidParameterError as error:  # the release's ε and δ have their own options
        name = f"release_{error.name}" if error.name in ("epsilon", "delta") else error.name
        raise InvalidParameterError(name, error.allowed, error.given) from None


def kmeans_release_options(
    args: argparse.Namespace, columns: list[str] | None, *, dimension: int
) -> dict[str, Any]:
    """K-means's ``release``, ``bounds`` (one pair per column) and ``scale`` from the options.

    ``--bounds LO:HI`` once bounds every column; else ``--bounds COL=LO:HI`` for each of
    ``columns`` (``--columns``). ``--bounds`` is refused without ``--release`` or ``--scale``
    (which scales by them), ``--release-epsilon`` and ``--release-delta`` without ``--release``.
    """
    scale = bool(getattr(args, "scale", False))
    if args.release is None:
        for name in ("release_epsilon", "release_delta", "bounds"):
            given = getattr(args, name, None)
            if given is not None and given != [] and not (scale and name == "bounds"):
                shown = given[0] if isinstance(given, list) else given
                raise InvalidParameterError(
                    f"--{name.replace('_', '-')}", "only with --release", shown
                )
        if not scale:
            return {}
        return {"bounds": _kmeans_bounds(args.bounds, columns, dimension), "scale": True}
    mechanism = release_mechanism(args)
    bounds = _kmeans_bounds(args.bounds, columns, dimension)
    return {"release": mechanism, "bounds": bounds, **({"scale": True} if scale else {})}


def _kmeans_bounds(
    items: list[str], columns: list[str] | None, dimension: int
) -> list[tuple[float, float]]:
    """``--bounds``: LO:HI once (every column), or COL=LO:HI for each of ``columns``."""
    allowed = "LO:HI once (every column)" + (
        "" if columns is None else ", or COL=LO:HI for each of " + ", ".join(columns)
    )
    if len(items) == 1 and "=" not in items[0]:
        low, high = parse_bounds([f"all={items[0]}"])["all"]
        return [(low, high)] * dimension
    named = parse_bounds(items)
    if columns is None or sorted(named) != sorted(columns):
        raise InvalidParameterError("--bounds", allowed, ", ".join(items) or None)
    return [named[c] for c in columns]


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
def _named_by_options(options: Mapping[str, str], *, nulls: bool = False) -> Iterator[None]:
    """Errors naming a parameter of ``options`` re-raised naming its option's destination.

    ``options``: the library parameter -> the destination of the option that gave it in this
    call (the printed error then names that option's flag). ``nulls``: the points had NULL
    cells (read as NaN), which an error about them says.
    """
    try:
        yield
    except InvalidParameterError as error:
        if error.name not in options:
            raise
        given = error.given
        if nulls and error.name == "points":
            given = f"{given}; NULL cells are read as NaN"
        raise InvalidParameterError(options[error.name], error.allowed, given) from None


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
    table = read_points(args.data, columns, label_column=args.label_column)
    public = None
    if args.init_data is not None:
        with _named_by_options({"data": "init_data"}):
            public = read_points(args.init_data, columns).points
    described = f"; columns {', '.join(table.columns)}"
    if table.label_column is not None:
        described += f"; labels {table.label_column}"
    return table, public, described


@dataclass(frozen=True)
class KMeansInputs:
    """K-means's inputs as the options give them (`kmeans_inputs`)."""

    points: Any
    labels: Any
    test_points: Any
    test_labels: Any
    init_points: Any
    nulls: bool
    columns: list[str] | None
    described: str

    @property
    def given(self) -> dict[str, str]:
        """The options that gave each of [`dpcomm.kmeans`][]'s arguments (for its errors)."""
        if self.columns is None:
            return {"points": "dataset", "test_points": "dataset"}
        return {"points": "data", "labels": "label_column", "init_points": "init_data"}


def kmeans_inputs(args: argparse.Namespace) -> KMeansInputs:
    """The first ``--sources`` points of ``--data``'s ``--columns`` or of ``--dataset``.

    A dataset's training images, whose test set the scores are measured on, or a table's
    ``--columns``, whose ``--label-column`` they are measured against.
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
    columns = None if args.data is None else [c.strip() for c in args.columns.split(",")]
    described = (
        f"every {what[:-1]}" if len(points) == total else f"the first {len(points):,} {what}"
    )
    return KMeansInputs(
        points,
        labels,
        test_points,
        test_labels,
        init_points,
        nulls,
        columns,
        f"{name} ({described}{detail})",
    )


def execute_kmeans(
    args: argparse.Namespace, engine: Engine, budget: Budget | None = None
) -> tuple[KMeansRun, str]:
    """[`dpcomm.kmeans`][] on `kmeans_inputs`, on ``engine``.

    Returns the run and a description of its points.
    """
    inputs = kmeans_inputs(args)
    program = _kmeans_program_options(args, inputs)
    with _named_by_options(inputs.given, nulls=inputs.nulls):
        outcome = kmeans(
            inputs.points,
            countermeasure=countermeasure_from_options(args, KMEANS_DEFAULTS),
            labels=inputs.labels,
            test_points=inputs.test_points,
            test_labels=inputs.test_labels,
            **_run_options(args, engine, budget),
            **program,
        )
    return outcome, inputs.described


def compile_kmeans_options(args: argparse.Namespace, countermeasure: Any) -> Any:
    """The K-means program of the options (`kmeans_inputs`), compiled and not run."""
    inputs = kmeans_inputs(args)
    program = _kmeans_program_options(args, inputs)
    with _named_by_options(inputs.given, nulls=inputs.nulls):
        return compile_kmeans(inputs.points, countermeasure=countermeasure, **program)


def _kmeans_program_options(args: argparse.Namespace, inputs: KMeansInputs) -> dict[str, Any]:
    """What `dpcomm.kmeans` and `compile_kmeans` take alike: K, I, the start, the release."""
    released = kmeans_release_options(args, inputs.columns, dimension=int(inputs.points.shape[1]))
    return {
        "k": args.k,
        "iterations": args.iterations,
        "start_seed": args.start_seed,
        "drop_non_finite": args.drop_non_finite,
        "init": args.init,
        "init_points": inputs.init_points,
        "columns": inputs.columns,
        **released,
    }


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
        if args.kind == "kmeans":
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
    from dpcomm.data.atomic import replaced_atomically

    relation = duckdb.from_arrow(table)
    try:
        with replaced_atomically(path) as temporary:  # never a partial file
            if path.suffix.lower() == ".csv":
                relation.write_csv(str(temporary))
            else:
                relation.write_parquet(str(temporary))
    except duckdb.Error as error:  # the file went away, the disk is full, ...
        raise DpcommError(f"cannot write {path}: {str(error).splitlines()[0]}") from error


def write_outputs(outcome: AggregateRun | KMeansRun, out: Path | None, report: Path | None) -> None:
    """The result (``--out``) and the report (``--report``) of a run, if asked for."""
    if out is not None and isinstance(outcome, AggregateRun):
        _write_rows(list(outcome.columns), outcome.rows, out)
        print(f"wrote {len(outcome.rows):,} result rows to {out}", file=sys.stderr)
    elif out is not None and isinstance(outcome, KMeansRun):
        centroids = outcome.centroids
        names = list(outcome.columns or [f"c{i}" for i in range(centroids.shape[1])])
        rows = [
            {"centroid": k, **dict(zip(names, map(float, row), strict=True))}
            for k, row in enumerate(centroids)
        ]
        _write_rows(["centroid", *names], rows, out)
        assigned = assignments_path(out)
        _write_rows(
            ["source", "centroid"],
            [
                {"source": int(row), "centroid": int(c)}
                for row, c in zip(rows_of(outcome), outcome.assignments, strict=True)
            ],
            assigned,
        )
        print(
            f"wrote {len(rows)} centroids to {out} and each source's centroid to {assigned}",
            file=sys.stderr,
        )
    if report is not None:
        from dpcomm.data.atomic import replaced_atomically

        text = json.dumps(outcome.report.to_dict(), indent=2) + "\n"
        with replaced_atomically(report) as temporary:  # never a partial or empty file
            temporary.write_text(text)
        print(f"wrote the report to {report}", file=sys.stderr)


def rows_of(outcome: KMeansRun) -> Any:
    """Each source's input row (0-based; the rows ``--drop-non-finite`` dropped have none)."""
    import numpy as np

    return np.arange(len(outcome.assignments)) if outcome.input_rows is None else outcome.input_rows


def print_run(args: argparse.Namespace, outcome: AggregateRun | KMeansRun, data: str) -> None:
    """The run's JSON document with ``--json``, else its text report (``data`` names the data)."""
    if args.json:
        print(json_document(outcome))
    elif isinstance(outcome, AggregateRun):
        print_aggregate(outcome, data, args.rows)
    else:
        print_kmeans(outcome, data)


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


def finish_deployment(args: argparse.Namespace, report: Report[Any]) -> int:
    """A deployed round's end: the wire (text only), the nodes that failed, the exit status."""
    if not args.json:
        print()
        _print_wire(report)
    details = report.details
    failures = details.failures if isinstance(details, DeploymentDetails) else ()
    if failures:
        failed = flags_in("; ".join(failures), args.flags)
        print(f"dpcomm: error: the round failed: {failed}", file=sys.stderr)
    return 0 if not failures else 1
