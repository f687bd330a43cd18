"""``dpcomm audit local|scrambler|release|kmeans-release``: empirical lower bound on ε.

``local`` and ``scrambler`` audit the traffic against the accountant's upper bound
(`dpcomm.experiments.audit`); ``release`` audits the traffic and a noisy release observed
together against the composed ε a run reports (`dpcomm.experiments.release_audit`);
``kmeans-release`` likewise for one iteration of K-means released
(`dpcomm.experiments.kmeans_audit`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dpcomm._json import json_ready
from dpcomm.cli.defaults import (
    FAULT_KINDS,
    KMEANS_AUDIT_BATCH,
    KMEANS_AUDIT_BOUNDS,
    KMEANS_AUDIT_DELTA,
    KMEANS_AUDIT_DUMMIES,
    KMEANS_AUDIT_EPSILON,
    KMEANS_AUDIT_RUNS,
    KMEANS_AUDIT_SAMPLING,
    KMEANS_AUDIT_TARGETS,
    KMEANS_FAULT_KINDS,
    MAX_COUNT,
    RELEASE_AUDIT_BATCH,
    RELEASE_AUDIT_BOUNDS,
    RELEASE_AUDIT_DELTA,
    RELEASE_AUDIT_DUMMIES,
    RELEASE_AUDIT_EPSILON,
    RELEASE_AUDIT_MECHANISM,
    RELEASE_AUDIT_RUNS,
    RELEASE_AUDIT_SAMPLING,
    RELEASE_AUDIT_SQL,
    RELEASE_AUDIT_TARGETS,
    RELEASE_FAULT_KINDS,
    RELEASE_PAIR_NAMES,
)
from dpcomm.cli.mechanisms import declared_mechanism, mechanism_kind
from dpcomm.cli.options import DEFAULT_RELEASE_DELTA
from dpcomm.cli.output import add_progress_options, non_negative_int, show_progress

if TYPE_CHECKING:
    from dpcomm.experiments.audit import AuditReport, EventEstimate
    from dpcomm.experiments.kmeans_audit import KMeansAuditReport
    from dpcomm.experiments.release_audit import ReleaseAuditReport


def report_dict(report: AuditReport) -> dict[str, Any]:
    """The report as JSON-ready data."""
    declared = report.mechanism.declared
    document: dict[str, Any] = json_ready(
        {
            "kind": report.mechanism.kind,
            "mechanism": asdict(declared),
            "fault": report.mechanism.fault,
            "inputs": report.inputs.describe(report.mechanism.kind),
            "runs_per_input": report.runs,
            "confidence": report.confidence,
            "delta": report.delta,
            "upper_bound": report.upper_bound,
            "upper_method": report.upper_method,
            "lower_bound": report.lower_bound,
            "verdict": "PASS" if report.passed else "FAIL",
            "events_tried": report.events_tried,
            "best_event": None if report.best_event is None else asdict(report.best_event),
            "appendix_d": asdict(report.appendix_d),
            "seconds": report.seconds,
            "runs_per_second": report.runs_per_second,
        }
    )
    return document


def _print(report: AuditReport) -> None:
    from dpcomm.accounting import ScramblerMechanism

    declared = report.mechanism.declared
    batch = f", n={declared.batch_size}" if isinstance(declared, ScramblerMechanism) else ""
    title = (
        f"{mechanism_kind(declared)}: T={declared.num_targets}{batch}, "
        f"d={declared.num_dummies}, σ={declared.sampling_rate}"
    )
    verdict = "PASS" if report.passed else "FAIL"
    print(f"Audit of the {title}")
    if report.mechanism.fault != "none":
        print(f"seeded fault: {report.mechanism.fault} (claims the declared guarantee)")
    print(f"inputs: {report.inputs.describe(report.mechanism.kind)}")
    print(
        f"runs: {report.runs:,} per input through the engines' role steps, "
        f"{report.seconds:.1f} s ({report.runs_per_second:,.0f} runs/s)"
    )
    print(
        f"upper bound (accountant, δ = {report.delta:g}): ε = {report.upper_bound:.4f} "
        f"({report.upper_method})"
    )
    print(
        f"lower bound ({100 * report.confidence:g}% confidence, Clopper-Pearson, Bonferroni over "
        f"{report.events_tried} events): ε >= {report.lower_bound:.4f}"
    )
    _print_event(report.best_event, "input")
    print(f"verdict: {verdict} (PASS when the lower bound is at most the upper bound)")
    view = report.appendix_d
    print()
    print("Appendix D view (full outputs: counts per target and first message emitted)")
    print(
        f"  distinct outputs: {view.distinct_outputs:,}; seen under both inputs: "
        f"{view.outputs_seen_under_both:,} ({100 * view.mass_with_finite_ratio:.1f}% of runs)"
    )
    print(
        f"  never-seen share (capture-recapture, new in 2nd batch): "
        f"{100 * view.new_share_draws:.2f}% of runs, {100 * view.new_share_distinct:.2f}% of "
        "distinct outputs"
    )
    print(
        f"  largest |ln(c0/c1)| among outputs with c0, c1 >= {view.min_count}: "
        f"{view.max_log_ratio:.3f}"
    )
    for c0, c1, ratio in view.top_outputs[:5]:
        print(f"    c0 = {c0:>8,}  c1 = {c1:>8,}  log-ratio {ratio:.3f}")


def _print_event(event: EventEstimate | None, side: str) -> None:
    """The event that gave the lower bound, if one beat 0 (``side``: input, table)."""
    if event is not None:
        categories = f"{event.categories} categor{'y' if event.categories == 1 else 'ies'}"
        print(
            f"  best event: {categories}, likelier under {side} "
            f"{event.direction[0]}: {event.count_high}/{event.runs} vs {event.count_low}/"
            f"{event.runs}; P >= {event.high_lower:.3g} vs P <= {event.low_upper:.3g}"
        )


def command_audit(args: argparse.Namespace) -> int:
    """``dpcomm audit local|scrambler``."""
    from dpcomm.experiments.audit import AuditedMechanism, audit, seeded_fault

    traffic = {dest: getattr(args, dest) for dest in _TRAFFIC_FLAGS}
    declared = declared_mechanism(kind=args.kind, capped=args.capped, **traffic)
    mechanism = (
        AuditedMechanism(declared=declared)
        if args.fault is None
        else seeded_fault(declared, args.fault)
    )
    report = audit(
        mechanism,
        runs=args.runs,
        confidence=args.confidence,
        delta=args.delta,
        rng=args.seed,
        progress=not args.json and show_progress(args),
    )
    return _verdict(report, report_dict if args.json else None, _print)


def _audited_entries(report: Any) -> dict[str, Any]:
    """A release audit's countermeasure and release, as its JSON document gives them."""
    countermeasure = report.countermeasure
    return {
        "countermeasure": {
            "name": countermeasure.name,
            **{k: v for k, v in asdict(countermeasure).items() if k != "name"},
        },
        "release": {
            "mechanism": report.release.name,
            "epsilon": report.release.epsilon,
            "delta": report.release.delta,
        },
    }


