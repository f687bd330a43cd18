"""Figures 3a-b, 4a-c, 5 and 6a-c in quick mode: files, CSV contents and numeric spot checks."""

import csv
import itertools
import math
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from dpcomm.accounting import ScramblerMechanism, account
from dpcomm.accounting.brute_force import output_distribution
from dpcomm.experiments.figures import accounting_figures, appendix_d
from dpcomm.experiments.figures.base import REGISTRY, FigureOutput, FigureSettings
from dpcomm.protocol.randomness import Randomness

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CURVE_COLUMNS = [
    "curve",
    "status",
    "num_targets",
    "sampling_rate",
    "batch_size",
    "num_dummies",
    "delta",
    "epsilon",
    "plotted",
]
COLUMNS = dict.fromkeys(("3a", "3b", "4a", "4b", "4c", "6a", "6b", "6c"), CURVE_COLUMNS)
COLUMNS["5"] = ["curve", "rank", "output", "value", "plotted"]
SLOW = {"5"}  # about 10 s in quick mode
NAMES = [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in COLUMNS]
X_KEY = {"4a": "sampling_rate", "4b": "num_dummies", "4c": "batch_size"}
X_KEY |= {"6a": "batch_size", "6b": "num_dummies", "6c": "sampling_rate"}


@pytest.fixture
def make(made_once):
    """Each figure made once in quick mode, on demand (once in the session, by one worker)."""

    def made(name: str) -> FigureOutput:
        return made_once(
            f"accounting-{name}",
            lambda directory: REGISTRY[name](FigureSettings(out_dir=directory, quick=True, seed=0)),
        )

    return made


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def by_point(rows, key):
    """{x: {curve: ε}} from figure 4 or 6 rows."""
    points: dict[float, dict[str, float]] = {}
    for row in rows:
        points.setdefault(float(row[key]), {})[row["curve"]] = float(row["epsilon"])
    return points


@pytest.mark.parametrize("name", NAMES)
def test_png_and_csv_are_written(make, name):
    output = make(name)
    assert output.name == name
    assert output.png.name == f"{name}.png" and output.csv.name == f"{name}.csv"
    assert output.png.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(output.png)
    assert image.shape[0] > 100 and image.shape[1] > 100
    with output.csv.open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS[name]
        rows = list(reader)
    assert len(rows) > 0
    assert any(row["plotted"] == "True" for row in rows)
    assert output.title and output.caption
    assert 1 <= len(output.notes) <= 3


def test_3a_is_theorem_1_and_ln3_threshold(make):
    rows = read_rows(make("3a").csv)
    assert {int(r["num_targets"]) for r in rows} == {2, 5, 10, 20, 50, 100}
    for row in rows:
        t, sigma, eps = int(row["num_targets"]), float(row["sampling_rate"]), float(row["epsilon"])
        assert eps == pytest.approx(math.log1p((1 - sigma) * t / sigma), abs=1e-12)
        # The note's threshold: ε <= ln 3 exactly when σ >= T/(T + 2).
        assert (eps <= math.log(3) + 1e-12) == (sigma >= t / (t + 2) - 1e-12)


def test_3b_values_and_monotone_in_d(make):
    rows = read_rows(make("3b").csv)
    value = {(float(r["sampling_rate"]), int(r["num_dummies"])): float(r["epsilon"]) for r in rows}
    assert value[(0.5, 0)] == pytest.approx(math.log((1 - 0.5) * 20 / 0.5 + 1), rel=1e-12)
    assert value[(0.5, 19)] == 0.0  # d = T − 1 is a broadcast
    for sigma in accounting_figures.FIGURE3B_SAMPLING:
        curve = [value[(sigma, d)] for d in sorted(d for s, d in value if s == sigma)]
        assert all(a > b for a, b in itertools.pairwise(curve))


