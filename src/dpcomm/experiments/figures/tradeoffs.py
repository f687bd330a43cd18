"""Figures 7a-f and 8 of the paper: trade-offs between privacy, utility and efficiency (§5.2).

Every plotted point is a simulated run (`dpcomm.engine.run_aggregate` or
`dpcomm.engine.simulate` for K-means): messages, secure channels, consents and tuples used
are counted by the simulator; ε is the run's plan guarantee (the exact accountant per scrambler
at δ = 1e-4, composed by Theorem 2 over the G grouping sets or I iterations).

Choices shared by the Aggregate figures (C = T = 20 compute nodes per grouping set):

* the non-private reference is the same query over S = 10,000 sources without countermeasure;
  *messages added* (the paper's network load overhead) is a run's messages minus its messages;
* to use 10k tuples in expectation a run has S_t = ⌈10,000 / (1 − σ + σ/T)⌉ sources (dpcomm's
  S_t, see docs/execution.md), cut into ⌈S_t/n⌉ balanced batches of at most n sources (sizes
  differ by at most one, every size accounted: no short scrambler dominates ε);
* scramblers are the uncapped S_d of Section 4;
* message counts and scrambler counts come from the one cost model (the transformed plan,
  `dpcomm.calibration.plan_costs`), the plotted ones from the simulated runs.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from dpcomm.accounting import ScramblerMechanism
from dpcomm.accounting.accountant import explain_infinite
from dpcomm.calibration import nonprivate_load, plan_costs
from dpcomm.data import ImageDataset, Table, load_fashion_mnist, load_mnist5k, synthetic_table
from dpcomm.engine import simulate
from dpcomm.errors import BalancedBatchesWarning, DpcommError
from dpcomm.experiments.figures import base
from dpcomm.experiments.figures.base import DELTA, NUM_TARGETS, FigureOutput, FigureSettings, Row
from dpcomm.experiments.figures.thresholds import MAX_DUMMIES, least_dummies_for_plan
from dpcomm.pipeline.report import EfficiencyReport, efficiency_report, privacy_report
from dpcomm.pipeline.runs import run_aggregate
from dpcomm.pipeline.utility import AggregateUtility
from dpcomm.plan import ExecutionPlan, NoCountermeasure, Scramblers
from dpcomm.plan.costs import num_scramblers, sources_needed
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram, rand_index

#: S, the tuples a run uses in expectation (the non-private run's sources).
TARGET_TUPLES = 10_000
#: Rows of the one synthetic table the Aggregate figures take their sources from.
TABLE_ROWS = 25_000
#: K and I of the K-means figures (Section 5.2).
KMEANS_CENTROIDS = 10
KMEANS_ITERATIONS = 10

PAPER_CAPTION = "Trade-offs between privacy, utility and efficiency in Aggregate and K-means."


def sources_for(sampling_rate: float, *, used: int = TARGET_TUPLES) -> int:
    """S_t: sources for ``used`` tuples in expectation (Sections 3.3 and 4.4).

    ⌈used / (1 − σ + σ/T)⌉ (`dpcomm.plan.costs.sources_needed`, with the σ/T of tuples
    whose redrawn target is their own); the scramblers cut them into balanced batches.
    """
    return sources_needed(tuples=used, sampling_rate=sampling_rate, num_targets=NUM_TARGETS)


def scrambled_messages(
    *, num_sources: int, batch_size: int, num_dummies: int, grouping_sets: int = 1
) -> int:
    """Messages of a scrambled Aggregate run, from the cost model: G·(2·S_t + SC·d + C).

    Per grouping set (Section 4.4): sources → scramblers (S_t), scramblers → compute nodes
    (their S_t messages plus d dummies each, SC = ⌈S_t/n⌉) and compute → result (C); read from
    the transformed plan (`dpcomm.calibration.plan_costs`).
    """
    # σ changes which messages are dummies, never how many.
    countermeasure = Scramblers(sampling_rate=0.0, batch_size=batch_size, num_dummies=num_dummies)
    return plan_costs(
        countermeasure,
        num_sources=num_sources,
        num_targets=NUM_TARGETS,
        workload="aggregate",
        num_clusters=grouping_sets,
    ).messages


@contextmanager
def _balanced_batches_expected() -> Iterator[None]:
    """Silence the engines' notice that the balanced batches are smaller than n.

    The figures sweep the n of the paper (the most sources per scrambler); S_t sources are cut
    into ⌈S_t/n⌉ balanced batches of at most n, every size accounted, and the CSV says how
    large the largest is (``largest_batch``). Every other warning goes through.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BalancedBatchesWarning)
        yield


def aggregate_sql(grouping_sets: int) -> str:
    """COUNT and AVG over the grouping sets (g1), ..., (gG) of the synthetic table ``t``."""
    columns = ", ".join(f"g{index}" for index in range(1, grouping_sets + 1))
    sets = ", ".join(f"(g{index})" for index in range(1, grouping_sets + 1))
    return (
        f"SELECT {columns}, COUNT(*) AS n_rows, AVG(m1) AS avg_m1 FROM t "
        f"GROUP BY GROUPING SETS ({sets})"
    )


