"""Figures 3a-b, 4a-c and 6a-c of the paper: ε of the local and scrambler algorithms.

Every value comes from `dpcomm.accounting.account`, with the status it reports (valid,
estimate, printed); certified lower bounds come from the same report. The paper's refuted
formulas (Theorem "theorem-exact", Lemma 3's Bennett bound as printed, see docs/accounting.md)
are drawn dashed and labelled "as printed (refuted)". CSV columns: ``curve``, ``status``, the
mechanism's parameters, ``delta``, ``epsilon`` (``inf`` where a bound is unusable) and
``plotted`` (False for non-finite values and for lower bounds that are not available).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account, pure
from dpcomm.experiments.figures import base
from dpcomm.experiments.figures.base import DELTA, FigureOutput, FigureSettings, Row
from dpcomm.experiments.figures.thresholds import (
    MAX_DUMMIES,
    Threshold,
    least_integer,
    least_real,
    scrambler_epsilon,
)

#: Each figure's title (the paper's subcaption), on the image and in the index.
FIGURE_TITLES = {
    "3a": "Privacy of A_σ",
    "3b": "Privacy of A_σ^d (T=20)",
    "4a": "Varying sampling rate σ (n=100)",
    "4b": "Varying number d of dummies (n=100)",
    "4c": "Varying number n of messages (d=50)",
    "6a": "Impact of n (d=50, σ=0.2)",
    "6b": "Impact of d (n=100, σ=0.2)",
    "6c": "Impact of σ (n=500, d=50)",
}
#: T of every figure but 3a.
NUM_TARGETS = 20
#: R of Algorithm 2 in full mode (the paper's value) and in quick mode.
FULL_MONTE_CARLO_SAMPLES = 5000
QUICK_MONTE_CARLO_SAMPLES = 500

VALID, ESTIMATE, PRINTED, LOWER = "valid", "estimate", "printed", "lower-bound"

LOWER_LABEL = "certified lower bound"
THEOREM3_LABEL = "Theorem 3 as printed (refuted)"
VALID_CAPPED_LABEL = "valid pure ε: post-processing of R_σ (ε0)"
LOCAL_SAME_D_LABEL = "local A_σ^d', d' = min(d, T − 1) per source (n·d' in total)"
EXACT_LABEL = "exact (Lemma 2, valid)"
BENNETT_LABEL = "Bennett, corrected (valid)"
HOEFFDING_LABEL = "Hoeffding, Theorem 4 (valid)"
POST_PROCESSING_LABEL = "post-processing of R_σ (valid)"
BENNETT_PRINTED_LABEL = "Bennett as printed (refuted)"
THEOREM3_PURE_LABEL = "Theorem 3 pure ε, capped, as printed (refuted)"
LOCAL_SAME_TOTAL_LABEL = "local A_σ^⌊d/n⌋ (same total d)"
#: Legend text where the CSV's plain curve name would not render well.
_LEGEND = {
    LOCAL_SAME_D_LABEL: r"local $A_\sigma^{d'}$, $d'=\min(d, T-1)$ per source ($n d'$ in total)",
    LOCAL_SAME_TOTAL_LABEL: r"local $A_\sigma^{\lfloor d/n \rfloor}$ (same total $d$)",
}

_STYLE: dict[str, dict[str, Any]] = {
    VALID: {"linestyle": "-", "marker": "o", "markersize": 3},
    ESTIMATE: {"linestyle": ":", "marker": "x", "markersize": 4, "color": "tab:cyan"},
    PRINTED: {"linestyle": "--", "marker": "", "linewidth": 1.6},
    LOWER: {"linestyle": "-.", "marker": "", "color": "black", "linewidth": 1.2},
}

_COLORS = {
    EXACT_LABEL: "tab:blue",
    BENNETT_LABEL: "tab:green",
    HOEFFDING_LABEL: "tab:olive",
    POST_PROCESSING_LABEL: "tab:gray",
    BENNETT_PRINTED_LABEL: "tab:red",
    THEOREM3_LABEL: "tab:purple",
    THEOREM3_PURE_LABEL: "tab:purple",
    VALID_CAPPED_LABEL: "tab:blue",
    LOCAL_SAME_D_LABEL: "tab:orange",
    LOCAL_SAME_TOTAL_LABEL: "tab:brown",
}


def _row(
    curve: str,
    status: str,
    epsilon: float,
    *,
    num_targets: int,
    sampling_rate: float,
    num_dummies: int,
    batch_size: int | None = None,
    delta: float = 0.0,
    plotted: bool | None = None,
) -> Row:
    """One plotted point (``plotted`` defaults to ε being finite)."""
    return {
        "curve": curve,
        "status": status,
        "num_targets": num_targets,
        "sampling_rate": sampling_rate,
        "batch_size": "" if batch_size is None else batch_size,
        "num_dummies": num_dummies,
        "delta": delta,
        "epsilon": epsilon,
        "plotted": math.isfinite(epsilon)
        if plotted is None
        else plotted and math.isfinite(epsilon),
    }


def _local_epsilon(*, num_targets: int, sampling_rate: float, num_dummies: int) -> float:
    """Pure ε of R_σ^d: the accountant's ``theorem-1`` (Theorem "privacy_local", exact)."""
    randomizer = LocalRandomizer(
        num_targets=num_targets, sampling_rate=sampling_rate, num_dummies=num_dummies
    )
    values = account(randomizer, delta=0.0).method_values()
    value = values["theorem-1"]
    assert value is not None  # the accountant always reports theorem-1 for R_σ^d
    return value