def _claim_entries(report: Any) -> dict[str, Any]:
    """A release audit's runs, confidence and the claim it tests, for its JSON document."""
    return {
        "runs_per_table": report.runs,
        "confidence": report.confidence,
        "delta": report.delta,
        "traffic_epsilon": report.traffic_epsilon,
        "reported_epsilon": report.reported_epsilon,
        "summed_epsilon": report.summed_epsilon,
        "noise_scales": dict(report.noise_scales),
    }


def _verdict_entries(report: Any) -> dict[str, Any]:
    """A release audit's lower bound, verdict, events and time, for its JSON document."""
    best = report.best_event
    return {
        "lower_bound": report.lower_bound,
        "verdict": "PASS" if report.passed else "FAIL",
        "events_tried": report.events_tried,
        "best_event": None if best is None else asdict(best),
        "seconds": report.seconds,
    }


def release_report_dict(
    report: ReleaseAuditReport, *, sql: str = RELEASE_AUDIT_SQL
) -> dict[str, Any]:
    """The release audit's report as JSON-ready data (``sql``: the audited query)."""
    neighbours = report.neighbours
    chosen = neighbours.pair.name
    document: dict[str, Any] = json_ready(
        {
            "kind": "release",
            **_audited_entries(report),
            "num_targets": report.num_targets,
            "bounds": list(neighbours.bounds),
            "sql": sql,
            "fault": report.fault,
            "aggregate": report.aggregate,
            **_claim_entries(report),
            "release_epsilon": report.release_epsilon,
            "pairs": [
                {
                    "name": pair.name,
                    "selection_bound": pair.selection_bound,
                    "chosen": pair.name == chosen,
                }
                for pair in report.pairs
            ],
            "chosen_pair": {
                "name": chosen,
                "description": neighbours.describe(),
                "keys": list(neighbours.keys),
                "targets": list(neighbours.targets),
            },
            **_verdict_entries(report),
        }
    )
    return document