@cache
def _table(seed: int) -> Table:
    """The one synthetic table (uniform, 20 intervals per grouping column) of all figures."""
    return synthetic_table(num_rows=TABLE_ROWS, distribution="uniform", seed=seed, name="t")


@cache
def _program(seed: int, grouping_sets: int, num_sources: int) -> AggregateProgram:
    """The Aggregate program over the first ``num_sources`` rows of the table."""
    if num_sources > TABLE_ROWS:
        raise DpcommError(f"{num_sources} sources exceed the {TABLE_ROWS} rows of the table")
    rows = _table(seed).take(np.arange(num_sources))
    return AggregateProgram.from_sql(aggregate_sql(grouping_sets), rows, num_targets=NUM_TARGETS)


@cache
def _nonprivate_messages(seed: int, grouping_sets: int) -> int:
    """Messages of the non-private run over S = 10k sources (simulated)."""
    program = _program(seed, grouping_sets, TARGET_TUPLES)
    run = simulate(program, NoCountermeasure(), delta=None, seed=seed)  # not accounted
    return run.efficiency.messages


def aggregate_point(
    settings: FigureSettings,
    *,
    curve: str,
    sampling_rate: float,
    batch_size: int,
    num_dummies: int,
    grouping_sets: int = 1,
    num_sources: int | None = None,
) -> Row:
    """Simulate one Aggregate configuration; the CSV row of its measured metrics.

    ``num_sources`` defaults to `sources_for` (10k tuples used in expectation).
    """
    sources = sources_for(sampling_rate) if num_sources is None else num_sources
    program = _program(settings.seed, grouping_sets, sources)
    countermeasure = Scramblers(
        sampling_rate=sampling_rate, batch_size=batch_size, num_dummies=num_dummies
    )
    with _balanced_batches_expected():
        report = run_aggregate(program, countermeasure, delta=DELTA, seed=settings.seed).report
    privacy, utility, efficiency = report.privacy, report.utility, report.efficiency
    if not isinstance(utility, AggregateUtility):  # no release here: measured utility
        raise TypeError(f"expected an AggregateUtility, got {type(utility).__name__}")
    baseline = _nonprivate_messages(settings.seed, grouping_sets)
    messages = efficiency.messages
    return {
        "curve": curve,
        "grouping_sets": grouping_sets,
        **base.countermeasure_columns(countermeasure),
        "sources": sources,
        "extra_consents": sources - TARGET_TUPLES,
        "num_scramblers": efficiency.num_scramblers,
        "largest_batch": _largest_batch(efficiency),
        "messages": messages,
        "messages_nonprivate": baseline,
        "messages_added": messages - baseline,
        "overhead_factor": messages / baseline,
        "max_scrambler_channels": efficiency.max_channels_by_role["scrambler"],
        "tuples_used": sum(utility.tuples_used.values()) / grouping_sets,
        "avg_relative_error": utility.mean_relative_error["avg_m1"],
        "epsilon": privacy.epsilon,
        "delta": privacy.delta,
        "accounting": privacy.method,
    }


def _largest_batch(efficiency: EfficiencyReport) -> int:
    """The most sources a scrambler of the run held (balanced batches: at most n)."""
    return max(max(sizes) for sizes in efficiency.batch_sizes.values())


@dataclass(frozen=True, eq=False)
class _KMeansBench:
    """K-means program on one dataset, and its non-private run (computed once)."""

    dataset: ImageDataset
    program: KMeansProgram
    messages_nonprivate: int
    rand_index_nonprivate: float


@cache
def _kmeans_bench(quick: bool, seed: int) -> _KMeansBench:
    """Fashion-MNIST (60k) in full mode when installed, else (and in quick mode) mnist5k."""
    dataset: ImageDataset | None = None
    if not quick:
        try:
            dataset = load_fashion_mnist()
        except DpcommError:
            dataset = None
    if dataset is None:
        dataset = load_mnist5k()
    program = KMeansProgram(dataset.train_images, KMEANS_CENTROIDS, KMEANS_ITERATIONS, seed=seed)
    baseline = simulate(program, NoCountermeasure(), delta=None, seed=seed)  # not accounted
    index = rand_index(dataset.test_labels, program.assign(baseline.state, dataset.test_images))
    return _KMeansBench(dataset, program, baseline.efficiency.messages, index)


