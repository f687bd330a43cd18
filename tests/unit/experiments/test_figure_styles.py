"""Curves that coincide (the valid bounds capped at ε0) stay visible in the accounting figures."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from dpcomm.experiments.figures import accounting_figures as figures


def test_coinciding_valid_curves_are_each_visible():
    """Post-processing, Bennett and Hoeffding all at ε0: each line drawn under another is wider
    than it, and Bennett's and Hoeffding's markers differ."""
    curves = [
        figures.POST_PROCESSING_LABEL,
        figures.BENNETT_LABEL,
        figures.HOEFFDING_LABEL,
    ]
    rows = [
        figures._row(curve, figures.VALID, 4.39, num_targets=20, sampling_rate=0.2,
                     num_dummies=50, batch_size=n)
        for curve in curves
        for n in (10, 100, 1000)
    ]  # fmt: skip
    figure, axes = plt.subplots()
    try:
        figures._plot(axes, rows, "batch_size")
        lines = {line.get_label(): line for line in axes.get_lines()}
        drawn = sorted(curves, key=lambda c: lines[c].get_zorder())  # bottom first
        assert drawn == curves
        widths = [lines[c].get_linewidth() for c in drawn]
        assert widths[0] > widths[1] > widths[2]
        assert lines[curves[1]].get_marker() != lines[curves[2]].get_marker()
    finally:
        plt.close(figure)
