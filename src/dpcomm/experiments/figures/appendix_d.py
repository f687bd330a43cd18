"""Figure 5 and Appendix D ("Details of Numerical Simulation"): outputs of A_σ^{n,d} by simulation.

The uncapped scrambler (T = 4, σ = 0.2, d = 20, n = 20) is run many times on two neighbouring
inputs through the role steps every engine runs (`dpcomm.protocol.roles.source_messages`,
the coordinator's consecutive batches and `dpcomm.protocol.roles.scrambler_dummies`, one
scrambler per run, with the engines' randomness streams:
`dpcomm.experiments.audit.scrambler_runs`). The observer sees the
count vector of the n + d messages over the T targets (the scrambler shuffles), encoded as one
integer. For
each output O, c1(O) and c2(O) count its occurrences under each input and
r(O) = |ln(c1(O)/c2(O))| estimates its log-ratio of probabilities.

Beyond the paper: since n + d = 40 messages over T = 4 targets have only C(43, 3) = 12,341
possible outputs, the exact output distributions are computed (`exact_count_distribution`,
a dense numpy version of `dpcomm.accounting.brute_force.output_distribution`, which takes
minutes at this size since it expands the dummies once per count vector of the real messages).
They give the exact log-ratio of every output, the exact pure ε of this pair and the exact
probability mass of the outputs a simulation never saw, against which the paper's
capture-recapture estimate (share of new outputs in a second batch of runs) is compared.

CSV rows (``curve, rank, output, value, plotted``): ``count input 1``, ``count input 2``,
``r(O) observed`` (``inf`` when one count is 0, not drawn) and ``r(O) exact`` per observed
output, in plotted order (decreasing observed r), then ``summary: ...`` rows.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.accounting import LocalRandomizer
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.experiments.audit import CHUNK_SOURCES, scrambler_runs
from dpcomm.experiments.figures.base import (
    FigureOutput,
    FigureSettings,
    Row,
    new_axes,
    register,
    save_figure,
)
from dpcomm.plan.countermeasures import Scramblers
from dpcomm.protocol.randomness import Randomness

#: T, σ, d and n of the paper's Figure 5.
NUM_TARGETS = 4
SAMPLING_RATE = 0.2
NUM_DUMMIES = 20
BATCH_SIZE = 20
#: The first input: messages per target (skewed, summing to n); the second moves one message
#: from target 0 to target 3.
FIRST_INPUT_COUNTS = (8, 6, 4, 2)
MOVED_FROM, MOVED_TO = 0, 3
#: Runs per input (the paper used 7·10^8).
QUICK_RUNS = 2_000_000
FULL_RUNS = 20_000_000
#: Runs simulated at once (as many sources as the audit's chunks, for the same reason).
CHUNK_RUNS = CHUNK_SOURCES // BATCH_SIZE
#: The flow name of the runs (part of every stream's key).
FLOW = "figure 5"
#: Log-ratio above which an output counts as "large" in the notes.
LARGE_RATIO = 2.0

PAPER_CAPTION = (
    "Number of occurrences and corresponding log-ratio of probabilities (in decreasing order) "
    "for the distinct outputs obtained across 7×10^8 runs of A_σ^{n,d} (T=4, σ=0.2, d=20 and "
    "n=20)."
)


def neighbouring_inputs() -> tuple[IntArray, IntArray]:
    """The two neighbouring inputs: targets of the n messages, differing in one message."""
    first = np.repeat(np.arange(NUM_TARGETS), FIRST_INPUT_COUNTS).astype(np.int64)
    second = first.copy()
    second[int(np.flatnonzero(first == MOVED_FROM)[0])] = MOVED_TO
    return first, second


def _encoding_dims() -> tuple[int, ...]:
    """Dimensions of the code of a count vector: its first T − 1 entries (the last is implied)."""
    return (BATCH_SIZE + NUM_DUMMIES + 1,) * (NUM_TARGETS - 1)


def encode(counts: npt.NDArray[np.integer[Any]]) -> IntArray:
    """Integer code of each row of a (runs, T) count matrix whose rows sum to n + d."""
    columns = tuple(counts[:, j] for j in range(NUM_TARGETS - 1))
    return np.ravel_multi_index(columns, _encoding_dims()).astype(np.int64)


def decode(codes: IntArray) -> IntArray:
    """The (len(codes), T) count vectors of integer codes (inverse of `encode`)."""
    first = np.stack(np.unravel_index(codes, _encoding_dims()), axis=1).astype(np.int64)
    last = BATCH_SIZE + NUM_DUMMIES - first.sum(axis=1, keepdims=True)
    return np.concatenate([first, last], axis=1)


def simulate_outputs(
    inputs: IntArray, runs: int, randomness: Randomness, settings: FigureSettings, label: str
) -> tuple[IntArray, IntArray]:
    """Occurrences of each output code in the first and the second half of ``runs`` runs.

    Run r is scrambler r of one flow, its n sources holding ``inputs``, drawing from the
    streams of ``randomness`` (`dpcomm.experiments.audit.scrambler_runs`).
    """
    countermeasure = Scramblers(
        sampling_rate=SAMPLING_RATE, batch_size=BATCH_SIZE, num_dummies=NUM_DUMMIES
    )
    size = int(np.prod(_encoding_dims()))
    halves = (np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64))
    starts = range(0, runs, CHUNK_RUNS)
    for start in settings.steps(starts, f"figure 5, {label}", total=len(starts)):
        chunk = min(CHUNK_RUNS, runs - start)
        steps = scrambler_runs(
            np.tile(inputs, (chunk, 1)),
            countermeasure,
            num_targets=NUM_TARGETS,
            randomness=randomness,
            first_run=start,
            flow=FLOW,
        )
        codes = encode(steps.counts)
        # Runs before runs // 2 form the first capture-recapture batch, the rest the second.
        split = int(np.clip(runs // 2 - start, 0, chunk))
        halves[0][:] += np.bincount(codes[:split], minlength=size)
        halves[1][:] += np.bincount(codes[split:], minlength=size)
    return halves


def exact_count_distribution(
    inputs: IntArray, *, num_targets: int, sampling_rate: float, num_dummies: int
) -> FloatArray:
    """Exact distribution of the uncapped scrambler's count vector, as a dense T-dim array.

    Entry [c_1, ..., c_T] is the probability that the scrambler sends c_j messages to target
    j. Each source's message follows R_σ (its target with probability 1 − σ + σ/T, every other
    with σ/T) and each dummy is uniform, all independent (Algorithm 1 without cap), so the
    distribution is built by adding one message at a time. This is the distribution that
    `dpcomm.accounting.brute_force.output_distribution` enumerates, computed densely
    with numpy (the tests check that the two agree).
    """
    local = LocalRandomizer(num_targets=num_targets, sampling_rate=sampling_rate)
    rows = []
    for target in inputs:
        row = np.full(num_targets, local.other_probability)
        row[int(target)] = local.truth_probability
        rows.append(row)
    rows += [np.full(num_targets, 1.0 / num_targets)] * num_dummies
    total = len(rows)
    distribution = np.zeros((total + 1,) * num_targets)
    distribution[(0,) * num_targets] = 1.0
    for added, row in enumerate(rows):
        # After `added` messages no count exceeds `added`: only that corner block is moved.
        held = distribution[(slice(0, added + 1),) * num_targets].copy()
        distribution[(slice(0, added + 2),) * num_targets] = 0.0
        for j in range(num_targets):
            target_slice: list[slice] = [slice(0, added + 1)] * num_targets
            target_slice[j] = slice(1, added + 2)
            distribution[tuple(target_slice)] += row[j] * held
    return distribution


def exact_probabilities(inputs: IntArray) -> FloatArray:
    """Exact probability of every output code of figure 5's mechanism under ``inputs``."""
    distribution = exact_count_distribution(
        inputs,
        num_targets=NUM_TARGETS,
        sampling_rate=SAMPLING_RATE,
        num_dummies=NUM_DUMMIES,
    )
    size = int(np.prod(_encoding_dims()))
    outputs = decode(np.arange(size, dtype=np.int64))
    possible = np.all(outputs >= 0, axis=1)
    probabilities = np.zeros(size)
    probabilities[possible] = distribution[tuple(outputs[possible].T)]
    return probabilities


