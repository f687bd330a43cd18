"""PLD composition against exact enumeration of composed tiny mechanisms.

The truth: :mod:`dpcomm.accounting.brute_force` gives the exact output distribution of every
neighbouring pair of inputs of one round. R rounds run with fresh randomness, and each round's
pair of inputs may be any neighbouring pair (a source's data can differ in every round), so
the composed δ(ε) is the largest hockey-stick divergence of a product of R one-round pairs,
over every multiset of pairs. The composed pessimistic PLD must never be below it, and the
composed certified lower bound never above it.
"""

import itertools
import math

import numpy as np
import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account, brute_force as bf, pld
from dpcomm.accounting.exact import ExactLemma2

EPSILONS = [0.0, 0.1, 0.3, 0.7, 1.2, 2.0, 3.0, 5.0]
SLACK = 1e-12


def _pairs(mechanism):
    """Every ordered neighbouring pair (P, Q) of one round, as vectors over its outputs."""
    pairs = []
    for matrix in bf._input_groups(mechanism):
        rows = range(matrix.shape[0])
        for i, j in itertools.permutations(rows, 2):
            pairs.append((matrix[i], matrix[j]))
    return pairs


def _product(pairs):
    first, second = np.ones(1), np.ones(1)
    for p, q in pairs:
        first = np.multiply.outer(first, p).ravel()
        second = np.multiply.outer(second, q).ravel()
    return first, second


def _composed_truth(mechanisms, epsilon):
    """max over the rounds' pairs of H_{e^ε}(∏P ‖ ∏Q) (rounds given as a list of mechanisms)."""
    options = [_pairs(m) for m in mechanisms]
    factor = math.exp(epsilon)
    worst = 0.0
    if all(m == mechanisms[0] for m in mechanisms):
        choices = itertools.combinations_with_replacement(options[0], len(mechanisms))
    else:
        choices = itertools.product(*options)
    for chosen in choices:
        first, second = _product(chosen)
        worst = max(worst, float(np.clip(first - factor * second, 0.0, None).sum()))
    return worst


TINY = [
    ScramblerMechanism(num_targets=3, sampling_rate=0.3, batch_size=2, num_dummies=1),
    ScramblerMechanism(num_targets=2, sampling_rate=0.5, batch_size=3, num_dummies=2),
    ScramblerMechanism(num_targets=3, sampling_rate=0.0, batch_size=2, num_dummies=2),
    ScramblerMechanism(num_targets=4, sampling_rate=0.6, batch_size=2, num_dummies=0),
    ScramblerMechanism(num_targets=3, sampling_rate=0.4, batch_size=2, num_dummies=2, capped=True),
    LocalRandomizer(num_targets=4, sampling_rate=0.3, num_dummies=1),
    LocalRandomizer(num_targets=3, sampling_rate=0.0, num_dummies=1),
]


@pytest.mark.parametrize(
    ("mechanism", "rounds"),
    [(m, r) for m in TINY for r in (2, 3) if not (r == 3 and m.num_targets >= 4)],
    ids=repr,
)
def test_composed_pld_is_never_below_enumeration(mechanism, rounds):
    upper = pld.compose([pld.dominating_pair(mechanism).pld()], counts=[rounds])
    sparse_upper = pld.compose_pairs([pld.dominating_pair(mechanism)], counts=[rounds])
    lowers = [
        pld.compose([pair.pld(pessimistic=False)], counts=[rounds])
        for pair in pld.lower_bound_pairs(mechanism)
    ]
    lowers += [
        pld.compose_pairs([pair], counts=[rounds], pessimistic=False)
        for pair in pld.lower_bound_pairs(mechanism)
    ]
    for epsilon in EPSILONS:
        truth = _composed_truth([mechanism] * rounds, epsilon)
        assert float(upper.get_delta_for_epsilon(epsilon)) >= truth - SLACK, epsilon
        assert float(sparse_upper.get_delta_for_epsilon(epsilon)) >= truth - SLACK, epsilon
        for lower in lowers:
            assert float(lower.get_delta_for_epsilon(epsilon)) - SLACK <= truth + SLACK


