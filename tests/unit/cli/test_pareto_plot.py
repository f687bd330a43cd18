"""The Pareto plot's axes: logarithmic only over a wide range."""

import pytest

from dpcomm.cli.plan import pareto_axis_scale


@pytest.mark.parametrize(
    ("values", "scale"),
    [
        ([199, 200, 200], "linear"),  # a log axis here only had ticks like 1.992×10²
        ([86_704, 800_080], "linear"),
        ([3_354], "linear"),
        ([0, 50], "linear"),
        ([60, 10_020], "log"),
        ([10, 100], "log"),
    ],
)
def test_axis_scale(values, scale):
    assert pareto_axis_scale(values) == scale