def capture_recapture_share(first: IntArray, second: IntArray) -> tuple[float, float]:
    """(share of new outputs in the second batch, Lincoln-Petersen estimate of the outputs)."""
    seen_first, seen_second = first > 0, second > 0
    new = int(np.sum(seen_second & ~seen_first))
    both = int(np.sum(seen_second & seen_first))
    share = new / max(int(seen_second.sum()), 1)
    estimate = int(seen_first.sum()) * int(seen_second.sum()) / both if both else math.inf
    return share, estimate


#: Groups of consecutive ranks in the left panel, and the width of the right panel's bins.
RANK_BINS = 40
LOSS_BIN_WIDTH = 0.1
FIGURE5_TITLE = "Occurrences and log-ratio of probabilities of the outputs of A_σ^{n,d}"


#: The curves of the aggregated panels in the CSV (one row per group or bin and statistic).
GROUP_CURVES = (
    "group: mean count input 1",
    "group: mean count input 2",
    "group: median r(O)",
    "group: least r(O)",
    "group: largest r(O)",
)
LOSS_CURVES = ("loss bin: exact probability input 1", "loss bin: observed frequency input 1")


def _row(curve: str, label: str, value: float) -> Row:
    return {
        "curve": curve,
        "rank": label,
        "output": "",
        "value": value,
        "plotted": bool(math.isfinite(value) and value > 0),
    }