def test_different_rounds_compose_as_different_plds():
    first = ScramblerMechanism(num_targets=3, sampling_rate=0.5, batch_size=2, num_dummies=1)
    second = ScramblerMechanism(num_targets=3, sampling_rate=0.5, batch_size=3, num_dummies=0)
    composed = pld.compose([pld.dominating_pair(m).pld() for m in (first, second)])
    for epsilon in EPSILONS:
        truth = _composed_truth([first, second], epsilon)
        assert float(composed.get_delta_for_epsilon(epsilon)) >= truth - SLACK


@pytest.mark.parametrize(
    ("size", "sigma", "n", "d"),
    [
        (2, 0.3, 10, 3),
        (3, 0.0, 5, 2),
        (5, 0.5, 1, 0),
        (20, 0.2, 100, 50),
        (20, 0.2, 100, 275),
        (7, 0.9, 40, 0),
        (50, 0.05, 200, 30),
    ],
)
def test_lemma2_pair_hockey_stick_equals_exact_lemma2(size, sigma, n, d):
    """The pair's divergence is Lemma 2's δ(ε) (ExactLemma2 adds a 1e-9 safety factor)."""
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    pair = pld.scrambler_pair(mechanism)
    exact = ExactLemma2(mechanism)
    for epsilon in [0.0, 0.1, 0.5, 1.0, 2.0, 3.0]:
        expected = exact.delta(epsilon) / (1.0 + 1e-9)
        got = pair.delta(epsilon)
        # The pair puts at +∞ whatever its windows leave out and the rounding deficit of its
        # masses (1e-13): never below Lemma 2, equal above that floor.
        assert got >= expected * (1.0 - 1e-9) - 1e-20, epsilon
        assert got == pytest.approx(expected, rel=1e-7, abs=3e-13), epsilon
        # Discretized pessimistically, never below the pair itself.
        assert float(pair.pld().get_delta_for_epsilon(epsilon)) >= got - SLACK


def test_one_round_pld_is_never_below_enumeration():
    for mechanism in TINY:
        upper = pld.dominating_pair(mechanism).pld()
        for epsilon in EPSILONS:
            truth = bf.exact_delta(mechanism, epsilon)
            assert float(upper.get_delta_for_epsilon(epsilon)) >= truth - SLACK


def test_the_report_takes_the_smaller_valid_composition():
    """Issue 12's table: T = 20, n = 100, σ = 0.2, δ = 1e-4 (dp_accounting on this pair)."""
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
    )
    report = account(mechanism, delta=1e-4, rounds=4, monte_carlo_samples=0)
    values = report.method_values()
    assert report.guarantee.method == "pld"
    assert report.guarantee.epsilon == pytest.approx(5.380, abs=2e-3)
    assert values["exact"] == pytest.approx(9.81, abs=1e-2)  # 4 × ε(δ/4)
    assert report.lower_bound == pytest.approx(5.372, abs=2e-3)
    assert report.lower_bound <= report.guarantee.epsilon
    valid = [r.value for r in report.methods if r.status == "valid"]
    assert report.guarantee.epsilon == min(valid)


def test_pure_epsilon_of_rounds_adds_up():
    mechanism = LocalRandomizer(num_targets=5, sampling_rate=0.4, num_dummies=1)
    one = account(mechanism, delta=0.0)
    three = account(mechanism, delta=0.0, rounds=3)
    assert three.guarantee.epsilon == pytest.approx(3 * one.guarantee.epsilon)
    assert three.lower_bound == pytest.approx(3 * one.lower_bound)
    assert any("pure" in note for note in three.notes)


