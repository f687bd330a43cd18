import math

from hypothesis import given, settings, strategies as st

from dpcomm.accounting import ScramblerMechanism, account
from dpcomm.accounting.concentration import bennett_delta, hoeffding_delta
from dpcomm.accounting.exact import ExactLemma2
from dpcomm.accounting.lower_bound import ScramblerLowerBound
from dpcomm.accounting.pure import local_delta

mechanisms = st.builds(
    lambda size, sigma, n, d: ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    ),
    st.integers(2, 100),
    st.one_of(st.just(0.0), st.floats(1e-12, 1.0)),
    st.integers(1, 400),
    st.integers(0, 400),
)


@settings(max_examples=60, deadline=None)
@given(mechanisms, st.floats(0.0, 5.0))
def test_bounds_are_ordered(mechanism, epsilon):
    exact = ExactLemma2(mechanism).delta(epsilon)
    lower = ScramblerLowerBound(mechanism).delta(epsilon)
    assert lower <= exact
    assert exact <= bennett_delta(mechanism, epsilon) * (1 + 1e-9) + 1e-25
    assert exact <= hoeffding_delta(mechanism, epsilon) * (1 + 1e-9) + 1e-25
    assert lower <= local_delta(mechanism.local_randomizer, epsilon) + 1e-12


@settings(max_examples=40, deadline=None)
@given(mechanisms, st.floats(0.0, 4.0), st.floats(0.0, 4.0))
def test_exact_delta_is_non_increasing(mechanism, first, second):
    low, high = sorted((first, second))
    exact = ExactLemma2(mechanism)
    assert exact.delta(high) <= exact.delta(low) * (1 + 1e-9) + 1e-25


@settings(max_examples=25, deadline=None)
@given(mechanisms, st.sampled_from([1e-6, 1e-4, 1e-2]))
def test_report_is_never_worse_than_post_processing(mechanism, delta):
    report = account(mechanism, delta=delta, monte_carlo_samples=0)
    values = report.method_values()
    assert report.value <= values["post-processing"]
    if report.lower_bound is not None and math.isfinite(report.value):
        assert report.lower_bound <= report.value + 1e-9