def rank_bins(c1: IntArray, c2: IntArray, ratio: FloatArray, *, bins: int) -> list[Row]:
    """The outputs (in plotted order) cut into ``bins`` groups of consecutive ranks.

    Per group (``rank`` = "first-last"): the mean occurrences per output under each input,
    and the median, least and largest finite r(O) (NaN where none is finite).
    """
    rows: list[Row] = []
    edges = np.linspace(0, c1.shape[0], min(bins, c1.shape[0]) + 1).astype(int)
    for first, last in itertools.pairwise(edges):
        finite = ratio[first:last][np.isfinite(ratio[first:last])]
        stats = (
            (float(np.median(finite)), float(finite.min()), float(finite.max()))
            if finite.size
            else (math.nan,) * 3
        )
        values = (float(c1[first:last].mean()), float(c2[first:last].mean()), *stats)
        label = f"{first}-{last - 1}"
        rows += [
            _row(curve, label, value) for curve, value in zip(GROUP_CURVES, values, strict=True)
        ]
    return rows


def loss_histogram(
    p1: FloatArray, p2: FloatArray, observed1: FloatArray, *, width: float
) -> list[Row]:
    """Probability under input 1 of the outputs per bin of |ln P1/P2| (exact and observed)."""
    support = (p1 > 0) & (p2 > 0)
    losses = np.abs(np.log(p1[support] / p2[support]))
    bins = np.floor(losses / width + 1e-9).astype(int)
    exact = np.bincount(bins, weights=p1[support])
    seen = np.bincount(bins, weights=observed1[support], minlength=exact.shape[0])
    rows: list[Row] = []
    for index in range(exact.shape[0]):
        label = f"{index * width:.1f}-{(index + 1) * width:.1f}"
        rows.append(_row(LOSS_CURVES[0], label, float(exact[index])))
        rows.append(_row(LOSS_CURVES[1], label, float(seen[index])))
    return rows


