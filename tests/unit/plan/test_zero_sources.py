"""A table without rows: a plan of no source, what it sends, and its guarantee.

Neighbouring tables differ in one row replaced and have as many rows (docs/accounting.md), so
the table without rows has no neighbour: whatever the countermeasure, its plan is (0, 0), as
no source sends anything. The same plan with one source has a row to protect.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import LocalFlooding, NoCountermeasure, NodeGroup, Scramblers, account_plan
from dpcomm.plan.builders import aggregate_plan
from dpcomm.plan.privacy import NO_DATA, NO_SENDER
from dpcomm.plan.transform import transform
from dpcomm.release.compose import compose_release
from dpcomm.release.noise import noisy_program

COUNTERMEASURES = {
    "none": NoCountermeasure(),
    "local": LocalFlooding(sampling_rate=0.3, num_dummies=2),
    "scramblers at σ = 0": Scramblers(sampling_rate=0.0, batch_size=4, num_dummies=2),
    "scramblers with sampling": Scramblers(sampling_rate=0.3, batch_size=4, num_dummies=2),
    "capped": Scramblers(sampling_rate=0.3, batch_size=4, num_dummies=2, capped=True),
}


def plan_of(sources: int):
    """GROUP BY ROLLUP (g) with T = 5: the grouping set (g) and the empty one."""
    return aggregate_plan(num_sources=sources, flows=["(g)", "()"], num_targets=[5, 1])


def test_only_sources_may_be_none():
    assert NodeGroup("sources", "source", 0, holds_data=True).count == 0
    with pytest.raises(InvalidParameterError, match="count of group C"):
        NodeGroup("C", "compute", 0)
    with pytest.raises(InvalidParameterError, match="num_sources"):
        aggregate_plan(num_sources=-1, flows=["()"], num_targets=[1])


@pytest.mark.parametrize("name", sorted(COUNTERMEASURES))
def test_without_sources_only_the_outputs_are_sent(name):
    routed = transform(plan_of(0), COUNTERMEASURES[name])
    # No source to batch or to flood from: no scrambler, no countermeasure runs.
    assert routed.batches == {}
    assert [g.role for g in routed.routed.groups].count("scrambler") == 0
    assert all(isinstance(c, NoCountermeasure) for c in routed.countermeasures.values())
    assert routed.requested["(g)"] == COUNTERMEASURES[name]
    messages = {f.name: f.messages for f in routed.flows}
    assert messages == {"(g)": 0, "(g) result": 5, "()": 0, "() result": 1}
    assert routed.sources_needed() == 0


@pytest.mark.parametrize("name", sorted(COUNTERMEASURES))
def test_without_sources_the_plan_is_0_0_whatever_the_countermeasure(name):
    privacy = account_plan(plan_of(0), COUNTERMEASURES[name], delta=1e-4)
    guarantee = privacy.guarantee
    assert (guarantee.epsilon, guarantee.delta, guarantee.method) == (0.0, 0.0, NO_DATA)
    assert privacy.worst_path == () and privacy.path_mechanisms == ()
    methods = {c.cluster.name: c.guarantee.method for c in privacy.clusters}
    assert methods["(g)"] == NO_SENDER and methods["()"] == "single-target"
    assert all(c.guarantee.epsilon == 0.0 for c in privacy.clusters)
    # One source: the same plan has a row to protect (∞ without countermeasure or with a
    # scrambler of one source at σ = 0, finite but positive otherwise).
    one = account_plan(plan_of(1), COUNTERMEASURES[name], delta=1e-4).guarantee
    assert one.method != NO_DATA and one.epsilon > 0.0
    assert math.isinf(one.epsilon) == (name in ("none", "scramblers at σ = 0"))


@pytest.mark.parametrize(
    "release", [dpcomm.Laplace(1.0), dpcomm.Gaussian(1.0, 1e-6)], ids=["laplace", "gaussian"]
)
def test_a_release_over_no_row_reports_what_its_noise_is_calibrated_for(release):
    # The traffic adds nothing (0, 0); the release's (ε2, δ2) is what its noise was drawn
    # for: a valid bound (there is no neighbouring table at all), never less.
    empty = table_from_arrays("t", {"k": np.array(["a"], dtype=object)}).take(np.arange(0))
    chosen = COUNTERMEASURES["scramblers with sampling"]
    program = noisy_program(
        "SELECT k, COUNT(*) AS c FROM t GROUP BY k", empty, num_targets=2,
        release=release, keys={"k": ["a", "b"]}, countermeasure=chosen,
    )  # fmt: skip
    assert program.num_sources == 0 and program.release is not None
    privacy = account_plan(program.plan, chosen, delta=1e-4)
    both = compose_release(privacy, program.release.noises)
    assert privacy.guarantee.method == NO_DATA
    # ε2 and no more than the allowances every share is charged (`charged_shares`: OpenDP's
    # map tolerance, 1e-9 of the share; the counts have no rounding).
    assert both.release_epsilon == pytest.approx(1.0)
    assert both.release_epsilon <= both.epsilon <= both.release_epsilon * (1 + 2e-9)
    assert both.delta == both.release_delta == release.delta