@pytest.mark.parametrize("name", ["4a", "4b", "4c"])
def test_4_valid_above_lower_bound_and_printed_refuted(make, name):
    rows = read_rows(make(name).csv)
    points = by_point(rows, X_KEY[name])
    lower_label = accounting_figures.LOWER_LABEL
    valid_label = accounting_figures.VALID_CAPPED_LABEL
    printed_label = accounting_figures.THEOREM3_LABEL
    below = 0
    for values in points.values():
        assert values[valid_label] >= values[lower_label] - 1e-9
        if printed_label in values and values[lower_label] > values[printed_label] + 1e-6:
            below += 1
    assert below >= len(points) // 2  # the printed theorem falls below the certified bound
    for row in rows:
        n, d = int(row["batch_size"]), int(row["num_dummies"])
        if row["curve"] == printed_label:
            assert row["status"] == "printed" and 1 <= d <= n - 1
        if row["curve"] == lower_label and row["plotted"] == "True":
            assert d <= n
        if row["curve"] == accounting_figures.LOCAL_SAME_D_LABEL:
            sigma = float(row["sampling_rate"])
            d_local = min(d, 19)
            expected = (
                0.0 if d_local == 19 else math.log1p((1 - sigma) * 20 / (sigma * (d_local + 1)))
            )
            assert float(row["epsilon"]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("name", ["6a", "6b", "6c"])
def test_6_valid_curves_above_lower_bound(make, name):
    rows = read_rows(make(name).csv)
    valid = {r["curve"] for r in rows if r["status"] == "valid"}
    assert valid == {
        accounting_figures.EXACT_LABEL,
        accounting_figures.BENNETT_LABEL,
        accounting_figures.HOEFFDING_LABEL,
        accounting_figures.POST_PROCESSING_LABEL,
    }
    statuses = {r["curve"]: r["status"] for r in rows}
    assert statuses[accounting_figures.BENNETT_PRINTED_LABEL] == "printed"
    assert statuses["Monte Carlo R=500 (estimate)"] == "estimate"
    for x, values in by_point(rows, X_KEY[name]).items():
        for label in valid:
            assert values[label] >= values[accounting_figures.LOWER_LABEL] - 1e-9, (x, label)
    for row in rows:
        if row["epsilon"] == "inf":
            assert row["plotted"] == "False"
        assert float(row["delta"]) == (0.0 if "Theorem 3" in row["curve"] else 1e-4)


def test_6b_exact_reaches_one_at_275_dummies(make):
    rows = read_rows(make("6b").csv)
    value = by_point(rows, "num_dummies")[275.0]
    assert value[accounting_figures.EXACT_LABEL] <= 1.0
    assert value[accounting_figures.EXACT_LABEL] == pytest.approx(0.998, abs=2e-3)
    assert value[accounting_figures.BENNETT_PRINTED_LABEL] < value[accounting_figures.LOWER_LABEL]


def test_6a_hoeffding_is_never_worse_than_post_processing(make):
    # Every valid bound is 0 at ε ≥ ε0 (post-processing), so Hoeffding never exceeds the pure
    # ε0 of R_σ, even where its concentration term alone gives no finite ε (small n).
    from dpcomm.accounting import LocalRandomizer
    from dpcomm.accounting.pure import local_pure_epsilon

    rows = read_rows(make("6a").csv)
    hoeffding = [r for r in rows if r["curve"] == accounting_figures.HOEFFDING_LABEL]
    assert len(hoeffding) == len({r["batch_size"] for r in rows})
    for row in hoeffding:
        local = LocalRandomizer(
            num_targets=int(float(row["num_targets"])), sampling_rate=float(row["sampling_rate"])
        )
        assert float(row["epsilon"]) <= local_pure_epsilon(local) + 1e-6


def test_5_encoding_and_small_simulation(tmp_path, monkeypatch):
    first, second = appendix_d.neighbouring_inputs()
    assert first.shape == second.shape == (appendix_d.BATCH_SIZE,)
    assert int(np.sum(first != second)) == 1
    counts = np.array([[40, 0, 0, 0], [10, 10, 10, 10], [0, 1, 2, 37]])
    assert np.array_equal(appendix_d.decode(appendix_d.encode(counts)), counts)
    settings = FigureSettings(out_dir=tmp_path, quick=True)
    halves = appendix_d.simulate_outputs(first, 1001, Randomness(1), settings, "t")
    assert int(halves[0].sum()) == 500 and int(halves[1].sum()) == 501
    # Run r is scrambler r whatever the chunks: smaller chunks give the same runs.
    monkeypatch.setattr(appendix_d, "CHUNK_RUNS", 7)
    again = appendix_d.simulate_outputs(first, 1001, Randomness(1), settings, "t")
    assert all(np.array_equal(a, b) for a, b in zip(halves, again, strict=True))
    share, _ = appendix_d.capture_recapture_share(*halves)
    assert 0.0 <= share <= 1.0


def test_5_exact_distribution_matches_enumeration():
    mechanism = ScramblerMechanism(num_targets=3, sampling_rate=0.3, batch_size=4, num_dummies=3)
    inputs = np.array([0, 0, 1, 2])
    dense = appendix_d.exact_count_distribution(
        inputs, num_targets=3, sampling_rate=0.3, num_dummies=3
    )
    enumerated = output_distribution(mechanism, [0, 0, 1, 2])
    assert dense.sum() == pytest.approx(1.0, abs=1e-12)
    assert int(np.count_nonzero(dense)) == len(enumerated) == math.comb(9, 2)
    for counts, p in enumerated.items():
        assert dense[counts] == pytest.approx(p, rel=1e-10)


@pytest.mark.slow
def test_5_counts_match_runs_and_exact_distribution(make):
    rows = read_rows(make("5").csv)
    summary = {
        r["curve"].removeprefix("summary: "): float(r["value"]) for r in rows if r["rank"] == ""
    }
    runs = int(summary["runs per input"])
    assert runs == appendix_d.QUICK_RUNS
    assert summary["possible outputs"] == math.comb(43, 3)
    for curve in ("count input 1", "count input 2"):
        assert sum(int(r["value"]) for r in rows if r["curve"] == curve) == runs
    assert 0.0 < summary["exact probability of never-observed outputs, input 1"] < 1e-2
    assert summary["exact pure epsilon of this pair"] == pytest.approx(math.log(17), rel=1e-9)
    # The runs of the role steps follow the exact distribution (6-sigma band per output).
    exact = appendix_d.exact_probabilities(appendix_d.neighbouring_inputs()[0])
    for row in rows:
        if row["curve"] != "count input 1":
            continue
        code = appendix_d.encode(np.array([[int(v) for v in row["output"].split("-")]]))[0]
        expected = runs * exact[code]
        if expected >= 100:
            assert abs(int(row["value"]) - expected) <= 6 * math.sqrt(expected)
    ratios = [float(r["value"]) for r in rows if r["curve"] == "r(O) observed"]
    finite = [r for r in ratios if math.isfinite(r)]
    assert finite == sorted(finite, reverse=True)
    assert all(math.isinf(r) for r in ratios[: len(ratios) - len(finite)])


def test_6b_threshold_is_computed_by_the_accountant():
    """Whatever the plotted grid, the note's threshold is the accountant's least d."""
    from dpcomm.experiments.figures.accounting_figures import least_dummies_6b

    found = least_dummies_6b()
    assert found is not None and found.value == 275 and found.below == 274

    def epsilon(dummies):
        mechanism = ScramblerMechanism(
            num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=dummies
        )
        return account(mechanism, delta=1e-4, monte_carlo_samples=0).guarantee.epsilon

    assert epsilon(275) == found.epsilon <= 1.0 < epsilon(274) == found.epsilon_below
    assert all(epsilon(d) > 1.0 for d in range(0, 274, 39))  # and nothing smaller reaches it


@pytest.mark.parametrize(("name", "symbol"), [("6b", "d"), ("6c", "σ")])
def test_6_bennett_threshold_is_exact(name, symbol):
    from dpcomm.experiments.figures import accounting_figures as figures

    point = {"6b": figures.point_6b, "6c": figures.point_6c}[name]
    low, high, tolerance = figures.BENNETT_SEARCH[name]
    found = figures.bennett_threshold(point, low=low, high=high, tolerance=tolerance)
    assert found is not None and found.below is not None

    def improves(x):
        values = figures._method_values(point(x))
        return values["bennett"] < values["post-processing"] - figures.IMPROVES_BY

    assert improves(found.value) and not improves(found.below)
    step = 1 if tolerance is None else tolerance
    scan = [low + k * (found.below - low) / 6 for k in range(7)]
    scan = [round(round(x / step) * step, 12) for x in scan]
    assert not any(improves(x) for x in scan)  # below the threshold: never


def test_5_aggregated_panels_hold_every_run_and_the_exact_mass(make):
    rows = read_rows(make("5").csv)
    runs = appendix_d.QUICK_RUNS
    for curve in ("group: mean count input 1", "group: mean count input 2"):
        groups = [r for r in rows if r["curve"] == curve]
        assert len(groups) == appendix_d.RANK_BINS
        sizes = [int(r["rank"].split("-")[1]) - int(r["rank"].split("-")[0]) + 1 for r in groups]
        total = sum(float(r["value"]) * size for r, size in zip(groups, sizes, strict=True))
        assert total == pytest.approx(runs, rel=1e-9)
    exact = [float(r["value"]) for r in rows if r["curve"] == appendix_d.LOSS_CURVES[0]]
    seen = [float(r["value"]) for r in rows if r["curve"] == appendix_d.LOSS_CURVES[1]]
    assert 0.99 < sum(exact) <= 1.0 + 1e-12 and 0.99 < sum(seen) <= 1.0 + 1e-12
    # The largest loss bin holds the pair's ε (ln 17) and almost no probability.
    assert len(exact) == math.floor(math.log(17) / appendix_d.LOSS_BIN_WIDTH) + 1
    assert exact[-1] < 1e-15