def _print_release(report: ReleaseAuditReport, *, sql: str = RELEASE_AUDIT_SQL) -> None:
    countermeasure = report.countermeasure
    neighbours = report.neighbours
    release = report.release
    budget = f"ε2 = {release.epsilon:g}"
    if release.name == "gaussian":
        budget += f", δ2 = {release.delta:g}"
    verdict = "PASS" if report.passed else "FAIL"
    print("Audit of traffic and noisy release together")
    print(f"traffic: {countermeasure.describe()}, T={report.num_targets} compute nodes")
    print(f"release: {release.name.capitalize()}, {budget}, of {sql}")
    for aggregate, scale in report.noise_scales:
        print(f"  {aggregate}: noise scale {scale:.4g}")
    if report.fault != "none":
        claims = (
            "claims the traffic and the other aggregates alone"
            if report.fault == "quantile-uncharged"
            else "claims the declared guarantee"
        )
        print(f"seeded fault: {report.fault} ({claims})")
    if report.aggregate is not None:
        print(f"observed: the traffic and {report.aggregate} alone")
    print(
        f"runs: {report.runs:,} per table (half choose the pair and events, half estimate "
        f"them), {report.seconds:.1f} s"
    )
    print("pairs tried (best event's lower bound on the selection half):")
    width = max(len(pair.name) for pair in report.pairs)
    for pair in report.pairs:
        mark = "  <- chosen" if pair.name == neighbours.pair.name else ""
        print(f"  {pair.name:<{width}}  ε >= {pair.selection_bound:.4f}{mark}")
    print(f"chosen pair: {neighbours.describe()}")
    print(
        f"claimed ε (traffic and release together, δ = {report.delta:g}): "
        f"{report.reported_epsilon:.4f} (traffic ε1 = {report.traffic_epsilon:.4f}, release "
        f"ε2 = {report.release_epsilon:g}, sum {report.summed_epsilon:.4f})"
    )
    print(
        f"lower bound ({100 * report.confidence:g}% confidence, Clopper-Pearson, Bonferroni over "
        f"{report.events_tried} events): ε >= {report.lower_bound:.4f}"
    )
    _print_event(report.best_event, "table")
    print(f"verdict: {verdict} (PASS when the lower bound is at most the claimed ε)")
    print(
        "note: the release's noise is OpenDP's and never seeded; the lower bound varies from "
        "audit to audit"
    )