def _local_row(curve: str, *, num_targets: int, sampling_rate: float, num_dummies: int) -> Row:
    """The point of R_σ^d on ``curve``: its pure ε by `_local_epsilon` (valid, exact)."""
    epsilon = _local_epsilon(
        num_targets=num_targets, sampling_rate=sampling_rate, num_dummies=num_dummies
    )
    return _row(
        curve,
        VALID,
        epsilon,
        num_targets=num_targets,
        sampling_rate=sampling_rate,
        num_dummies=num_dummies,
    )


def _plot(
    axes: Any,
    rows: Sequence[Row],
    x_key: str,
    *,
    color_of: Callable[[str], str | None] = _COLORS.get,
) -> None:
    """Draw one line per curve from the plotted rows; a curve with none is named in the legend."""
    for curve, points in base.group_curves(rows).items():
        label = _LEGEND.get(curve, curve)
        status = str(points[0]["status"])
        style = dict(_STYLE[status])
        color = color_of(curve)
        if color is not None and "color" not in style:
            style["color"] = color
        if curve == LOCAL_SAME_TOTAL_LABEL:  # drawn over ε0 where they coincide
            style.update(linestyle=":", marker="s", markerfacecolor="none", markersize=5)
        if curve == POST_PROCESSING_LABEL:  # a wide pale band: Bennett often equals it
            style.update(linewidth=9.0, alpha=0.35, marker="", zorder=1)
        if curve == EXACT_LABEL:  # wider than the lower bound drawn on top of it
            style.update(linewidth=2.5)
        # Bennett and Hoeffding both equal ε0 where neither amplifies: Bennett a wide line with
        # open squares under Hoeffding's thin line with triangles, so both stay visible.
        if curve == BENNETT_LABEL:
            style.update(linewidth=2.2, marker="s", markerfacecolor="none", markersize=6, zorder=2)
        if curve == HOEFFDING_LABEL:
            style.update(linewidth=1.0, marker="^", markersize=4, zorder=3)
        if not any(p["plotted"] for p in points):
            axes.plot([], [], label=f"{label}: unusable at every point", **style)
            continue
        # Points not drawn become NaN, so that the line breaks there instead of bridging them.
        xs = [float(p[x_key]) for p in points]
        ys = [float(p["epsilon"]) if p["plotted"] else math.nan for p in points]
        axes.plot(xs, ys, label=label, **style)