def kmeans_point(
    settings: FigureSettings,
    *,
    curve: str,
    sampling_rate: float,
    batch_size: int,
    num_dummies: int,
) -> Row:
    """Simulate K-means with scramblers in every iteration; the CSV row of its metrics.

    The private run is simulated per point; the non-private one once per dataset (it does not
    depend on the countermeasure). Numbers are those of the run report's privacy and
    efficiency sections.
    """
    bench = _kmeans_bench(settings.quick, settings.seed)
    countermeasure = Scramblers(
        sampling_rate=sampling_rate, batch_size=batch_size, num_dummies=num_dummies
    )
    with _balanced_batches_expected():
        run = simulate(bench.program, countermeasure, delta=DELTA, seed=settings.seed)
    assert run.privacy is not None  # an accounted run (a delta given)
    privacy = privacy_report(run.privacy)
    efficiency = efficiency_report(run, run)
    dataset = bench.dataset
    index = rand_index(dataset.test_labels, bench.program.assign(run.state, dataset.test_images))
    messages = efficiency.messages
    return {
        "curve": curve,
        "dataset": dataset.name,
        "iterations": KMEANS_ITERATIONS,
        "centroids": KMEANS_CENTROIDS,
        **base.countermeasure_columns(countermeasure),
        "sources": len(dataset.train_images),
        "num_scramblers": efficiency.num_scramblers,
        "largest_batch": _largest_batch(efficiency),
        "messages": messages,
        "messages_nonprivate": bench.messages_nonprivate,
        "messages_added": messages - bench.messages_nonprivate,
        "overhead_factor": messages / bench.messages_nonprivate,
        "max_scrambler_channels": efficiency.max_channels_by_role["scrambler"],
        "rand_index": index,
        "rand_index_nonprivate": bench.rand_index_nonprivate,
        "epsilon": privacy.epsilon,
        "delta": privacy.delta,
        "accounting": privacy.method,
    }


def _grid(curve: str, **axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Every combination of the ``axes``' values (the first axis varies slowest).

    Each configuration maps the axes' names to its values, and ``curve`` (a format string
    over those names) names its curve.
    """
    names = tuple(axes)
    combinations = itertools.product(*axes.values())
    configurations = [dict(zip(names, values, strict=True)) for values in combinations]
    return [{"curve": curve.format(**config), **config} for config in configurations]


def _values(values: Iterable[Any]) -> str:
    """``{0.1, 0.2}``: the distinct values of a grid axis, sorted, for captions."""
    return (
        "{"
        + ", ".join(
            f"{value:g}" if isinstance(value, float) else str(value)
            for value in sorted(set(values))
        )
        + "}"
    )


def _count(value: float, _position: Any = None) -> str:
    """Axis label of a count: 900, 12k, 1.5M."""
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


@dataclass(frozen=True)
class _TradeOff:
    """What a figure plots ε against: a CSV column with its axis label, and the axes' scales."""

    column: str
    label: str
    log_x: bool = False
    log_y: bool = False


#: What the figures trade ε against (K-means: loads against the non-private K-means, K nodes).
_NETWORK_LOAD = _TradeOff(
    "messages_added", "network load: messages added vs non-private run (S = 10k)", log_x=True
)
_INDIVIDUAL_LOAD = _TradeOff(
    "max_scrambler_channels",
    "individual load: max secure channels of a scrambler (≈ n + C)",
    log_x=True,
)
_CONSENTS = _TradeOff("sources", "users' consents S_t (10k tuples used)")
_UTILITY = _TradeOff("tuples_used", "utility: tuples used (of S = 10k sources)", log_y=True)
_KMEANS_NETWORK_LOAD = _TradeOff(
    "messages_added", "network load: messages added vs non-private K-means", log_x=True
)
_KMEANS_INDIVIDUAL_LOAD = _TradeOff(
    "max_scrambler_channels",
    "individual load: max secure channels of a scrambler (≈ n + K)",
    log_x=True,
)