def _release_audit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments both release audits take from their flags.

    The scramblers, the release, the bounds, the runs, the confidence, δ, the seeded fault and
    the seed.
    """
    from dpcomm.cli.execute import release_mechanism
    from dpcomm.plan.countermeasures import Scramblers

    countermeasure = Scramblers(
        sampling_rate=args.sampling_rate, batch_size=args.batch_size, num_dummies=args.num_dummies
    )
    return {
        "countermeasure": countermeasure,
        "release": release_mechanism(args),
        "bounds": args.bounds,
        "runs": args.runs,
        "confidence": args.confidence,
        "delta": args.delta,
        "fault": "none" if args.fault is None else args.fault,
        "rng": args.seed,
    }


def command_audit_release(args: argparse.Namespace) -> int:
    """``dpcomm audit release``."""
    from dpcomm.experiments.release_audit import audit_release

    report = audit_release(
        num_targets=args.num_targets,
        sql=args.sql,
        pairs=args.pairs,
        aggregate=_aggregate(args.aggregate),
        progress=not args.json and show_progress(args),
        **_release_audit_options(args),
    )

    def as_json(audited: ReleaseAuditReport) -> dict[str, Any]:
        return release_report_dict(audited, sql=args.sql)

    def printer(audited: ReleaseAuditReport) -> None:
        _print_release(audited, sql=args.sql)

    return _verdict(report, as_json if args.json else None, printer)


def _aggregate(text: str | None) -> int | str | None:
    """``--aggregate``: an index in the report's noise scales, or the start of one of them."""
    if text is None:
        return None
    return int(text) if text.isdigit() else text


def kmeans_report_dict(report: KMeansAuditReport) -> dict[str, Any]:
    """The K-means release audit's report as JSON-ready data."""
    neighbours = report.neighbours
    document: dict[str, Any] = json_ready(
        {
            "kind": "kmeans-release",
            **_audited_entries(report),
            "num_clusters": neighbours.num_clusters,
            "bounds": list(neighbours.bounds),
            "fault": report.fault,
            "aggregate": report.aggregate,
            **_claim_entries(report),
            "pairs": [
                {"name": name, "selection_bound": bound, "chosen": name == neighbours.pair}
                for name, bound in report.pairs
            ],
            "chosen_pair": {"name": neighbours.pair, "description": neighbours.describe()},
            **_verdict_entries(report),
        }
    )
    return document


def _print_kmeans_release(report: KMeansAuditReport) -> None:
    release = report.release
    budget = f"ε2 = {release.epsilon:g}"
    if release.name == "gaussian":
        budget += f", δ2 = {release.delta:g}"
    print("Audit of one iteration of K-means released: traffic and noisy release together")
    print(
        f"traffic: {report.countermeasure.describe()}, "
        f"K=T={report.neighbours.num_clusters} clusters"
    )
    print(f"release: {release.name.capitalize()}, {budget}, per-cluster centred sums and count")
    for aggregate, scale in report.noise_scales:
        print(f"  {aggregate}: noise scale {scale:.4g}")
    if report.aggregate is not None:
        print(f"observed: the traffic and {report.aggregate} alone")
    if report.fault != "none":
        print(f"seeded fault: {report.fault} (claims the declared guarantee)")
    print(f"runs: {report.runs:,} per table, {report.seconds:.1f} s")
    print("pairs tried (best event's lower bound on the selection half):")
    for name, bound in report.pairs:
        mark = "  <- chosen" if name == report.neighbours.pair else ""
        print(f"  {name:<21}  ε >= {bound:.4f}{mark}")
    print(f"chosen pair: {report.neighbours.describe()}")
    print(
        f"claimed ε (δ = {report.delta:g}): {report.reported_epsilon:.4f} "
        f"(traffic ε1 = {report.traffic_epsilon:.4f}, sum {report.summed_epsilon:.4f})"
    )
    print(
        f"lower bound ({100 * report.confidence:g}% confidence, Clopper-Pearson, Bonferroni over "
        f"{report.events_tried} events): ε >= {report.lower_bound:.4f}"
    )
    _print_event(report.best_event, "table")
    verdict = "PASS" if report.passed else "FAIL"
    print(f"verdict: {verdict} (PASS when the lower bound is at most the claimed ε)")


def command_audit_kmeans_release(args: argparse.Namespace) -> int:
    """``dpcomm audit kmeans-release``."""
    from dpcomm.experiments.kmeans_audit import audit_kmeans_release

    report = audit_kmeans_release(
        num_clusters=args.num_targets, aggregate=args.aggregate, **_release_audit_options(args)
    )
    return _verdict(report, kmeans_report_dict if args.json else None, _print_kmeans_release)