def test_rounds_figure_orders_its_curves():
    from dpcomm.experiments.figures.composition import composition_rows

    rows = composition_rows([1, 3], num_dummies=50)
    by = {(r["curve"], r["rounds"]): r["epsilon"] for r in rows}
    assert by[("PLD composition", 1)] == by[("Theorem 2 sum", 1)]
    assert by[("certified lower bound", 3)] <= by[("PLD composition", 3)]
    assert by[("PLD composition", 3)] < by[("Theorem 2 sum", 3)]
    assert all(
        r["reported"] <= r["epsilon"] + 1e-12 for r in rows if r["curve"] != "certified lower bound"
    )


@pytest.mark.parametrize(
    "mechanism",
    [
        ScramblerMechanism(num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50),
        ScramblerMechanism(num_targets=5, sampling_rate=0.0, batch_size=30, num_dummies=12),
        ScramblerMechanism(num_targets=10, sampling_rate=0.7, batch_size=60, num_dummies=0),
        ScramblerMechanism(num_targets=3, sampling_rate=0.5, batch_size=1, num_dummies=4),
    ],
    ids=repr,
)
@pytest.mark.parametrize("interval", [1e-3, 1e-4])
def test_row_cached_scrambler_pld_is_the_pairs_pld(mechanism, interval):
    fast = pld.scrambler_pld(mechanism, interval=interval)
    slow = pld.scrambler_pair(mechanism).pld(interval=interval)
    for epsilon in EPSILONS:
        assert fast.get_delta_for_epsilon(epsilon) == pytest.approx(
            slow.get_delta_for_epsilon(epsilon), rel=1e-9, abs=1e-13
        )
    # Composed, and never below Lemma 2's δ(ε) of the mechanism (it dominates it).
    composed = pld.compose([fast], counts=[3])
    reference = pld.compose([slow], counts=[3])
    for epsilon in EPSILONS:
        assert composed.get_delta_for_epsilon(epsilon) == pytest.approx(
            reference.get_delta_for_epsilon(epsilon), rel=1e-9, abs=1e-13
        )
        assert fast.get_delta_for_epsilon(epsilon) >= ExactLemma2(mechanism).delta(epsilon) * (
            1 - 1e-6
        )


@pytest.mark.parametrize(
    ("sigma", "dummies", "delta"), [(0.3, 1, 0.05), (0.5, 0, 0.1), (0.0, 2, 0.3)]
)
def test_plan_guarantee_is_never_below_the_enumerated_composition(sigma, dummies, delta):
    """A tiny Aggregate plan: 5 sources, two grouping sets of C = 3, scramblers of n ≤ 3.

    Balanced batches of 3 and 2 sources; a source's data path crosses two scrambler rounds,
    each of the worst (smallest) batch at worst. The plan's (ε, δ) must hold for the exact
    composition of two rounds of the n = 2 scrambler, enumerated.
    """
    from dpcomm.plan import Scramblers, account_plan
    from dpcomm.plan.builders import aggregate_plan

    plan = aggregate_plan(num_sources=5, flows=("a", "b"), num_targets=(3, 3))
    countermeasure = Scramblers(sampling_rate=sigma, batch_size=3, num_dummies=dummies)
    guarantee = account_plan(plan, countermeasure, delta=delta)
    epsilon = guarantee.guarantee.epsilon
    smallest = ScramblerMechanism(
        num_targets=3, sampling_rate=sigma, batch_size=2, num_dummies=dummies
    )
    if math.isfinite(epsilon):
        assert _composed_truth([smallest, smallest], epsilon) <= delta + SLACK
    lower = guarantee.lower_bound
    if lower is not None and 0 < lower < math.inf:
        # Below the certified lower bound the enumerated composition exceeds δ.
        below = max(0.0, lower - 1e-3)
        largest = ScramblerMechanism(
            num_targets=3, sampling_rate=sigma, batch_size=3, num_dummies=dummies
        )
        assert _composed_truth([smallest, smallest], below) > delta or (
            _composed_truth([largest, largest], below) > delta
        )