def _series(rows: list[Row], curve: str) -> list[float]:
    return [
        float(row["value"]) if row["plotted"] else math.nan for row in rows if row["curve"] == curve
    ]


def _plot_rank_bins(axes: Any, rows: list[Row], pair_epsilon: float) -> None:
    counts1, counts2, median, least, largest = (
        np.array(_series(rows, curve)) for curve in GROUP_CURVES
    )
    positions = np.arange(counts1.shape[0])
    axes.bar(
        positions - 0.2, counts1, width=0.4, color="tab:red", alpha=0.6, label="input 1: mean c1(O)"
    )
    axes.bar(
        positions + 0.2,
        counts2,
        width=0.4,
        color="tab:blue",
        alpha=0.6,
        label="input 2: mean c2(O)",
    )
    axes.set_yscale("log")
    axes.set_xlabel(f"outputs O by decreasing observed r(O), {positions.shape[0]} groups of ranks")
    axes.set_ylabel("occurrences per output (group mean)")
    ratio_axes = axes.twinx()
    ratio_axes.fill_between(
        positions, least, largest, color="green", alpha=0.15, label="r(O): range in the group"
    )
    ratio_axes.plot(positions, median, color="green", linewidth=1.6, label="r(O): group median")
    ratio_axes.axhline(
        pair_epsilon,
        color="darkgreen",
        linestyle="--",
        linewidth=0.9,
        label=f"exact max |ln P1/P2| = {pair_epsilon:.2f}",
    )
    ratio_axes.set_ylabel("log-ratio r(O)")
    ratio_axes.set_ylim(0.0, 1.3 * max(pair_epsilon, float(np.nanmax(largest))))
    handles, labels = axes.get_legend_handles_labels()
    more_handles, more_labels = ratio_axes.get_legend_handles_labels()
    axes.legend(
        handles + more_handles,
        labels + more_labels,
        fontsize=7.5,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncol=3,
    )
    axes.set_title("the paper's view, aggregated", fontsize=9)


def _plot_loss_histogram(axes: Any, rows: list[Row], pair_epsilon: float) -> None:
    exact, seen = (np.array(_series(rows, curve)) for curve in LOSS_CURVES)
    centres = (np.arange(exact.shape[0]) + 0.5) * LOSS_BIN_WIDTH
    axes.bar(
        centres, exact, width=LOSS_BIN_WIDTH * 0.9, color="tab:gray", label="exact probability"
    )
    axes.plot(centres, seen, "o", color="tab:red", markersize=3, label="observed frequency")
    axes.axvline(
        pair_epsilon, color="darkgreen", linestyle="--", linewidth=0.9, label="ε of the pair"
    )
    axes.set_yscale("log")
    axes.set_xlabel("privacy loss |ln P1(O)/P2(O)|")
    axes.set_ylabel("probability under input 1")
    axes.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    axes.set_title("beyond the paper: where the probability sits", fontsize=9)


