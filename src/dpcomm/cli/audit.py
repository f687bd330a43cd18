"""``dpcomm audit local|scrambler``: empirical lower bound on ε vs the accountant's bound."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from dpcomm._json import json_ready
from dpcomm.accounting import ScramblerMechanism
from dpcomm.cli.mechanisms import check_family_options, declared_mechanism, mechanism_kind
from dpcomm.cli.output import add_progress_options, non_negative_int, show_progress
from dpcomm.experiments.audit import FAULT_KINDS, AuditedMechanism, AuditReport, audit, seeded_fault
from dpcomm.validation import MAX_COUNT


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
    event = report.best_event
    if event is not None:
        print(
            f"  best event: {event.categories} categories, likelier under input "
            f"{event.direction[0]}: {event.count_high}/{event.runs} vs {event.count_low}/"
            f"{event.runs}; P >= {event.high_lower:.3g} vs P <= {event.low_upper:.3g}"
        )
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


def command_audit(args: argparse.Namespace) -> int:
    """``dpcomm audit``."""
    check_family_options(args, "audit")
    declared = declared_mechanism(
        num_targets=args.targets,
        sampling_rate=args.sampling,
        num_dummies=args.dummies,
        batch_size=args.batch,
        capped=args.capped,
    )
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
    if args.json:
        print(json.dumps(report_dict(report), indent=2))
    else:
        _print(report)
    # Exit status 1 on FAIL, so that scripts and CI can gate on the audit.
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


def add_audit_command(commands: Any) -> None:
    """Register ``audit`` on the top-level subparsers."""
    parser = commands.add_parser(
        "audit",
        help="statistical audit: empirical lower bound on ε vs the accountant's upper bound",
        description=(
            "Run the mechanism many times on two neighbouring inputs, through the role steps "
            "and randomness streams every engine runs, estimate a lower bound on "
            "ε (Clopper-Pearson on selected output events, Bonferroni over the events tried) "
            "and compare it with the accountant's upper bound: PASS when lower <= upper. Also "
            "prints the paper's Appendix D view (per-output log-ratios, never-seen share)."
        ),
    )
    parser.add_argument("kind", choices=["local", "scrambler"], help="mechanism family")
    parser.add_argument(
        "--targets", type=_count(MAX_COUNT), required=True, help="T, number of targets"
    )
    parser.add_argument("--sampling", type=float, required=True, help="σ, sampling rate")
    parser.add_argument(
        "--dummies", type=_int, default=0, help="d, dummies per source (local) or per scrambler"
    )
    parser.add_argument("--batch", type=_int, help="n, sources per scrambler (scrambler only)")
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