def _finish(
    axes: Any, *, xlabel: str, ylabel: str, legend_size: float = 7.0, below: bool = False
) -> None:
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    if below:  # many curves: the legend goes under the axes, in two columns
        axes.legend(fontsize=legend_size, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    else:
        axes.legend(fontsize=legend_size, loc="best")


def _values(rows: Sequence[Row], curve: str) -> list[float]:
    return [float(r["epsilon"]) for r in rows if r["curve"] == curve]


#: x-axis label of each parameter a sweep of figures 4 and 6 varies.
_AXIS_LABELS = {
    "sampling_rate": "sampling rate σ",
    "batch_size": "messages per scrambler n",
    "num_dummies": "scrambler dummies d",
}


def _sweep(
    settings: FigureSettings,
    name: str,
    key: str,
    grid: Sequence[float],
    point: Callable[[float], tuple[float, int, int]],
    rows_at: Callable[..., list[Row]],
    *,
    title: str,
    ylabel: str,
    width: float = 6.0,
    height: float = 5.0,
    y_cap: float | None = None,
) -> tuple[list[Row], Path, Path]:
    """A panel of figure 4 or 6: ``rows_at`` the (σ, n, d) of each ``point`` of ``grid``.

    ε is drawn against ``key``, the legend under the axes; with ``y_cap`` the y axis stops at
    the largest plotted ε (+5%), at most ``y_cap``. Writes the PNG and the CSV.
    """
    rows: list[Row] = []
    for x in settings.steps(grid, f"figure {name}"):
        sigma, n, d = point(x)
        rows += rows_at(sigma=sigma, batch_size=n, num_dummies=d)
    figure, axes = base.new_axes(width=width, height=height)
    _plot(axes, rows, key)
    if y_cap is not None:
        finite = [float(r["epsilon"]) for r in rows if r["plotted"]]
        axes.set_ylim(0.0, min(max(finite) * 1.05, y_cap))
    _finish(axes, xlabel=_AXIS_LABELS[key], ylabel=ylabel, below=True)
    png, csv = base.save_figure(settings, name, figure, rows, title=title)
    return rows, png, csv


# --------------------------------------------------------------------------------------------
# Figure 3: the local algorithm (Theorem "privacy_local", dpcomm's theorem-1)

FIGURE3_CAPTION = "Privacy of A_σ and A_σ^d varying σ and d."
FIGURE3A_TARGETS = (2, 5, 10, 20, 50, 100)
FIGURE3B_SAMPLING = (0.1, 0.3, 0.5, 0.7, 0.9)


def _sampling_grid(settings: FigureSettings) -> list[float]:
    if settings.quick:
        return [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]
    return [round(float(s), 4) for s in np.linspace(0.02, 1.0, 50)]


@base.register("3a")
def figure_3a(settings: FigureSettings) -> FigureOutput:
    """Figure 3a: pure ε of A_σ (the local theorem with d = 0) against σ, for several T."""
    grid = _sampling_grid(settings)
    rows = [
        _local_row(
            f"T = {num_targets}", num_targets=num_targets, sampling_rate=sigma, num_dummies=0
        )
        for num_targets in settings.steps(FIGURE3A_TARGETS, "figure 3a")
        for sigma in grid
    ]
    figure, axes = base.new_axes()
    _plot(axes, rows, "sampling_rate", color_of=lambda _: None)
    axes.axhline(math.log(3), color="black", linewidth=0.8, linestyle=":", label="ε = ln 3")
    _finish(axes, xlabel="sampling rate σ", ylabel="ε (pure, exact)", legend_size=8)
    png, csv = base.save_figure(settings, "3a", figure, rows, title=FIGURE_TITLES["3a"])
    # ε <= ln 3 iff (1 − σ)T/σ <= 2 iff σ >= T/(T + 2) (the tests check it on the curves).
    thresholds = {t: t / (t + 2) for t in FIGURE3A_TARGETS}
    listed = ", ".join(f"{thresholds[t]:.2f} for T = {t}" for t in (2, 20, 100))
    return FigureOutput(
        name="3a",
        title=FIGURE_TITLES["3a"],
        caption=(
            f"{FIGURE3_CAPTION} (a) Theorem 'privacy_local' (dpcomm's theorem-1; valid, "
            "exact for pure ε) with d = 0, "
            f"T ∈ {{{', '.join(map(str, FIGURE3A_TARGETS))}}}, {len(grid)} values of σ in "
            f"[{grid[0]}, 1]."
        ),
        png=png,
        csv=csv,
        notes=(
            f"ε ≤ ln 3 needs σ ≥ T/(T + 2): {listed}; the paper's 'σ larger than 0.9' holds "
            "for T ≥ 19, while with few targets a smaller σ suffices.",
        ),
    )


@base.register("3b")
def figure_3b(settings: FigureSettings) -> FigureOutput:
    """Figure 3b: pure ε of A_σ^d (the local theorem) against d, T = 20, for several σ."""
    dummies = [0, 1, 2, 3, 5, 8, 12, 16, 18, 19] if settings.quick else list(range(NUM_TARGETS))
    rows = [
        _local_row(f"σ = {sigma}", num_targets=NUM_TARGETS, sampling_rate=sigma, num_dummies=d)
        for sigma in settings.steps(FIGURE3B_SAMPLING, "figure 3b")
        for d in dummies
    ]
    figure, axes = base.new_axes()
    _plot(axes, rows, "num_dummies", color_of=lambda _: None)
    _finish(axes, xlabel="dummies per source d", ylabel="ε (pure, exact)", legend_size=8)
    png, csv = base.save_figure(settings, "3b", figure, rows, title=FIGURE_TITLES["3b"])

    def eps(sigma: float, d: int) -> float:
        return _local_epsilon(num_targets=NUM_TARGETS, sampling_rate=sigma, num_dummies=d)

    share = (eps(0.5, 0) - eps(0.5, 5)) / (eps(0.5, 0) - eps(0.5, NUM_TARGETS - 2))
    low, high = min(FIGURE3B_SAMPLING), max(FIGURE3B_SAMPLING)
    return FigureOutput(
        name="3b",
        title=FIGURE_TITLES["3b"],
        caption=(
            f"{FIGURE3_CAPTION} (b) Theorem 'privacy_local' (dpcomm's theorem-1), "
            f"T = {NUM_TARGETS}, d ∈ [0, {NUM_TARGETS - 1}] "
            f"(d = T − 1 is a broadcast, ε = 0), σ ∈ {{{', '.join(map(str, FIGURE3B_SAMPLING))}}}."
        ),
        png=png,
        csv=csv,
        notes=(
            "ε decreases with d with diminishing returns, as the paper says: at σ = 0.5 the "
            f"first 5 dummies give {share:.0%} of the decrease from d = 0 to d = 18.",
            "'The bigger σ, the faster the decrease' holds in relative terms: one dummy "
            f"removes {1 - eps(high, 1) / eps(high, 0):.0%} of ε at σ = {high} but "
            f"{1 - eps(low, 1) / eps(low, 0):.0%} at σ = {low} (in absolute terms "
            f"{eps(high, 0) - eps(high, 1):.2f} vs {eps(low, 0) - eps(low, 1):.2f}).",
        ),
    )


# --------------------------------------------------------------------------------------------
# Figure 4: pure ε of the capped scrambler

FIGURE4_CAPTION = (
    "Impact of the parameters σ, d and n on the privacy of Ā_σ^{n,d}, measured by ε, for T=20 "
    "targets. For comparison purposes, we also plot the privacy of A_σ^d (the local algorithm "
    "without scrambler), which adds nd dummy messages in total."
)


def _capped_rows(*, sigma: float, batch_size: int, num_dummies: int) -> list[Row]:
    """The curves of figure 4 at one (σ, n, d)."""
    n, d = batch_size, num_dummies
    mechanism = ScramblerMechanism(
        num_targets=NUM_TARGETS, sampling_rate=sigma, batch_size=n, num_dummies=d, capped=True
    )
    report = account(mechanism, delta=0.0, all_methods=True)
    values = report.method_values()
    common: dict[str, Any] = {
        "num_targets": NUM_TARGETS,
        "sampling_rate": sigma,
        "batch_size": n,
        "num_dummies": d,
    }
    valid = values["post-processing"]
    assert valid is not None
    rows = [_row(VALID_CAPPED_LABEL, VALID, valid, **common)]
    theorem = values["theorem-exact"]
    if theorem is not None:  # the theorem is stated for 1 <= d <= n − 1 only
        rows.append(_row(THEOREM3_LABEL, PRINTED, theorem, **common))
    lower = report.lower_bound
    assert lower is not None
    # The certified family (outputs on two targets) exists only for d <= n; elsewhere it is 0.
    available = d <= n and not (lower == 0.0 and valid > 0.0)
    rows.append(_row(LOWER_LABEL, LOWER, lower, plotted=available, **common))
    local_same_d = min(d, NUM_TARGETS - 1)
    rows.append(
        _row(
            LOCAL_SAME_D_LABEL,
            VALID,
            _local_epsilon(num_targets=NUM_TARGETS, sampling_rate=sigma, num_dummies=local_same_d),
            **common,
        )
    )
    local_same_total = min(d // n, NUM_TARGETS - 1)
    rows.append(
        _row(
            LOCAL_SAME_TOTAL_LABEL,
            VALID,
            _local_epsilon(
                num_targets=NUM_TARGETS, sampling_rate=sigma, num_dummies=local_same_total
            ),
            **common,
        )
    )
    return rows


def _printed_vs_lower(rows: Sequence[Row], key: str) -> tuple[int, int, float, float]:
    """(points where the printed theorem is below the lower bound, points compared, x, gap)."""
    lower = {
        r[key]: float(r["epsilon"]) for r in rows if r["curve"] == LOWER_LABEL and r["plotted"]
    }
    below, compared, worst_x, worst_gap = 0, 0, math.nan, 0.0
    for r in rows:
        if r["curve"] != THEOREM3_LABEL or r[key] not in lower:
            continue
        compared += 1
        gap = lower[r[key]] - float(r["epsilon"])
        if gap > 1e-9:
            below += 1
        if gap > worst_gap:
            worst_x, worst_gap = float(r[key]), gap
    return below, compared, worst_x, worst_gap


def _figure4_notes(rows: Sequence[Row], key: str, symbol: str) -> tuple[str, ...]:
    below, compared, worst_x, _ = _printed_vs_lower(rows, key)
    at = {float(r[key]): r for r in rows if r["curve"] == THEOREM3_LABEL}
    worst = at.get(worst_x)
    lower = {float(r[key]): float(r["epsilon"]) for r in rows if r["curve"] == LOWER_LABEL}
    valid = {float(r[key]): float(r["epsilon"]) for r in rows if r["curve"] == VALID_CAPPED_LABEL}
    first = (
        f"The paper's curve is optimistic: the printed Theorem 3 lies below dpcomm's certified "
        f"lower bound at {below} of the {compared} points where both exist"
    )
    if worst is not None:
        first += (
            f" (worst at {symbol} = {worst_x:g}: printed {float(worst['epsilon']):.2f}, lower "
            f"bound {lower[worst_x]:.2f}, valid {valid[worst_x]:.2f})"
        )
    shown = [float(r[key]) for r in rows if r["curve"] == LOWER_LABEL and r["plotted"]]
    margin = max((valid[x] - lower[x] for x in shown), default=math.nan)
    return (
        first + ".",
        f"The true pure ε lies between the lower bound and ε0 (the best valid bound), at most "
        f"{margin:.2f} apart: the capped scrambler improves pure ε only slightly over R_σ alone. "
        "The certified bound exists only for d ≤ n (outputs on two targets); elsewhere it is not "
        "drawn.",
        "The local algorithm with d dummies per source is a broadcast (ε = 0) once d ≥ T − 1 = "
        "19, at n times the scrambler's dummies; at the same total number of dummies "
        "(⌊d/n⌋ per source) it equals ε0 for d < n.",
    )


def _figure4_sweep(
    settings: FigureSettings,
    name: str,
    parameter: str,
    grid: Sequence[float],
    point: Callable[[float], tuple[float, int, int]],
) -> tuple[list[Row], Path, Path]:
    """A panel of Figure 4: the capped scrambler's pure ε as ``parameter`` runs over ``grid``."""
    return _sweep(
        settings,
        name,
        parameter,
        grid,
        point,
        _capped_rows,
        title=FIGURE_TITLES[name],
        ylabel="ε (pure)",
    )


def _figure4_output(
    name: str, panel: str, png: Path, csv: Path, notes: tuple[str, ...]
) -> FigureOutput:
    """A panel of Figure 4, its caption the figure's followed by the ``panel``'s."""
    return FigureOutput(
        name=name,
        title=FIGURE_TITLES[name],
        caption=f"{FIGURE4_CAPTION} {panel}",
        png=png,
        csv=csv,
        notes=notes,
    )


@base.register("4a")
def figure_4a(settings: FigureSettings) -> FigureOutput:
    """Figure 4a: pure ε of the capped scrambler against σ (n = 100, d = 50)."""
    n, d = 100, 50
    grid = (
        [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
        if settings.quick
        else [round(float(s), 3) for s in np.linspace(0.05, 1.0, 20)]
    )
    rows, png, csv = _figure4_sweep(settings, "4a", "sampling_rate", grid, lambda x: (x, n, d))
    return _figure4_output(
        "4a",
        f"(a) T = 20, n = {n}, d = {d}, {len(grid)} values of σ.",
        png,
        csv,
        _figure4_notes(rows, "sampling_rate", "σ"),
    )


@base.register("4b")
def figure_4b(settings: FigureSettings) -> FigureOutput:
    """Figure 4b: pure ε of the capped scrambler against d (n = 100, σ = 0.5)."""
    n, sigma = 100, 0.5
    grid = (
        [0, 1, 5, 10, 19, 30, 50, 70, 99]
        if settings.quick
        else [0, 1, 2, 5, 10, 15, 19, 25, 30, 40, 50, 60, 70, 80, 90, 99]
    )
    rows, png, csv = _figure4_sweep(
        settings, "4b", "num_dummies", grid, lambda x: (sigma, n, int(x))
    )
    lower = _values(rows, LOWER_LABEL)
    printed = _values(rows, THEOREM3_LABEL)
    notes = _figure4_notes(rows, "num_dummies", "d")
    claim = (
        f"Over d = 0..{grid[-1]} the certified lower bound only drops from {lower[0]:.2f} to "
        f"{lower[-1]:.2f} while the printed theorem claims {printed[-1]:.2f}: privacy does "
        "improve with d as the paper says, but far less than its curve shows."
    )
    return _figure4_output(
        "4b",
        (f"(b) T = 20, n = {n}, σ = {sigma}, d ∈ [0, {grid[-1]}] (the theorem's range d ≤ n − 1)."),
        png,
        csv,
        (notes[0], claim, notes[2]),
    )


@base.register("4c")
def figure_4c(settings: FigureSettings) -> FigureOutput:
    """Figure 4c: pure ε of the capped scrambler against n (d = 50, σ = 0.5)."""
    d, sigma = 50, 0.5
    grid = (
        [51, 60, 75, 100, 150, 200, 250, 300]
        if settings.quick
        else [51, 60, 75, 100, 125, 150, 200, 250, 300, 400, 500, 600]
    )
    rows, png, csv = _figure4_sweep(
        settings, "4c", "batch_size", grid, lambda x: (sigma, int(x), d)
    )
    lower = _values(rows, LOWER_LABEL)
    notes = _figure4_notes(rows, "batch_size", "n")
    claim = (
        f"n has no significant impact, as the paper says: the lower bound stays in "
        f"[{min(lower):.2f}, {max(lower):.2f}] and the valid bound is ε0 = "
        f"{_values(rows, VALID_CAPPED_LABEL)[0]:.2f} for every n."
    )
    return _figure4_output(
        "4c",
        (
            f"(c) T = 20, d = {d}, σ = {sigma}, n ∈ [{grid[0]}, {grid[-1]}] "
            "(the theorem needs d ≤ n − 1; Table 1's n ≤ 600)."
        ),
        png,
        csv,
        (notes[0], claim, notes[1]),
    )


# --------------------------------------------------------------------------------------------
# Figure 6: (ε, δ) of the uncapped scrambler, every method

FIGURE6_CAPTION = (
    "Impact of n, d and σ on the privacy of A_σ^{n,d}, measured by ε, for T=20 targets. For "
    "(ε,δ)-DP, we set δ=10^-4."
)

#: Plotted methods of the accountant, with their labels, in legend order.
FIGURE6_METHODS = (
    ("exact", EXACT_LABEL),
    ("bennett", BENNETT_LABEL),
    ("hoeffding", HOEFFDING_LABEL),
    ("monte-carlo", "Monte Carlo R={samples} (estimate)"),
    ("post-processing", POST_PROCESSING_LABEL),
    ("bennett-printed", BENNETT_PRINTED_LABEL),
)


def _scrambler_rows(
    *, sigma: float, batch_size: int, num_dummies: int, samples: int, seed: int
) -> list[Row]:
    """The curves of figure 6 at one (σ, n, d)."""
    n, d = batch_size, num_dummies
    mechanism = ScramblerMechanism(
        num_targets=NUM_TARGETS, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    report = account(
        mechanism, delta=DELTA, all_methods=True, monte_carlo_samples=samples, seed=seed
    )
    values = report.method_values()
    statuses = {m.name: m.status for m in report.methods}
    common: dict[str, Any] = {
        "num_targets": NUM_TARGETS,
        "sampling_rate": sigma,
        "batch_size": n,
        "num_dummies": d,
    }
    rows = []
    for method, label in FIGURE6_METHODS:
        value = values[method]
        assert value is not None
        rows.append(
            _row(label.format(samples=samples), statuses[method], value, delta=DELTA, **common)
        )
    if 1 <= d <= n - 1:  # the paper's pure-ε comparison (Theorem 3, stated for d <= n − 1)
        theorem = pure.capped_theorem_epsilon(
            num_targets=NUM_TARGETS,
            lie_rate=mechanism.local_randomizer.lie_rate,
            batch_size=n,
            num_dummies=d,
        )
        rows.append(_row(THEOREM3_PURE_LABEL, PRINTED, theorem, delta=0.0, **common))
    lower = report.lower_bound
    assert lower is not None
    rows.append(_row(LOWER_LABEL, LOWER, lower, delta=DELTA, **common))
    return rows


#: A valid bound "improves on ε0" when it is below it by more than this.
IMPROVES_BY = 1e-3


def _method_values(point: tuple[float, int, int]) -> dict[str, float | None]:
    sigma, n, d = point
    return scrambler_epsilon(
        num_targets=NUM_TARGETS, sampling_rate=sigma, batch_size=n, num_dummies=d, delta=DELTA
    )


def bennett_threshold(
    point: Callable[[float], tuple[float, int, int]],
    *,
    low: float,
    high: float,
    tolerance: float | None = None,
) -> Threshold | None:
    """Least x in [low, high] where the corrected Bennett bound improves on ε0 (accountant).

    ``point`` maps x to (σ, n, d); integers unless ``tolerance`` (then multiples of it).
    """

    def bennett(x: float) -> float:
        value = _method_values(point(x))["bennett"]
        return math.inf if value is None else value

    def improves(x: float, value: float) -> bool:
        epsilon0 = _method_values(point(x))["post-processing"]
        return epsilon0 is not None and value < epsilon0 - IMPROVES_BY

    if tolerance is None:
        return least_integer(
            lambda x: bennett(x), lambda x, v: improves(x, v), low=int(low), high=int(high)
        )
    return least_real(bennett, improves, low=low, high=high, tolerance=tolerance)


def _bennett_note(
    found: Threshold | None,
    point: Callable[[float], tuple[float, int, int]],
    symbol: str,
    high: float,
) -> str:
    """The Bennett threshold, stated with the accountant's numbers at it and one step below."""
    if found is None:
        return (
            f"; the corrected Bennett bound does not improve on ε0 for {symbol} up to {high:g} "
            "(accountant)"
        )
    sigma, n, d = point(found.value)
    epsilon0 = _method_values(point(found.value))["post-processing"]
    text = (
        f"; the corrected Bennett bound improves on ε0 from {symbol} = {found.value:g} "
        f"(σn + d = {sigma * n + d:g}: {found.epsilon:.3f} < ε0 = {epsilon0:.3f})"
    )
    if found.below is not None:
        text += f", not at {symbol} = {found.below:g} (accountant, not the plotted grid)"
    return text + ", in line with the paper's 'in the order of 300' for its analytical bound"


def _figure6_notes(
    rows: Sequence[Row],
    key: str,
    symbol: str,
    samples: int,
    extra: str = "",
    *,
    bennett: str,
) -> tuple[str, ...]:
    """Three notes for a figure 6 panel.

    Counts are over the plotted rows (and say so); thresholds (``extra``, ``bennett``) are
    computed by the accountant.
    """
    by_x: dict[float, dict[str, float]] = {}
    for r in rows:
        by_x.setdefault(float(r[key]), {})[str(r["curve"])] = float(r["epsilon"])
    gap = max(v[EXACT_LABEL] - v[LOWER_LABEL] for v in by_x.values())
    below = [x for x, v in by_x.items() if v[BENNETT_PRINTED_LABEL] < v[LOWER_LABEL] - 1e-9]
    worst = max(
        below, key=lambda x: by_x[x][LOWER_LABEL] - by_x[x][BENNETT_PRINTED_LABEL], default=None
    )
    first = (
        f"Exact Lemma 2 (valid) is within {gap:.3f} of the certified lower bound at every "
        f"plotted point{extra}. The printed Bennett bound is below the lower bound at "
        f"{len(below)} of {len(by_x)} plotted points"
    )
    if worst is not None:
        first += (
            f" (e.g. {symbol} = {worst:g}: printed {by_x[worst][BENNETT_PRINTED_LABEL]:.2f}, "
            f"lower bound {by_x[worst][LOWER_LABEL]:.2f}): the paper's curve is optimistic"
        )
    private = [x for x, v in by_x.items() if v[POST_PROCESSING_LABEL] > 0.0]  # ε0 > 0
    amplified = [x for x in private if by_x[x][EXACT_LABEL] < by_x[x][POST_PROCESSING_LABEL] - 1e-6]
    second = (
        f"Exact (ε, δ) is below the pure ε0 at {len(amplified)} of the {len(private)} plotted "
        "points with ε0 > 0: the crowd amplifies privacy even where σn + d is small" + bennett
    )
    bennett_values = {x: by_x[x][BENNETT_LABEL] for x in private}
    hoeffding = sum(v[HOEFFDING_LABEL] < v[POST_PROCESSING_LABEL] - 1e-3 for v in by_x.values())
    unusable = [x for x, v in bennett_values.items() if not math.isfinite(v)]
    monte_carlo = f"Monte Carlo R={samples} (estimate)"
    error = max(abs(v[monte_carlo] - v[EXACT_LABEL]) for v in by_x.values())
    third = (
        f"Hoeffding (Theorem 4) improves on ε0 at {hoeffding} of {len(by_x)} plotted points; "
        "elsewhere "
        "every valid bound is capped by ε0 (post-processing). Monte Carlo "
        f"(R = {samples}, an estimate) stays within {error:.2f} of exact."
    )
    if unusable:
        third += (
            f" Bennett is ∞ at {symbol} = {', '.join(f'{x:g}' for x in unusable)}: its bound "
            "is not monotone in ε near ε0, where the accountant's search checks it first."
        )
    return (first + ".", second + ".", third)


def _figure6(
    settings: FigureSettings,
    name: str,
    swept: tuple[str, str],
    grid: Sequence[float],
    point: Callable[[float], tuple[float, int, int]],
    shown: str,
    extra: str = "",
) -> FigureOutput:
    """One figure 6 panel: ε against the parameter ``swept`` (its key and symbol) over ``grid``.

    ``shown`` is the caption's account of the grid and the fixed parameters; ``extra`` a
    threshold the notes add (`_figure6_notes`).
    """
    key, symbol = swept
    samples = QUICK_MONTE_CARLO_SAMPLES if settings.quick else FULL_MONTE_CARLO_SAMPLES
    rows, png, csv = _sweep(
        settings,
        name,
        key,
        grid,
        point,
        functools.partial(_scrambler_rows, samples=samples, seed=settings.seed),
        title=FIGURE_TITLES[name],
        ylabel=f"ε (δ = {DELTA:g}; Theorem 3: pure)",
        width=6.5,
        height=5.4,
        y_cap=8.0,
    )
    return FigureOutput(
        name=name,
        title=FIGURE_TITLES[name],
        caption=_figure6_caption(name[-1], shown, samples),
        png=png,
        csv=csv,
        notes=_figure6_notes(
            rows, key, symbol, samples, extra, bennett=_bennett_text(name, point, symbol)
        ),
    )


def _figure6_caption(part: str, text: str, samples: int) -> str:
    return (
        f"{FIGURE6_CAPTION} ({part}) {text}; T = 20, δ = 1e-4, uncapped scramblers; Monte Carlo "
        f"with R = {samples} samples per m (seed fixed). Dashed: formulas as printed in the paper "
        "and refuted (docs/accounting.md)."
    )


def point_6a(batch_size: float) -> tuple[float, int, int]:
    """(σ, n, d) of figure 6a at n."""
    return 0.2, int(batch_size), 50


def point_6b(num_dummies: float) -> tuple[float, int, int]:
    """(σ, n, d) of figure 6b at d."""
    return 0.2, 100, int(num_dummies)


def point_6c(sampling_rate: float) -> tuple[float, int, int]:
    """(σ, n, d) of figure 6c at σ."""
    return float(sampling_rate), 500, 50


#: Where each figure 6 panel's Bennett threshold is searched (whatever the plotted grid):
#: (low, high, tolerance; None for integers). σ stops below 1, where ε0 = 0.
BENNETT_SEARCH: dict[str, tuple[float, float, float | None]] = {
    "6a": (10, 1000, None),
    "6b": (0, 1000, None),
    "6c": (0.01, 0.99, 0.001),
}


def _bennett_text(name: str, point: Callable[[float], tuple[float, int, int]], symbol: str) -> str:
    low, high, tolerance = BENNETT_SEARCH[name]
    found = bennett_threshold(point, low=low, high=high, tolerance=tolerance)
    return _bennett_note(found, point, symbol, high)


def least_dummies_6b(target_epsilon: float = 1.0) -> Threshold | None:
    """Least d with the accountant's best valid ε ≤ ``target_epsilon`` (n = 100, σ = 0.2)."""

    def epsilon(dummies: int) -> float:
        sigma, n, d = point_6b(dummies)
        mechanism = ScramblerMechanism(
            num_targets=NUM_TARGETS, sampling_rate=sigma, batch_size=n, num_dummies=d
        )
        return account(mechanism, delta=DELTA, monte_carlo_samples=0).guarantee.epsilon

    return least_integer(
        epsilon, lambda _d, value: value <= target_epsilon, low=0, high=MAX_DUMMIES
    )


@base.register("6a")
def figure_6a(settings: FigureSettings) -> FigureOutput:
    """Figure 6a: ε at δ = 1e-4 of the uncapped scrambler against n (d = 50, σ = 0.2)."""
    grid = (
        [10, 20, 50, 100, 200, 400, 700, 1000]
        if settings.quick
        else [10, 20, 30, 50, 75, 100, 150, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    )
    shown = f"n ∈ [{grid[0]}, {grid[-1]}], d = 50, σ = 0.2"
    return _figure6(settings, "6a", ("batch_size", "n"), grid, point_6a, shown)


@base.register("6b")
def figure_6b(settings: FigureSettings) -> FigureOutput:
    """Figure 6b: ε at δ = 1e-4 of the uncapped scrambler against d (n = 100, σ = 0.2)."""
    grid = (
        [0, 25, 50, 75, 99, 150, 200, 275, 400, 600, 800, 1000]
        if settings.quick
        else [0, 10, 25, 50, 75, 99, 150, 200, 250, 275, 300, 400, 500, 600, 700, 800, 900, 1000]
    )
    reach = least_dummies_6b()
    extra = (
        f" (ε ≤ 1 from d = {reach.value:g}: ε = {reach.epsilon:.4f}, and "
        f"{reach.epsilon_below:.4f} at d = {reach.below:g}; accountant, not the plotted grid)"
        if reach is not None and reach.below is not None
        else ""
    )
    shown = f"d ∈ [{grid[0]}, {grid[-1]}], n = 100, σ = 0.2"
    return _figure6(settings, "6b", ("num_dummies", "d"), grid, point_6b, shown, extra=extra)


@base.register("6c")
def figure_6c(settings: FigureSettings) -> FigureOutput:
    """Figure 6c: ε at δ = 1e-4 of the uncapped scrambler against σ (n = 500, d = 50)."""
    grid = (
        [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
        if settings.quick
        else [0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]
    )
    shown = f"σ ∈ [{grid[0]}, {grid[-1]}] (σ = 0 gives ε0 = ∞), n = 500, d = 50"
    return _figure6(settings, "6c", ("sampling_rate", "σ"), grid, point_6c, shown)