@register("5")
def figure_5(settings: FigureSettings) -> FigureOutput:
    """Figure 5: occurrences and log-ratios of the outputs of A_σ^{n,d} on neighbouring inputs."""
    runs = QUICK_RUNS if settings.quick else FULL_RUNS
    inputs = neighbouring_inputs()
    # The two inputs' runs draw from two rounds of the figure's seed: independent runs.
    batches = [
        simulate_outputs(x, runs, Randomness(settings.seed, round=i), settings, f"input {i + 1}")
        for i, x in enumerate(inputs)
    ]
    counts = [first + second for first, second in batches]
    exact = [exact_probabilities(x) for x in inputs]

    possible = math.comb(BATCH_SIZE + NUM_DUMMIES + NUM_TARGETS - 1, NUM_TARGETS - 1)
    observed, c1, c2, ratio = _ranked_outputs(counts[0], counts[1])
    p1, p2 = exact[0], exact[1]
    exact_ratio = np.abs(np.log(p1[observed] / p2[observed]))
    all_ratios = np.zeros_like(p1)
    support = (p1 > 0) & (p2 > 0)
    all_ratios[support] = np.abs(np.log(p1[support] / p2[support]))
    pair_epsilon = float(all_ratios[int(np.argmax(all_ratios))])

    shares = [capture_recapture_share(first, second) for first, second in batches]
    pooled = capture_recapture_share(batches[0][0] + batches[1][0], batches[0][1] + batches[1][1])
    unseen_mass = [float(p[c == 0].sum()) for p, c in zip(exact, counts, strict=True)]
    unseen_share = [1.0 - int((c > 0).sum()) / possible for c in counts]
    finite = np.isfinite(ratio)

    rows = _output_rows(observed, c1, c2, ratio, exact_ratio)
    summary: dict[str, float] = {
        "runs per input": runs,
        "possible outputs": possible,
        "distinct outputs observed": observed.shape[0],
        "outputs never observed under input 1 (share of possible)": unseen_share[0],
        "outputs never observed under input 2 (share of possible)": unseen_share[1],
        "exact probability of never-observed outputs, input 1": unseen_mass[0],
        "exact probability of never-observed outputs, input 2": unseen_mass[1],
        "capture-recapture share of new outputs in batch 2, input 1": shares[0][0],
        "capture-recapture share of new outputs in batch 2, input 2": shares[1][0],
        "capture-recapture share of new outputs in batch 2, pooled": pooled[0],
        "Lincoln-Petersen estimate of the number of outputs, pooled": pooled[1],
        "largest observed finite r(O)": float(ratio[finite].max()),
        "exact pure epsilon of this pair": pair_epsilon,
    }
    rows += [
        {"curve": f"summary: {name}", "rank": "", "output": "", "value": value, "plotted": False}
        for name, value in summary.items()
    ]

    binned = rank_bins(c1, c2, ratio, bins=RANK_BINS)
    losses = loss_histogram(p1, p2, counts[0] / runs, width=LOSS_BIN_WIDTH)
    rows += binned + losses
    figure, (left, right) = new_axes(width=11.0, height=5.2, panels=2)
    _plot_rank_bins(left, binned, pair_epsilon)
    _plot_loss_histogram(right, losses, pair_epsilon)
    png, csv = save_figure(settings, "5", figure, rows, title=FIGURE5_TITLE)

    return FigureOutput(
        name="5",
        title=FIGURE5_TITLE,
        caption=_figure_5_caption(runs, observed.shape[0], int((~finite).sum()), possible),
        png=png,
        csv=csv,
        notes=_figure_5_notes(
            p1,
            all_ratios,
            runs=runs,
            largest_observed=summary["largest observed finite r(O)"],
            pooled_share=pooled[0],
            unseen_share=unseen_share[0],
            unseen_mass=(unseen_mass[0], unseen_mass[1]),
            seen=int((counts[0] > 0).sum()),
            possible=possible,
        ),
    )