def _verdict(
    report: Any, as_json: Callable[[Any], dict[str, Any]] | None, printer: Callable[[Any], None]
) -> int:
    """Print ``report`` (its JSON document with ``as_json``); exit status 1 on FAIL.

    So that scripts and CI can gate on an audit.
    """
    if as_json is not None:
        print(json.dumps(as_json(report), indent=2))
    else:
        printer(report)
    return 0 if report.passed else 1


def _int(text: str) -> int:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from error
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    return int(value)


#: Most runs per input accepted (10^9 runs take hours already).
MAX_RUNS = 1_000_000_000


def _count(maximum: int) -> Callable[[str], int]:
    """An argparse type: an integer (``1e6`` accepted) at most ``maximum``."""

    def convert(text: str) -> int:
        value = _int(text)
        if value > maximum:  # the smallest value is checked by the library
            raise argparse.ArgumentTypeError(f"expected an integer <= {maximum}, got {text!r}")
        return value

    convert.__name__ = "int"
    return convert


def _bounds(text: str) -> tuple[float, float]:
    """An argparse type: ``LO:HI`` as (lo, hi) (lo < hi is checked by the library)."""
    low, colon, high = text.partition(":")
    try:
        if not colon:
            raise ValueError(text)
        return (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO:HI (e.g. -10:10), got {text!r}") from None


#: The traffic's flags, by the `declared_mechanism` parameter each sets (metavar: the flag's word).
_TRAFFIC_FLAGS = {
    "num_targets": "--targets",
    "sampling_rate": "--sampling",
    "num_dummies": "--dummies",
    "batch_size": "--batch",
}


def _add_traffic_flag(parser: argparse.ArgumentParser, dest: str, **options: Any) -> None:
    """The flag of ``dest`` (T, σ, d or n) with its type, default and help in ``options``."""
    flag = _TRAFFIC_FLAGS[dest]
    parser.add_argument(flag, dest=dest, metavar=flag.removeprefix("--").upper(), **options)


def _add_traffic_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``audit local`` and ``audit scrambler`` (the same for both)."""
    _add_traffic_flag(
        parser, "num_targets", type=_count(MAX_COUNT), required=True, help="T, number of targets"
    )
    _add_traffic_flag(parser, "sampling_rate", type=float, required=True, help="σ, sampling rate")
    _add_traffic_flag(
        parser,
        "num_dummies",
        type=_int,
        default=0,
        help="d, dummies per source (local) or per scrambler",
    )
    _add_traffic_flag(
        parser, "batch_size", type=_int, help="n, sources per scrambler (scrambler only)"
    )
    parser.add_argument("--capped", action="store_true", help="capped scrambler S̄_d")
    parser.add_argument(
        "--delta", type=float, help="δ of the comparison (default 1e-4 scrambler, 0 local)"
    )
    parser.add_argument(
        "--runs", type=_count(MAX_RUNS), default=1_000_000, help="runs per input (default 10^6)"
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the lower bound"
    )
    parser.add_argument(
        "--fault",
        choices=list(FAULT_KINDS),
        help="inject a seeded fault (the variant still claims the declared guarantee)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the runs")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_progress_options(parser)
    parser.set_defaults(handler=command_audit)


def _add_release_traffic_options(
    parser: argparse.ArgumentParser,
    defaults: tuple[int, int, float, int] = (
        RELEASE_AUDIT_TARGETS,
        RELEASE_AUDIT_BATCH,
        RELEASE_AUDIT_SAMPLING,
        RELEASE_AUDIT_DUMMIES,
    ),
    targets: str = "T, compute nodes of the grouping set",
) -> None:
    """A release audit's traffic: T, n, σ and d, with ``defaults`` (`audit_release`'s)."""
    count = _count(MAX_COUNT)
    for dest, kind, default, what in zip(
        ("num_targets", "batch_size", "sampling_rate", "num_dummies"),
        (count, count, float, count),
        defaults,
        (
            targets,
            "n, sources per scrambler: the tables' rows",
            "σ, sampling rate",
            "d, dummies per scrambler",
        ),
        strict=True,
    ):
        help_text = f"{what} (default {default:,g})"
        _add_traffic_flag(parser, dest, type=kind, default=default, help=help_text)


def _add_release_noise_options(
    parser: argparse.ArgumentParser,
    epsilon: float = RELEASE_AUDIT_EPSILON,
    bounds: tuple[float, float] = RELEASE_AUDIT_BOUNDS,
    clamped: str = "SUM(v)'s values are",
) -> None:
    """A release audit's release: its noise, ε2, δ2 and the clamping bounds."""
    low, high = bounds
    parser.add_argument(
        "--release",
        choices=["laplace", "gaussian"],
        default=RELEASE_AUDIT_MECHANISM,
        help=f"the release's noise, drawn by OpenDP (default {RELEASE_AUDIT_MECHANISM})",
    )
    parser.add_argument(
        "--release-epsilon",
        type=float,
        default=epsilon,
        metavar="E",
        help=f"ε2, the release's ε (default {epsilon:g})",
    )
    parser.add_argument(
        "--release-delta",
        type=float,
        metavar="D",
        help=f"with --release gaussian: δ2, the release's δ (default {DEFAULT_RELEASE_DELTA:g})",
    )
    parser.add_argument(
        "--bounds",
        type=_bounds,
        default=bounds,
        metavar="LO:HI",
        help=f"{clamped} clamped to [LO, HI] (default {low:g}:{high:g}; a negative LO "
        "is written --bounds=-5:5)",
    )


