"""The whole mechanism audited: traffic and noisy release observed together on neighbouring
tables (`dpcomm.experiments.release_audit`).

The correct mechanism's empirical lower bound stays below the composed ε its report claims;
seeded faults injected into the library code a run calls still claim that ε, and the audit's
lower bound exceeds it:

* at the audit's default configuration (docs/audit.md: one scrambler of n = 2,000 sources,
  σ = 0.04, no dummies, T = 2, a Laplace release of ε2 = 3 of SUM(v) clamped to [−10, 10],
  reported ε = 3.29 at δ = 10⁻²), the sensitivity of a row's own change alone (2M, as if the
  traffic could not move another source's tuple in or out of delivery; the right one is
  M + W = 3M): the library's seeded fault ``old-sensitivity`` (`seeded_release_fault`). The
  search finds the pair that shows it (the other sources on the row's new or old key) on
  the selection half;
* at T = 3 with scramblers of n = 5 at σ = 0.1 and d = 400 dummies, SUM(v) clamped to [0, 10]
  (traffic ε1 = 0.31, reported ε = 2.31 at δ = 1e-4): a sensitivity computed half as large,
  and the clamp skipped.

The release's noise is OpenDP's, never seeded: each lower bound varies from run to run, so
every threshold below is several standard deviations away (docs/audit.md gives the spreads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

import dpcomm
import dpcomm.queries.analyst
import dpcomm.release.noise
from dpcomm.errors import DpcommError
from dpcomm.experiments.release_audit import audit_release
from dpcomm.queries.sql import forget_bound_queries

SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.1, batch_size=5, num_dummies=400)
RELEASE = dpcomm.Laplace(2.0)
SMALL = {"num_targets": 3, "bounds": (0.0, 10.0)}


@pytest.fixture
def half_noise_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sensitivity computed half as large: every noise scale halves, OpenDP's map agrees."""
    computed = dpcomm.release.noise.aggregate_sensitivity

    def halved(*args: object, **kwargs: object) -> object:
        sensitivity = computed(*args, **kwargs)  # type: ignore[arg-type]
        return dataclasses.replace(sensitivity, l1=sensitivity.l1 / 2, l2=sensitivity.l2 / 2)

    monkeypatch.setattr(dpcomm.release.noise, "aggregate_sensitivity", halved)