def _ranked_outputs(
    first: IntArray, second: IntArray
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """The outputs seen under either input by decreasing r(O), then decreasing frequency.

    Returns their codes, their counts under each input, and r(O) = |ln(c1/c2)| (∞ where one
    count is 0).
    """
    observed = np.flatnonzero((first + second) > 0)
    c1, c2 = first[observed], second[observed]
    both = (c1 > 0) & (c2 > 0)
    ratio = np.full(observed.shape[0], math.inf)
    ratio[both] = np.abs(np.log(c1[both] / c2[both]))
    order = np.lexsort((-(c1 + c2), -ratio))  # decreasing r, then decreasing frequency
    return observed[order], c1[order], c2[order], ratio[order]


def _output_rows(
    observed: IntArray, c1: IntArray, c2: IntArray, ratio: FloatArray, exact_ratio: FloatArray
) -> list[Row]:
    """One row per ranked output and curve: its counts, observed r(O) and exact log-ratio."""
    finite = np.isfinite(ratio)
    rows: list[Row] = []
    outputs = ["-".join(map(str, v)) for v in decode(observed)]
    for curve, values, shown in (
        ("count input 1", c1, c1 > 0),
        ("count input 2", c2, c2 > 0),
        ("r(O) observed", ratio, finite),
        ("r(O) exact", exact_ratio, np.zeros_like(finite)),
    ):
        rows += [
            {
                "curve": curve,
                "rank": rank,
                "output": outputs[rank],
                "value": float(values[rank]) if curve.startswith("r") else int(values[rank]),
                "plotted": bool(shown[rank]),
            }
            for rank in range(observed.shape[0])
        ]
    return rows


def _figure_5_caption(runs: int, distinct: int, undefined: int, possible: int) -> str:
    """Figure 5's caption: the paper's, then what these runs and panels show."""
    return (
        f"{PAPER_CAPTION} Ours: {runs:,} runs per input (not 7×10^8), through the role "
        f"steps dpcomm's engines run; inputs {FIRST_INPUT_COUNTS} messages per target and "
        f"the same with one message moved from target {MOVED_FROM} to {MOVED_TO}. Left, "
        f"the paper's view aggregated: the {distinct:,} observed outputs by "
        f"decreasing observed r(O) (undefined where one count is 0: "
        f"{undefined} outputs, first) in "
        f"{RANK_BINS} groups of consecutive ranks; bars = mean occurrences per output of "
        "the group under each input (log scale), line and band = median and range of r(O) "
        "in the group, dashed = the exact largest log-ratio over all outputs. Right, beyond "
        f"the paper: the exact probability under input 1 of the outputs in each "
        f"{LOSS_BIN_WIDTH:g}-wide bin of |ln P1/P2| (all {possible:,} outputs), and the "
        "frequency observed in the runs."
    )


def _figure_5_notes(
    p1: FloatArray,
    all_ratios: FloatArray,
    *,
    runs: int,
    largest_observed: float,
    pooled_share: float,
    unseen_share: float,
    unseen_mass: tuple[float, float],
    seen: int,
    possible: int,
) -> tuple[str, str]:
    """Figure 5's notes: where the large log-ratios sit, and what capture-recapture misses."""
    worst = int(np.argmax(all_ratios))
    pair_epsilon = float(all_ratios[worst])
    large = all_ratios > LARGE_RATIO
    ties = int(np.sum(all_ratios >= pair_epsilon - 1e-9))
    attained = "only by" if ties == 1 else f"by {ties} outputs, e.g."
    worst_output = tuple(int(v) for v in decode(np.array([worst]))[0])
    return (
        "As the paper says, the large log-ratios belong to rare outputs: in the exact "
        f"distribution the {int(large.sum()):,} outputs with |ln P1/P2| > {LARGE_RATIO:g} "
        f"have total probability {float(p1[large].sum()):.1e} under input 1, and the pure "
        f"ε of this pair, {pair_epsilon:.2f} (= ε0 of R_σ), is attained {attained} "
        f"O = {worst_output}, of probability {float(p1[worst]):.1e}. The observed r(O) "
        f"reaches {largest_observed:.2f}, noise on counts of a few.",
        f"Capture-recapture (two batches of {runs // 2:,} runs) finds {pooled_share:.1%} new "
        "outputs in the second batch (the paper's estimate of the share never seen), but "
        f"{unseen_share:.0%} of the {possible:,} possible outputs (C(43, 3)) were never "
        f"seen under input 1 ({seen:,} seen). They carry an exact "
        f"probability of only {unseen_mass[0]:.1e} (input 1) and {unseen_mass[1]:.1e} "
        "(input 2): the procedure underestimates the unseen share; the unseen mass, which "
        "is what matters, is small.",
    )