def _add_release_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``audit release``; their defaults are `audit_release`'s."""
    _add_release_traffic_options(parser)
    _add_release_noise_options(parser)
    parser.add_argument(
        "--delta",
        type=float,
        default=RELEASE_AUDIT_DELTA,
        help=(
            f"the traffic's δ, as a run's --delta (default {RELEASE_AUDIT_DELTA:g}); the "
            "comparison is at the composed δ the run reports"
        ),
    )
    parser.add_argument(
        "--runs",
        type=_count(MAX_RUNS),
        default=RELEASE_AUDIT_RUNS,
        help=f"runs per table (>= 100; default {RELEASE_AUDIT_RUNS:,}): half choose the pair and "
        "events, half estimate them",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the lower bound"
    )
    parser.add_argument(
        "--sql",
        default=RELEASE_AUDIT_SQL,
        help=f"the released query over t(k, v), grouped by k alone (default {RELEASE_AUDIT_SQL!r}; "
        "e.g. 'SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY k' for the quantile faults)",
    )
    parser.add_argument(
        "--aggregate",
        metavar="A",
        help="observe the traffic and one released aggregate alone, against the claim for that "
        "view: its index among the noise scales printed, or the start of its description "
        "(e.g. MEDIAN)",
    )
    parser.add_argument(
        "--pair",
        dest="pairs",
        action="append",
        choices=list(RELEASE_PAIR_NAMES),
        help="a candidate pair of neighbouring tables to try (repeat for several; default: "
        "every one that applies: signed only for bounds with lo < 0 < hi, quantile-near-tie "
        "only for a query with MEDIAN or QUANTILE_CONT, where the others' values sit on both "
        "sides of the row's and one value tips the released median)",
    )
    parser.add_argument(
        "--fault",
        choices=list(RELEASE_FAULT_KINDS),
        help="inject a seeded fault (the faulty program still claims the declared guarantee): "
        "old-sensitivity, the release's sensitivity computed as if each tuple arrived "
        "independently of the others; centred-own-row, likewise for centred sums only (a "
        "query with COUNT(v) or AVG(v) beside SUM(v), bounds with a midpoint other than 0); "
        "quantile-own-row, likewise for MEDIAN and QUANTILE_CONT only; quantile-add-remove, "
        "those calibrated to one value per grouping set; quantile-uncharged, "
        "the quantiles drawn but left out of the composition (claims the traffic and the "
        "other aggregates alone; needs a COUNT or SUM beside the quantile)",
    )
    _add_release_seed_and_json(parser)
    add_progress_options(parser)
    parser.set_defaults(handler=command_audit_release)