def _sweep(
    settings: FigureSettings,
    name: str,
    title: str,
    grid: Sequence[dict[str, Any]],
    point: Callable[..., Row],
    against: _TradeOff,
) -> tuple[list[Row], Path, Path]:
    """Simulate every configuration of ``grid`` and plot the points with a finite ε.

    One line per curve of ε against ``against``; writes the PNG and the CSV.
    """
    configurations = settings.steps(grid, f"figure {name}", total=len(grid))
    simulated = [point(settings, **config) for config in configurations]
    rows = [row for row in simulated if math.isfinite(row["epsilon"])]
    x = against.column
    figure, axes = base.new_axes(width=6.4, height=4.4)
    markers = "osD^vP*X"
    for index, (curve, points) in enumerate(base.group_curves(rows).items()):
        ordered = sorted(points, key=lambda row: row[x])
        axes.plot(
            [row[x] for row in ordered],
            [row["epsilon"] for row in ordered],
            marker=markers[index % len(markers)],
            markersize=4,
            linewidth=1.4,
            label=curve,
        )
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if against.log_x:
        axes.set_xscale("log")
        axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_minor_formatter(NullFormatter())
    axes.xaxis.set_major_formatter(FuncFormatter(_count))
    if against.log_y:
        axes.set_yscale("log")
    axes.set_xlabel(against.label)
    axes.set_ylabel(f"plan ε (δ = {DELTA:g} for the whole plan)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    png, csv = base.save_figure(settings, name, figure, rows, title=title)
    return rows, png, csv


def _first(rows: Sequence[Row], key: str) -> list[Row]:
    return sorted(rows, key=lambda row: row[key])


def _drop_share(points: Sequence[Row], *, until: int) -> float:
    """Share of the ε drop from the smallest to the largest d achieved by d <= ``until``."""
    ordered = _first(points, "num_dummies")
    start, end = ordered[0]["epsilon"], ordered[-1]["epsilon"]
    reached = min(row["epsilon"] for row in ordered if row["num_dummies"] <= until)
    return (start - reached) / (start - end) if start > end else 0.0


def _dummy_notes(rows: Sequence[Row], *, early: int, kind: str) -> list[str]:
    """Check "privacy gains are significant, especially for the first dummies" (§5.2)."""
    curves = base.group_curves(rows)
    shares = [_drop_share(points, until=early) for points in curves.values()]
    largest = max(row["num_dummies"] for row in rows)
    monotone = all(
        all(a["epsilon"] > b["epsilon"] for a, b in itertools.pairwise(o))
        for o in (_first(points, "num_dummies") for points in curves.values())
    )
    front_loaded = min(shares) > early / largest
    notes = [
        f"ε {'decreases' if monotone else 'does not always decrease'} with d on every curve; "
        f"the first {early} of {largest} dummies per scrambler "
        f"({100 * early / largest:.0f}% of them) give "
        f"{100 * min(shares):.0f}-{100 * max(shares):.0f}% of the ε drop from d = 0 to "
        f"d = {largest}: "
        + (
            "the gains are largest for the first dummies, as the paper says."
            if front_loaded
            else "on some curve the first dummies do not give more than their share."
        )
    ]
    return notes


def _dummies_only_note(sizes: Sequence[int]) -> str:
    """Why σ = 0 is left out of figure 7c: the least d with a finite ε, by the accountant."""
    least: list[str] = []
    for size in sizes:
        mechanism = ScramblerMechanism(
            num_targets=NUM_TARGETS, sampling_rate=0.0, batch_size=size, num_dummies=0
        )
        changes = explain_infinite(mechanism, delta=DELTA).changes
        found = [c for c in changes if c.parameter == "num_dummies" and c.least]
        least.append(
            f"d ≥ {int(found[0].value)} at n = {size}" if found else f"no d found at n = {size}"
        )
    formula = math.ceil(math.log(DELTA) / math.log(1 - 1 / NUM_TARGETS))
    return (
        "σ = 0 (dummies only) is left out: an observer then sees a target with no message "
        "whenever no dummy lands on it, with probability (1 − 1/T)^d, so the true ε at "
        f"δ = {DELTA:g} is infinite while (1 − 1/T)^d > δ, i.e. for d < {formula}; the "
        f"accountant finds ε finite from {', '.join(least)}."
    )


def _reach_note(
    rows: Sequence[Row],
    *,
    kind: str,
    plan_of: Callable[[Row], ExecutionPlan],
    load_of: Callable[[Row, int], int] | None = None,
) -> str:
    """ε ≤ 1 on every curve: the least d, by the accountant on the curve's plan (any grid).

    Each curve's plan is the one its runs execute, so the ε is what a run reports
    (`dpcomm.experiments.figures.thresholds.least_dummies_for_plan`); the plotted points
    only tell the search where to look (the least d reached and the point below it, which it
    checks). ``load_of`` gives the messages added at a d (the
    cost model of the runs).
    """
    parts: list[str] = []
    loads: list[tuple[int, str, int]] = []
    for curve, points in base.group_curves(rows).items():
        first = points[0]
        reached = [row["num_dummies"] for row in points if row["epsilon"] <= 1.0]
        guess = min(reached) if reached else max(row["num_dummies"] for row in points)
        short = [row["num_dummies"] for row in points if row["num_dummies"] < guess]
        found = least_dummies_for_plan(
            plan_of(first),
            sampling_rate=first["sampling_rate"],
            batch_size=first["batch_size"],
            target_epsilon=1.0,
            delta=DELTA,
            guess=guess,
            below=max(short) if short else None,
        )
        if found is None:
            parts.append(f"{curve}: not within d ≤ {MAX_DUMMIES:,}")
            continue
        dummies = int(found.value)
        text = (
            f"{curve}: already without dummies (ε = {found.epsilon:.4f}"
            if dummies == 0
            else f"{curve}: d ≥ {dummies:,} (ε = {found.epsilon:.4f}"
        )
        if found.epsilon_below is not None:
            text += f"; {found.epsilon_below:.4f} at d = {dummies - 1:,}"
        text += ")"
        if load_of is not None:
            load = load_of(first, dummies)
            loads.append((load, curve, dummies))
            text = text[:-1] + f"; {load:,} messages added)"
        parts.append(text)
    note = (
        f"ε ≤ 1 ({kind}; the least d by the accountant on each curve's plan, not read off the "
        "plotted grid): " + "; ".join(parts) + "."
    )
    if loads:
        load, curve, dummies = min(loads)
        note += f" The least load reaching it: {curve}, d = {dummies:,} ({load:,} messages added)"
        bare = [row["messages_added"] for row in rows if row["num_dummies"] == 0]
        if bare:
            note += f"; without dummies the scramblers alone add {min(bare):,} messages or more"
        note += "."
    return note


def _aggregate_plan(settings: FigureSettings) -> Callable[[Row], ExecutionPlan]:
    """The plan a figure's Aggregate row ran (its G and S_t)."""
    return lambda row: _program(settings.seed, row["grouping_sets"], row["sources"]).plan


def _aggregate_load(row: Row, dummies: int) -> int:
    """Messages added by the row's configuration with ``dummies`` (the cost model of its run)."""
    messages = scrambled_messages(
        num_sources=row["sources"],
        batch_size=row["batch_size"],
        num_dummies=dummies,
        grouping_sets=row["grouping_sets"],
    )
    return messages - int(row["messages_nonprivate"])


def _channel_notes(rows: Sequence[Row]) -> str:
    """Check "the effect diminishes; a few tens to a few hundreds channels are enough" (§5.2)."""
    parts = []
    diminishing = True
    for curve, points in base.group_curves(rows).items():
        ordered = _first(points, "max_scrambler_channels")
        low, high = ordered[0], ordered[-1]
        near = [row for row in ordered if row["max_scrambler_channels"] <= 150]
        middle = near[-1] if near else low
        total = low["epsilon"] - high["epsilon"]
        share = (low["epsilon"] - middle["epsilon"]) / total if total > 0 else 0.0
        first_rate = (low["epsilon"] - middle["epsilon"]) / max(
            middle["max_scrambler_channels"] - low["max_scrambler_channels"], 1
        )
        last_rate = (middle["epsilon"] - high["epsilon"]) / max(
            high["max_scrambler_channels"] - middle["max_scrambler_channels"], 1
        )
        diminishing = diminishing and first_rate > last_rate
        parts.append(
            f"{curve}: ε {low['epsilon']:.2f} at {low['max_scrambler_channels']} channels, "
            f"{middle['epsilon']:.2f} at {middle['max_scrambler_channels']}, "
            f"{high['epsilon']:.2f} at {high['max_scrambler_channels']} ({100 * share:.0f}% of "
            f"the drop by {middle['max_scrambler_channels']} channels; per channel "
            f"{first_rate / last_rate if last_rate > 0 else math.inf:.1f}× the later gain)"
        )
    verdict = (
        "More channels per scrambler lower ε, with diminishing returns as the paper says: "
        if diminishing
        else "More channels per scrambler lower ε, but not with diminishing returns on every "
        "curve: "
    )
    return verdict + "; ".join(parts) + "."


AGGREGATE_SETUP = (
    f"C = T = {NUM_TARGETS} compute nodes per grouping set, δ = {DELTA:g} for the whole "
    "plan, "
    "uncapped scramblers, uniform synthetic table, every point simulated."
)
AGGREGATE_PARAMETERS = (
    f"C = T = {NUM_TARGETS} compute nodes per grouping set, δ = {DELTA:g} for the whole "
    "plan, "
    "uncapped scramblers, uniform synthetic table; S_t = ⌈10,000/(1 − σ + σ/T)⌉ sources in "
    "⌈S_t/n⌉ balanced batches of at most n (10k tuples used in expectation, every batch size "
    "accounted); messages added = messages minus those of the non-private run over S = 10k "
    "sources; every point simulated."
)


@base.register("7a")
def figure_7a(settings: FigureSettings) -> FigureOutput:
    """Aggregate: privacy vs network load (G = 1), varying d."""
    rates: tuple[float, ...]
    sizes: tuple[int, ...]
    dummies: tuple[int, ...]
    if settings.quick:
        rates, sizes, dummies = (0.1, 0.2), (50, 300), (0, 50, 200, 1000)
    else:
        rates, sizes = (0.1, 0.2), (50, 100, 300)
        dummies = (0, 10, 25, 50, 100, 200, 400, 700, 1000)
    grid = _grid(
        "σ={sampling_rate:g}, n={batch_size}",
        sampling_rate=rates,
        batch_size=sizes,
        num_dummies=dummies,
    )
    title = "Aggregate: privacy vs network load (G=1)"
    rows, png, csv = _sweep(settings, "7a", title, grid, aggregate_point, _NETWORK_LOAD)
    return FigureOutput(
        "7a",
        title,
        f"{PAPER_CAPTION} Ours: d = {min(dummies)}..{max(dummies)} dummies per scrambler, "
        f"σ ∈ {_values(rates)}, n ∈ {_values(sizes)}, G = 1. {AGGREGATE_PARAMETERS}",
        png,
        csv,
        (
            *_dummy_notes(rows, early=200 if settings.quick else 100, kind="Aggregate, G = 1"),
            _reach_note(
                rows,
                kind="Aggregate, G = 1",
                plan_of=_aggregate_plan(settings),
                load_of=_aggregate_load,
            ),
        ),
    )


@base.register("7b")
def figure_7b(settings: FigureSettings) -> FigureOutput:
    """Aggregate: privacy vs individual load, varying n."""
    sigma = 0.2
    sizes: tuple[int, ...]
    dummies: tuple[int, ...]
    if settings.quick:
        sizes, dummies = (10, 50, 200, 600), (0, 500)
    else:
        sizes, dummies = (10, 20, 50, 100, 200, 300, 400, 600), (0, 100, 500)
    grid = _grid("d={num_dummies}", sampling_rate=(sigma,), num_dummies=dummies, batch_size=sizes)
    title = "Aggregate: privacy vs individual load"
    rows, png, csv = _sweep(settings, "7b", title, grid, aggregate_point, _INDIVIDUAL_LOAD)
    return FigureOutput(
        "7b",
        title,
        f"{PAPER_CAPTION} Ours: n = {min(sizes)}..{max(sizes)} sources per scrambler, "
        f"σ = {sigma:g}, d ∈ {_values(dummies)}, G = 1; channels counted by the simulator. "
        f"{AGGREGATE_PARAMETERS}",
        png,
        csv,
        (_channel_notes(rows),),
    )


def dummies_for_budget(*, sources: int, batch_size: int, budget: int) -> int:
    """The largest d keeping the messages added at most ``budget`` (G = 1), or -1 if none.

    Messages added = 2·S_t + SC·d + C − (S + C) with SC = ⌈S_t/n⌉ (`scrambled_messages`
    and the non-private plan of S = 10k sources, both from the cost model): affine in d, one
    more dummy per scrambler adds SC messages.
    """
    scramblers = num_scramblers(sources, batch_size)
    baseline = nonprivate_load(
        num_sources=TARGET_TUPLES,
        num_targets=NUM_TARGETS,
        workload="aggregate",
        num_clusters=1,
    )
    fixed = scrambled_messages(num_sources=sources, batch_size=batch_size, num_dummies=0) - baseline
    if fixed > budget:
        return -1
    return (budget - fixed) // scramblers


def _budget_point(settings: FigureSettings, *, budget: int, **configuration: Any) -> Row:
    """`aggregate_point`, with the overhead ``budget`` its d was chosen for (7c)."""
    return {**aggregate_point(settings, **configuration), "budget": budget}


def _budget_curve(budget: int, batch_size: int) -> str:
    """Name of the 7c curve of one overhead budget and n."""
    return f"budget +{budget // 1000}k msgs, n={batch_size}"


@base.register("7c")
def figure_7c(settings: FigureSettings) -> FigureOutput:
    """Aggregate: privacy vs consents at fixed utility and network overhead budgets."""
    sizes: tuple[int, ...]
    budgets: tuple[int, ...]
    rates: tuple[float, ...]
    if settings.quick:
        sizes, budgets, rates = (10, 200), (40_000, 80_000), (0.05, 0.2, 0.5)
    else:
        sizes, budgets = (10, 50, 200), (40_000, 80_000)
        rates = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
    grid = []
    for budget in budgets:
        for n in sizes:
            curve = _budget_curve(budget, n)
            for sigma in rates:
                sources = sources_for(sigma)
                d = dummies_for_budget(sources=sources, batch_size=n, budget=budget)
                if d >= 0:
                    grid.append(
                        {
                            "curve": curve,
                            "sampling_rate": sigma,
                            "batch_size": n,
                            "num_dummies": d,
                            "budget": budget,
                        }
                    )
    title = "Aggregate: privacy vs consents"
    rows, png, csv = _sweep(settings, "7c", title, grid, _budget_point, _CONSENTS)
    curves = {
        curve: _first(points, "sampling_rate") for curve, points in base.group_curves(rows).items()
    }
    decreasing = all(
        all(a["epsilon"] > b["epsilon"] for a, b in itertools.pairwise(ordered))
        for ordered in curves.values()
    )
    ratios = {curve: o[0]["epsilon"] / o[-1]["epsilon"] for curve, o in curves.items()}
    verdicts = []
    for budget in budgets:
        by_n = {n: ratios[name] for n in sizes if (name := _budget_curve(budget, n)) in ratios}
        low_n_more = by_n[min(by_n)] > by_n[max(by_n)]
        verdicts.append(
            f"+{budget // 1000}k: "
            + ", ".join(f"{ratio:.2f}× at n={n}" for n, ratio in by_n.items())
            + (" (larger at low n)" if low_n_more else " (not larger at low n)")
        )
    every_budget = all("(larger" in verdict for verdict in verdicts)
    example = curves[_budget_curve(budgets[0], sizes[0])]
    notes = (
        f"At a fixed budget, trading dummies for consents "
        f"{'lowers ε at every step of every curve' if decreasing else 'does not always lower ε'}"
        f" (e.g. n = {sizes[0]}, +{budgets[0] // 1000}k: ε {example[0]['epsilon']:.2f} at "
        f"σ = {example[0]['sampling_rate']:g}, d = {example[0]['num_dummies']} → "
        f"{example[-1]['epsilon']:.2f} at σ = {example[-1]['sampling_rate']:g}, "
        f"d = {example[-1]['num_dummies']}): increasing σ is more privacy-efficient than "
        f"increasing d{', as the paper says' if decreasing else ''}.",
        f"ε shrinks from σ = {min(rates):g} to {max(rates):g} by "
        + "; ".join(verdicts)
        + ": "
        + (
            "the gain is larger with few sources per scrambler, as the paper says."
            if every_budget
            else "the paper's 'especially at low n' does not hold for every budget here."
        ),
        _dummies_only_note(sizes),
    )
    return FigureOutput(
        "7c",
        title,
        f"{PAPER_CAPTION} Ours: σ ∈ {_values(rates)} hence S_t up to "
        f"{max(r['sources'] for r in rows):,}; for each σ, d is the largest number of dummies "
        f"keeping the messages added within the budget ({', '.join(f'{b:,}' for b in budgets)}) "
        f"by 2·S_t + SC·d − S (Section 4.4), then the run is simulated and its load measured; "
        f"n ∈ {_values(sizes)}, G = 1. {AGGREGATE_PARAMETERS}",
        png,
        csv,
        notes,
    )


@base.register("7d")
def figure_7d(settings: FigureSettings) -> FigureOutput:
    """Aggregate: privacy vs utility, S = 10k sources, varying σ."""
    n = 100
    dummies: tuple[int, ...]
    rates: tuple[float, ...]
    if settings.quick:
        dummies, rates = (0, 200), (0.1, 0.3, 0.6, 0.9)
    else:
        dummies, rates = (0, 50, 200, 1000), (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
    grid = _grid(
        "d={num_dummies}",
        num_dummies=dummies,
        sampling_rate=rates,
        batch_size=(n,),
        num_sources=(TARGET_TUPLES,),
    )
    title = "Aggregate: privacy vs utility"
    rows, png, csv = _sweep(settings, "7d", title, grid, aggregate_point, _UTILITY)
    spans = []
    for curve, points in base.group_curves(rows).items():
        ordered = _first(points, "sampling_rate")
        low, high = ordered[0], ordered[-1]
        spans.append(
            (
                low["epsilon"] - high["epsilon"],
                f"{curve}: ε {low['epsilon']:.2f} → {high['epsilon']:.2f} "
                f"({low['tuples_used']:,.0f} → {high['tuples_used']:,.0f} tuples used)",
            )
        )
    fewest = min(dummies)
    drops = {text.split(":")[0]: drop for drop, text in spans}
    largest_at_fewest = drops.get(f"d={fewest}", 0.0) >= max(drops.values())
    return FigureOutput(
        "7d",
        title,
        f"{PAPER_CAPTION} Ours: S = 10,000 sources, n = {n}, d ∈ {_values(dummies)}, "
        f"σ = {min(rates):g}..{max(rates):g}, G = 1; tuples used counted by the simulator. "
        f"{AGGREGATE_SETUP}",
        png,
        csv,
        (
            f"From σ = {min(rates):g} to {max(rates):g}: " + "; ".join(t for _, t in spans) + ".",
            (
                "Sampling has the largest effect with the fewest dummies, as the paper says."
                if largest_at_fewest
                else "Sampling's effect is not largest with the fewest dummies here."
            ),
        ),
    )


KMEANS_PARAMETERS = (
    f"K = C = T = {KMEANS_CENTROIDS}, I = {KMEANS_ITERATIONS}, δ = {DELTA:g} for the whole "
    "plan (the I clusters composed by PLD, or Theorem 2's sum at δ/I each, whichever is "
    "smaller), uncapped scramblers, centroids sent back through the scramblers; messages "
    "added = messages minus those of the same K-means without "
    "countermeasure; every point simulated."
)


def _kmeans_dataset_note(rows: Sequence[Row], quick: bool) -> str:
    name = rows[0]["dataset"]
    size = rows[0]["sources"]
    why = "quick mode" if quick else "Fashion-MNIST is not installed" if name == "mnist5k" else ""
    text = f"Dataset: {name} ({size:,} training points{', ' + why if why else ''})"
    indices = [row["rand_index"] for row in rows]
    return (
        f"{text}; Rand index {min(indices):.3f}-{max(indices):.3f} against "
        f"{rows[0]['rand_index_nonprivate']:.3f} without countermeasure (privacy and loads "
        "depend on S, not on the values)."
    )


@base.register("7e")
def figure_7e(settings: FigureSettings) -> FigureOutput:
    """K-means: privacy vs global load, varying d."""
    configs: tuple[tuple[float, int], ...]
    dummies: tuple[int, ...]
    if settings.quick:
        configs, dummies = ((0.9, 50), (0.9, 200), (0.8, 200)), (0, 20, 100, 500)
    else:
        configs = ((0.8, 100), (0.9, 100), (0.8, 500), (0.9, 500))
        dummies = (0, 10, 25, 50, 100, 200, 500, 1000)
    grid = [
        {
            "curve": f"σ={sigma:g}, n={n}",
            "sampling_rate": sigma,
            "batch_size": n,
            "num_dummies": d,
        }
        for sigma, n in configs
        for d in dummies
    ]
    title = "K-means: privacy vs global load"
    rows, png, csv = _sweep(settings, "7e", title, grid, kmeans_point, _KMEANS_NETWORK_LOAD)
    notes = _dummy_notes(rows, early=100, kind="K-means")
    bench = _kmeans_bench(settings.quick, settings.seed)
    notes.append(_reach_note(rows, kind="K-means", plan_of=lambda _row: bench.program.plan))
    notes.append(_kmeans_dataset_note(rows, settings.quick))
    return FigureOutput(
        "7e",
        title,
        f"{PAPER_CAPTION} Ours: d = {min(dummies)}..{max(dummies)} dummies per scrambler, "
        f"(σ, n) ∈ {{{', '.join(f'({a:g}, {b})' for a, b in configs)}}}. {KMEANS_PARAMETERS}",
        png,
        csv,
        tuple(notes),
    )


@base.register("7f")
def figure_7f(settings: FigureSettings) -> FigureOutput:
    """K-means: privacy vs individual load, varying n."""
    sigma = 0.9
    sizes: tuple[int, ...]
    dummies: tuple[int, ...]
    if settings.quick:
        sizes, dummies = (10, 50, 200, 500), (0, 100)
    else:
        sizes, dummies = (10, 20, 50, 100, 200, 300, 400, 600), (0, 100, 500)
    grid = _grid(
        "σ={sampling_rate:g}, d={num_dummies}",
        sampling_rate=(sigma,),
        num_dummies=dummies,
        batch_size=sizes,
    )
    title = "K-means: privacy vs individual load"
    rows, png, csv = _sweep(settings, "7f", title, grid, kmeans_point, _KMEANS_INDIVIDUAL_LOAD)
    return FigureOutput(
        "7f",
        title,
        f"{PAPER_CAPTION} Ours: n = {min(sizes)}..{max(sizes)} sources per scrambler, "
        f"σ = {sigma:g}, d ∈ {_values(dummies)}. {KMEANS_PARAMETERS}",
        png,
        csv,
        (
            _channel_notes(rows),
            _kmeans_dataset_note(rows, settings.quick),
        ),
    )


@base.register("8")
def figure_8(settings: FigureSettings) -> FigureOutput:
    """Aggregate: privacy vs network load for G = 1..4 grouping sets."""
    sigma, n = 0.2, 100
    dummies = (0, 100, 1000) if settings.quick else (0, 25, 100, 200, 500, 1000)
    grid = _grid(
        "G={grouping_sets}",
        grouping_sets=range(1, 5),
        num_dummies=dummies,
        sampling_rate=(sigma,),
        batch_size=(n,),
    )
    title = "Aggr.: privacy vs net. load."
    rows, png, csv = _sweep(settings, "8", title, grid, aggregate_point, _NETWORK_LOAD)
    by_key = {(row["grouping_sets"], row["num_dummies"]): row for row in rows}
    ratios = [
        by_key[(g, d)]["epsilon"] / by_key[(1, d)]["epsilon"]
        for g in range(2, 5)
        for d in dummies
        if (g, d) in by_key and (1, d) in by_key
    ]
    load_ratios = [
        by_key[(g, d)]["messages_added"] / by_key[(1, d)]["messages_added"] / g
        for g in range(2, 5)
        for d in dummies
        if (g, d) in by_key and (1, d) in by_key
    ]
    return FigureOutput(
        "8",
        title,
        "Aggr.: privacy vs net. load. Ours: GROUPING SETS (g1), ..., (gG) for G = 1..4, "
        f"σ = {sigma:g}, n = {n}, d = {min(dummies)}..{max(dummies)}; plan ε at the whole "
        "plan's δ: the smaller of the PLD composition of the G clusters and Theorem 2's sum "
        f"(each at δ/G). {AGGREGATE_PARAMETERS}",
        png,
        csv,
        (
            f"Each grouping set adds a cluster on every tuple's data path: ε(G) / ε(1) = "
            f"{min(ratios):.3f}-{max(ratios):.3f} at equal (σ, n, d) (Theorem 2's sum would "
            "give at least G: the PLD composition grows more slowly), while the "
            f"messages added are G × those at G = 1 (measured ratio / G: "
            f"{min(load_ratios):.3f}-{max(load_ratios):.3f}): "
            "more grouping sets cost both privacy and load, as the paper's figure shows.",
            _reach_note(
                rows, kind="Aggregate, σ = 0.2, n = 100", plan_of=_aggregate_plan(settings)
            ),
        ),
    )