@pytest.fixture
def unclamped(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The bound declared (and the sensitivity computed from it) but the values not clamped.

    The queries bound before (clamped) and while patched (not) are forgotten: `bind_sql`
    keeps bound queries by SQL and schema, not by the code that bound them.
    """
    forget_bound_queries()
    monkeypatch.setattr(
        dpcomm.queries.analyst,
        "clamped_sql",
        lambda column, low, high, centre=0.0: f'CAST("{column}" AS DOUBLE)',
    )
    yield
    forget_bound_queries()


def test_the_default_audit_passes_the_correct_mechanism() -> None:
    report = audit_release(rng=0)
    assert report.num_targets == 2 and report.neighbours.bounds == (-10.0, 10.0)
    assert report.noise_scales[0][1] == pytest.approx(10.0)  # L1 = M + W = 30, ε2 = 3
    assert report.reported_epsilon == pytest.approx(3.291, abs=2e-3)
    assert report.delta == 1e-2
    assert report.passed
    assert {p.name for p in report.pairs} == {
        "third-key",
        "signed",
        "others-on-destination",
        "others-on-source",
    }
    assert report.lower_bound > 2.0  # the audit sees the release


# The library's seeded fault ``old-sensitivity`` at the default configuration FAILs:
# tests/integration/test_cli_audit.py runs it through `dpcomm audit release --fault` (with
# 20,000 runs per table, half the default: its bound stays 0.4 above the claim).


def test_the_correct_mechanism_stays_below_the_composed_epsilon() -> None:
    report = audit_release(SCRAMBLERS, RELEASE, runs=4000, delta=1e-4, rng=0, **SMALL)
    assert report.reported_epsilon == pytest.approx(2.3054, abs=1e-3)
    assert report.reported_epsilon <= report.summed_epsilon
    assert report.release_epsilon == 2.0 and report.delta == 1e-4
    assert report.passed
    assert report.lower_bound > 1.0  # the audit sees the release: more than ε1 = 0.31


def test_noise_of_half_the_scale_is_caught(half_noise_scale: None) -> None:
    report = audit_release(SCRAMBLERS, RELEASE, runs=6000, delta=1e-4, rng=0, **SMALL)
    assert report.noise_scales[0][1] == pytest.approx(5.0)  # L1 = 2M = 20, ε2 = 2: 10
    assert report.reported_epsilon == pytest.approx(2.3054, abs=1e-3)  # still claimed
    assert not report.passed
    assert report.lower_bound > report.reported_epsilon + 0.25


def test_values_beyond_the_bound_are_caught(unclamped: None) -> None:
    report = audit_release(SCRAMBLERS, RELEASE, runs=1000, delta=1e-4, rng=0, **SMALL)
    assert report.noise_scales[0][1] == pytest.approx(10.0)
    assert not report.passed
    assert report.lower_bound > report.reported_epsilon + 1.0


def test_a_scale_halved_alone_is_refused_by_opendps_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """Noise of half the scale for the sensitivity computed: refused before any noise."""
    calibrate = dpcomm.release.noise.calibrate_noise

    def halved(*args: object, **kwargs: object) -> object:
        noises = calibrate(*args, **kwargs)  # type: ignore[arg-type]
        return tuple(dataclasses.replace(n, scale=n.scale / 2) for n in noises)

    monkeypatch.setattr(dpcomm.release.noise, "calibrate_noise", halved)
    with pytest.raises(DpcommError, match="refusing to release"):
        audit_release(SCRAMBLERS, RELEASE, runs=100, rng=0, **SMALL)


# ``centred-own-row`` (a centred SUM calibrated to hi − lo instead of 1.5 (hi − lo)) widens the
# centred sum's loss only: against the whole release's claim (the COUNT an AVG needs included)
# it passes; against the claim for the traffic and the centred sum's cells alone (the traffic
# composed with that aggregate's noise alone) it fails. docs/audit.md gives the spreads.
CENTRED_SUM = {
    "sql": "SELECT k, AVG(v) AS m FROM t GROUP BY k",
    "bounds": (0.0, 20.0),
    "pairs": ("others-on-destination",),
    "aggregate": "SUM(v",
}


def test_one_aggregate_view_is_claimed_its_own_composition() -> None:
    whole = audit_release(  # the whole release's claim (runs enough to compute it)
        release=dpcomm.Laplace(5.0),
        runs=100,
        rng=0,
        **{k: v for k, v in CENTRED_SUM.items() if k != "aggregate"},
    )
    report = audit_release(release=dpcomm.Laplace(5.0), runs=4000, rng=0, **CENTRED_SUM)
    assert report.aggregate is not None and report.aggregate.startswith("SUM(v clamped")
    assert whole.aggregate is None and len(whole.noise_scales) == 2
    assert report.release_epsilon == pytest.approx(2.953, abs=1e-3)  # the SUM's share of ε2
    assert report.reported_epsilon == pytest.approx(3.244, abs=2e-3)
    assert report.reported_epsilon < whole.reported_epsilon == pytest.approx(5.278, abs=2e-3)
    assert report.passed  # the correct mechanism: several standard deviations below
    assert report.lower_bound > 1.5  # the audit sees the centred sum


def test_centred_own_row_fails_the_one_aggregate_view() -> None:
    report = audit_release(
        release=dpcomm.Laplace(5.0), runs=16_000, fault="centred-own-row", rng=0, **CENTRED_SUM
    )
    assert report.noise_scales[0][1] == pytest.approx(6.773, abs=1e-3)  # 20/30 of 10.16
    assert not report.passed
    assert report.lower_bound > report.reported_epsilon + 0.05  # measured: 0.37 ± 0.08 above


def test_an_unknown_aggregate_is_refused() -> None:
    with pytest.raises(DpcommError, match="aggregate"):
        audit_release(runs=100, pairs=("third-key",), rng=0, aggregate="COUNT(")
    with pytest.raises(DpcommError, match="aggregate"):
        audit_release(runs=100, pairs=("third-key",), rng=0, aggregate=1)


# ``quantile-near-tie``: the other sources' values on keys a and b at the two middle candidates
# of the median's grid, a tie that the row's value (beyond both) tips by one whole score step
# in each cell; the pair the search tries for a query releasing a quantile. The correct median
# (d = 3 values per grouping set) passes; calibrated to one value (``quantile-add-remove``,
# d = 1) it fails. docs/audit.md gives the spreads; `quantile-uncharged` fails through the
# command line (tests/integration/test_cli_audit.py).
MEDIAN_NEAR_TIE = {
    "sql": "SELECT k, MEDIAN(v) AS m FROM t GROUP BY k",
    "pairs": ("quantile-near-tie",),
    "release": dpcomm.Laplace(2.0),
}


def test_the_correct_median_passes_the_near_tie_pair() -> None:
    report = audit_release(runs=2000, rng=0, **MEDIAN_NEAR_TIE)
    assert report.noise_scales[0][1] == pytest.approx(1.5)  # d = 3 values, ε2 = 2
    assert report.reported_epsilon == pytest.approx(2.282, abs=2e-3)
    assert report.neighbours.pair.name == "quantile-near-tie"
    assert report.passed
    assert report.lower_bound > 0.2  # the audit sees the median move (measured 0.43 – 0.66)


def test_a_median_calibrated_for_one_value_fails_the_near_tie_pair() -> None:
    report = audit_release(runs=6000, fault="quantile-add-remove", rng=0, **MEDIAN_NEAR_TIE)
    assert report.noise_scales[0][1] == pytest.approx(0.5)  # d = 1: a third of the scale
    assert report.reported_epsilon == pytest.approx(2.282, abs=2e-3)  # still claimed
    assert not report.passed
    assert report.lower_bound > report.reported_epsilon + 0.1  # measured: 0.44 – 0.89 above