def _add_release_seed_and_json(parser: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--json`` of both release audits."""
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seed of the traffic's runs (the release's noise is OpenDP's, never seeded)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _add_kmeans_release_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``audit kmeans-release``; their defaults are `audit_kmeans_release`'s."""
    _add_release_traffic_options(
        parser,
        (KMEANS_AUDIT_TARGETS, KMEANS_AUDIT_BATCH, KMEANS_AUDIT_SAMPLING, KMEANS_AUDIT_DUMMIES),
        targets="K = T, clusters (one per compute node)",
    )
    _add_release_noise_options(
        parser, KMEANS_AUDIT_EPSILON, KMEANS_AUDIT_BOUNDS, "both coordinates are"
    )
    parser.add_argument(
        "--delta",
        type=float,
        default=KMEANS_AUDIT_DELTA,
        help=f"the traffic's δ, as a run's --delta (default {KMEANS_AUDIT_DELTA:g})",
    )
    parser.add_argument(
        "--runs",
        type=_count(MAX_RUNS),
        default=KMEANS_AUDIT_RUNS,
        help=f"runs per table (>= 100; default {KMEANS_AUDIT_RUNS:,})",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the lower bound"
    )
    parser.add_argument(
        "--aggregate",
        metavar="NAME",
        help="observe the traffic and one released vector alone (the start of its name: "
        "'SUM(x', 'SUM(y' or 'COUNT'), against the traffic composed with its noise alone "
        "(default: every vector, against the run's claim)",
    )
    parser.add_argument(
        "--fault",
        choices=list(KMEANS_FAULT_KINDS),
        help="inject a seeded fault (still claims the declared guarantee): own-row, the "
        "sums' sensitivity of the row's own change alone (W, not 1.5 W); unclamped, the "
        "points summed without their clamp to the bounds",
    )
    _add_release_seed_and_json(parser)
    parser.set_defaults(handler=command_audit_kmeans_release)


def add_audit_command(commands: Any) -> None:
    """Register ``audit local|scrambler|release|kmeans-release`` on the top-level subparsers."""
    parser = commands.add_parser(
        "audit",
        help="statistical audit: empirical lower bound on ε vs the claimed upper bound",
        description=(
            "Run a mechanism many times on two neighbouring inputs, through the role steps "
            "and randomness streams every engine runs, estimate a lower bound on ε "
            "(Clopper-Pearson on selected output events, Bonferroni over the events tried) "
            "and compare it with the guarantee claimed: PASS when lower <= claimed, exit "
            "status 1 on FAIL."
        ),
    )
    kinds = parser.add_subparsers(dest="kind", required=True)
    traffic = (
        ("local", "the local randomizer R_σ^d (sampling and flooding at each source)"),
        ("scrambler", "a scrambler of n sources adding d dummies (--batch n)"),
    )
    for name, what in traffic:
        _add_traffic_options(
            kinds.add_parser(
                name,
                help=f"the traffic of {what}",
                description=(
                    f"Audit the traffic of {what}: the empirical lower bound on ε against the "
                    "accountant's upper bound. Also prints the paper's Appendix D view "
                    "(per-output log-ratios, never-seen share)."
                ),
            )
        )
    _add_release_options(
        kinds.add_parser(
            "release",
            help="traffic and noisy release observed together",
            description=(
                "Audit traffic and a noisy release observed together: two neighbouring tables "
                f"t(k, v) released by {RELEASE_AUDIT_SQL!r} over the public keys, one "
                "scrambler of --batch sources each, searched among several neighbouring "
                "pairs on half the runs; the empirical lower bound on ε against the composed "
                "ε the run reports (traffic and release together)."
            ),
        )
    )
    _add_kmeans_release_options(
        kinds.add_parser(
            "kmeans-release",
            help="one iteration of K-means released: traffic and noisy centroids' sums",
            description=(
                "Audit one iteration of K-means released (noisy per-cluster centred sums and "
                "counts) with its traffic: two neighbouring tables of 2-d points, one "
                "scrambler of --batch points, K public initial centroids; the empirical lower "
                "bound on ε against the composed ε the run reports."
            ),
        )
    )
