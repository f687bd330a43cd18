"""Figure "attack": an observer's accuracy at guessing each source's compute node, vs ε.

Not a figure of the paper. For Aggregate (one grouping set over a uniform
synthetic table, C = T = 20 compute nodes) and K-means (mnist5k, K = 10), each point is a
simulated run attacked by `dpcomm.experiments.attacker.attack_run`; its ε is the
cluster's guarantee at δ = 1e-4 (the accountant's). Beside the points: the best guess from the
prior (baseline) and the bound that (ε, δ)-DP puts on *any* attacker
(`dpcomm.experiments.attacker.dp_accuracy_bound`, evaluated with the empirical prior).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcomm.data import load_mnist5k, synthetic_table
from dpcomm.engine import simulate
from dpcomm.experiments.attacker import attack_run, dp_accuracy_bound
from dpcomm.experiments.figures import base
from dpcomm.experiments.figures.base import DELTA, NUM_TARGETS, FigureOutput, FigureSettings, Row
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.plan.countermeasures import Countermeasure, LocalFlooding
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

#: The figure's title, on the image and in the index.
ATTACK_TITLE = "Attacker accuracy vs ε (Aggregate, K-means)"


def _grid(quick: bool) -> dict[str, list[tuple[str, Countermeasure]]]:
    """The countermeasures of each panel: (curve, countermeasure)."""
    dummies: tuple[int, ...]
    local_rates: tuple[float, ...]
    kmeans_rates: tuple[float, ...]
    if quick:
        dummies, local_rates, kmeans_rates = (0, 50, 300), (0.3, 0.6, 0.9), (0.3, 0.9)
    else:
        dummies = (0, 10, 25, 50, 100, 200, 400, 1000)
        local_rates = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
        kmeans_rates = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
    aggregate: list[tuple[str, Countermeasure]] = [("no countermeasure", NoCountermeasure())]
    aggregate += [
        (
            "scramblers σ=0.2, n=100 (d varies)",
            Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=d),
        )
        for d in dummies
    ]
    aggregate += [
        ("local R_σ^d, d=3 (σ varies)", LocalFlooding(sampling_rate=s, num_dummies=3))
        for s in local_rates
    ]
    kmeans: list[tuple[str, Countermeasure]] = [("no countermeasure", NoCountermeasure())]
    kmeans += [
        (
            "scramblers n=100, d=50 (σ varies)",
            Scramblers(sampling_rate=s, batch_size=100, num_dummies=50),
        )
        for s in kmeans_rates
    ]
    kmeans += [
        ("local R_σ^d, d=1 (σ varies)", LocalFlooding(sampling_rate=s, num_dummies=1))
        for s in local_rates
    ]
    return {"Aggregate": aggregate, "K-means": kmeans}


@base.register("attack")
def figure_attack(settings: FigureSettings) -> FigureOutput:
    """Attacker accuracy vs cluster ε, with the DP bound, for Aggregate and K-means."""
    quick = settings.quick
    table = synthetic_table(
        num_rows=4_000 if quick else 10_000, distribution="uniform", seed=settings.seed, name="t"
    )
    aggregate = AggregateProgram.from_sql(
        "SELECT g1, COUNT(*) AS n_rows FROM t GROUP BY g1",
        table,
        num_targets=NUM_TARGETS,
    )
    dataset = load_mnist5k()
    iterations = 2 if quick else 5
    kmeans = KMeansProgram(dataset.train_images, 10, iterations, seed=settings.seed)
    programs: dict[str, Any] = {"Aggregate": aggregate, "K-means": kmeans}
    rows: list[Row] = []
    grid = _grid(quick)
    jobs = [(query, curve, cm) for query, items in grid.items() for curve, cm in items]
    for query, curve, countermeasure in settings.steps(jobs, "attack", total=len(jobs)):
        run = simulate(programs[query], countermeasure, delta=DELTA, seed=settings.seed)
        result = attack_run(run)
        first = result.flows[0]
        rows.append(
            {
                "query": query,
                "curve": curve,
                **base.countermeasure_columns(countermeasure),
                "cluster_epsilon": result.epsilon,
                "plan_epsilon": result.plan_epsilon,
                "delta": DELTA,
                "accuracy": result.accuracy,
                "baseline": result.baseline,
                "advantage": result.advantage,
                "dp_bound": result.bound,
                "sources": first.num_sources,
                "flows_attacked": len(result.flows),
            }
        )
    png, csv = base.save_figure(settings, "attack", _plot(rows), rows, title=ATTACK_TITLE)
    notes = _notes(rows)
    return FigureOutput(
        name="attack",
        title=ATTACK_TITLE,
        caption=(
            "Not in the paper. An observer of all traffic who knows every other "
            "source's data guesses each source's compute node (MAP guess, docs/audit.md). "
            "Points: measured accuracy of simulated runs; dashed: the (ε, δ)-DP bound on any "
            "attacker for the run's empirical prior; dotted: the prior's best guess. "
            f"Aggregate: one grouping set, {'4,000' if quick else '10,000'} synthetic sources, "
            "C = T = 20; K-means: mnist5k, "
            f"K = 10, I = {iterations} (accuracy averaged over iterations). ε per cluster at "
            f"δ = {DELTA:g}."
        ),
        png=png,
        csv=csv,
        notes=tuple(notes),
    )


def _notes(rows: list[Row]) -> list[str]:
    notes = []
    for query in ("Aggregate", "K-means"):
        points = [r for r in rows if r["query"] == query]
        finite = [r for r in points if math.isfinite(r["cluster_epsilon"])]
        violations = [r for r in finite if r["accuracy"] > r["dp_bound"] + 1e-9]
        best = max(finite, key=lambda r: r["advantage"], default=None)
        text = (
            f"{query}: with no countermeasure the attacker is always right (accuracy 1); "
            f"baseline {points[0]['baseline']:.3f}. "
        )
        if best is not None:
            text += (
                f"Largest advantage with a countermeasure: {best['advantage']:+.3f} "
                f"({best['curve']}, ε = {best['cluster_epsilon']:.2f}, bound "
                f"{best['dp_bound']:.3f}). "
            )
        text += (
            "Every point is below its DP bound."
            if not violations
            else f"{len(violations)} point(s) exceed the DP bound: investigate."
        )
        notes.append(text)
    return notes


def _plot(rows: list[Row]) -> Any:
    """The figure: one panel per query."""
    figure, panels = base.new_axes(width=11.0, height=5.6, panels=2)
    markers = "osD^v"
    for axes, query in zip(panels, ("Aggregate", "K-means"), strict=True):
        points = [r for r in rows if r["query"] == query]
        finite = [r for r in points if math.isfinite(r["cluster_epsilon"])]
        curves = base.group_curves(finite)
        top = max((r["cluster_epsilon"] for r in finite), default=1.0)
        top = min(max(top, 1.0), 12.0)
        for index, (curve, members) in enumerate(curves.items()):
            ordered = sorted(members, key=lambda r: r["cluster_epsilon"])
            shown = [r for r in ordered if r["cluster_epsilon"] <= top]
            axes.plot(
                [r["cluster_epsilon"] for r in shown],
                [r["accuracy"] for r in shown],
                marker=markers[index % len(markers)],
                linewidth=1.2,
                label=f"attacker: {curve}",
            )
            axes.plot(
                [r["cluster_epsilon"] for r in shown],
                [r["dp_bound"] for r in shown],
                linestyle="--",
                linewidth=0.9,
                color=axes.lines[-1].get_color(),
                label="DP bound at each point (dashed, its curve's colour)"
                if index == 0
                else "_nolegend_",
            )
        baseline = points[0]["baseline"]
        axes.axhline(baseline, linestyle=":", color="grey", label="best guess from the prior")
        axes.axhline(
            1.0,
            linestyle="-.",
            color="black",
            linewidth=0.8,
            label="no countermeasure (ε = ∞)",
        )
        uniform = [
            dp_accuracy_bound(
                np.ones(NUM_TARGETS if query == "Aggregate" else 10), epsilon=e, delta=DELTA
            )
            for e in np.linspace(0.0, top, 60)
        ]
        axes.plot(
            np.linspace(0.0, top, 60),
            uniform,
            color="lightgrey",
            linewidth=0.8,
            label="DP bound, uniform prior",
        )
        axes.set_xlabel(f"cluster ε (δ = {DELTA:g})")
        axes.set_ylabel("share of sources' compute node guessed")
        axes.set_ylim(0.0, 1.05)
        axes.set_title(query, fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    return figure
