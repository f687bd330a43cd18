"""DP key selection: OpenDP's threshold mechanism, its (ε, δ) against OpenDP's own map."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

import dpcomm
from dpcomm.accounting.pld import epsilon_for_delta
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.mechanisms import (
    epsilon_of_rho,
    release_pld,
    rho_for,
    selection_distances,
    threshold_for,
)
from dpcomm.release.noise import noisy_program, released_rows

dp = pytest.importorskip("dpcomm.release.opendp_core")
dp.enable_features("contrib")

DELTA = 1e-6
#: 300 a, 200 b, 2 r2, 1 rare; j in {x, y}; v in [0, 10).
KEYS = ["a"] * 300 + ["b"] * 200 + ["r2"] * 2 + ["rare"]


@pytest.fixture(scope="module")
def table() -> Any:
    rng = np.random.default_rng(0)
    return table_from_arrays(
        "t",
        {
            "k": np.array(KEYS, dtype=object),
            "j": np.array(["x", "y"], dtype=object)[rng.integers(0, 2, len(KEYS))],
            "v": rng.uniform(0.0, 10.0, len(KEYS)),
        },
    )


def program(table: Any, sql: str, release: Any, **options: Any) -> AggregateProgram:
    bounds = {"v": (0.0, 10.0)} if "(v)" in sql else None  # only where a SUM or AVG reads v
    return noisy_program(sql, table, release=release, bounds=bounds, **options)


def exact_rows(selected: AggregateProgram) -> list[list[dict[str, Any]]]:
    """The core rows over every tuple (no countermeasure), before the release's noise."""
    from dpcomm.engine.memory import simulate

    exact = selected.without_release()
    run = simulate(exact, dpcomm.NoCountermeasure(), delta=None, seed=0)
    return exact.core_result(run.state)


def threshold_measurement(noise: Any, threshold: int) -> Any:
    domain = dp.map_domain(dp.atom_domain(T=int), dp.atom_domain(T=int))
    if noise.delta == 0.0:
        metric = dp.l01inf_distance(dp.absolute_distance(T=int))
        return dp.m.make_laplace_threshold(domain, metric, scale=noise.scale, threshold=threshold)
    metric = dp.l02inf_distance(dp.absolute_distance(T=int))
    return dp.m.make_gaussian_threshold(domain, metric, scale=noise.scale, threshold=threshold)


@pytest.mark.parametrize(
    "release", [dpcomm.Laplace(1.0), dpcomm.Gaussian(1.0, 1e-6)], ids=["laplace", "gaussian"]
)
def test_the_threshold_and_its_privacy_are_opendps(table: Any, release: Any) -> None:
    """τ is the smallest integer whose OpenDP map gives δ ≤ δ_sel for one row replaced in the
    two selected grouping sets (in the joint view with the traffic, 6 keys changed by 1: the
    row's two keys and one other source's per set), and the COUNT(*)'s two measurements
    (threshold on (k), (k, j); plain noise on ()) spend no more than its share."""
    selected = program(
        table, "SELECT k, j, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY ROLLUP(k, j)", release,
        key_selection_delta=DELTA,
    )  # fmt: skip
    noised = selected.release
    assert noised is not None and noised.selection is not None
    selection = noised.selection
    sets = selected.query.grouping_sets
    assert [sets[i] for i in selection.grouping_sets] == [("k",), ("k", "j")]
    assert not selection.count_added
    (count,) = (n for n in noised.noises if n.output == selection.count_output)
    gaussian = release.name == "gaussian"
    distances = (6, 3, 1) if gaussian else (6, 6, 1)  # (l0, ⌈√l0⌉ or l1, l∞)
    loss, delta = threshold_measurement(count, selection.threshold).map(distances)
    assert delta <= DELTA < threshold_measurement(count, selection.threshold - 1).map(distances)[1]
    assert (loss, delta) == pytest.approx((selection.accounted_loss, selection.accounted_delta))
    vector = dp.vector_domain(dp.atom_domain(T=int))
    if gaussian:
        rest = dp.m.make_gaussian(vector, dp.l2_distance(T=float), scale=count.scale).map(1.0)
        rho = loss + rest
        assert rho <= rho_for(count.epsilon, count.delta) * (1 + 1e-9)
        assert epsilon_of_rho(rho, count.delta) <= count.epsilon * (1 + 1e-9)
    else:
        rest = dp.m.make_laplace(vector, dp.l1_distance(T=int), scale=count.scale).map(1)
        assert loss + rest <= count.epsilon * (1 + 1e-9)
        assert loss + rest == pytest.approx(count.epsilon)
    # The standard formula is a valid start: OpenDP's discrete noise needs no larger τ.
    formula = threshold_for(
        scale=count.scale, delta=DELTA, distances=selection_distances(2), gaussian=gaussian
    )
    assert selection.threshold <= math.ceil(formula)
    # δ_sel joins the release's δ; ε2 stays the user's.
    assert noised.epsilon == pytest.approx(release.epsilon)
    assert noised.delta == pytest.approx(release.delta + DELTA)
    assert count.total_delta == pytest.approx(count.delta + DELTA)


def test_one_row_replaced_changes_at_most_the_declared_counts(table: Any) -> None:
    """Every replacement of one row by another of a small table moves the per-key counts of
    the selected grouping sets by 2 keys per set; the declared distances add the one other
    source whose delivery the joint view's coupling moves (3 keys per set)."""
    keys = np.array(["a", "a", "b", "c"], dtype=object)
    others = np.array(["x", "y", "x", "x"], dtype=object)
    sets = [("k",), ("k", "j")]
    declared = selection_distances(len(sets))

    def counts(k: Any, j: Any) -> dict[tuple[Any, ...], int]:
        found: dict[tuple[Any, ...], int] = {}
        for index, columns in enumerate(sets):
            for row in range(len(k)):
                key = (index, *(k[row] if c == "k" else j[row] for c in columns))
                found[key] = found.get(key, 0) + 1
        return found

    before = counts(keys, others)
    worst = [0, 0, 0]
    for row, new_k, new_j in itertools.product(range(4), ["a", "b", "z"], ["x", "y"]):
        k, j = keys.copy(), others.copy()
        k[row], j[row] = new_k, new_j
        after = counts(k, j)
        changes = [abs(after.get(c, 0) - before.get(c, 0)) for c in set(before) | set(after)]
        worst = [
            max(worst[0], sum(c > 0 for c in changes)),
            max(worst[1], sum(changes)),
            max(worst[2], max(changes)),
        ]
    assert worst == [2 * len(sets), 2 * len(sets), 1]
    assert [declared.l0, declared.l1, declared.linf] == [3 * len(sets), 3 * len(sets), 1]


def test_rare_keys_are_not_released_and_frequent_ones_are(table: Any) -> None:
    selected = program(
        table, "SELECT k, AVG(v) AS m FROM t GROUP BY k", dpcomm.Laplace(1.0),
        key_selection_delta=DELTA,
    )  # fmt: skip
    release = selected.release
    assert release is not None and release.selection is not None
    assert release.selection.count_added is False  # AVG's COUNT(v) selects: no extra share
    assert len(release.noises) == 2
    threshold = release.selection.threshold
    assert 20 < threshold < 150  # b = 3/ε_C ≈ 7: far above r2's 2, far below b's 200
    exact = exact_rows(selected)
    for _ in range(20):
        (rows,) = released_rows(selected.query, release, exact)
        assert [row["k"] for row in rows] == ["a", "b"]  # never r2, rare, nor a key absent
        counts = [row[release.selection.count_output] for row in rows]
        assert all(isinstance(c, int) and c >= threshold for c in counts)


def test_a_count_is_added_when_the_query_has_none(table: Any) -> None:
    selected = program(
        table, "SELECT k, SUM(v) AS s FROM t GROUP BY k", dpcomm.Laplace(1.0),
        key_selection_delta=DELTA,
    )  # fmt: skip
    release = selected.release
    assert release is not None and release.selection is not None
    assert release.selection.count_added
    assert [n.function for n in release.noises] == ["sum", "count_star"]
    (rows,) = released_rows(selected.query, release, exact_rows(selected))
    assert {row["k"] for row in rows} == {"a", "b"}


def test_a_domain_and_a_selection_together(table: Any) -> None:
    """(k, j) is selected, keeping j in its domain; (j) alone is released over its domain."""
    selected = program(
        table, "SELECT k, j, COUNT(*) AS n FROM t GROUP BY GROUPING SETS ((j), (k, j))",
        dpcomm.Laplace(2.0), keys={"j": ["x"]}, key_selection_delta=DELTA,
    )  # fmt: skip
    release = selected.release
    assert release is not None and release.selection is not None
    assert release.selection.grouping_sets == (1,)
    by_j, by_kj = released_rows(selected.query, release, exact_rows(selected))
    assert [row["j"] for row in by_j] == ["x"]
    assert {(row["k"], row["j"]) for row in by_kj} == {("a", "x"), ("b", "x")}


def test_the_release_pld_counts_the_selection_delta(table: Any) -> None:
    selected = program(
        table, "SELECT k, COUNT(*) AS n FROM t GROUP BY k", dpcomm.Laplace(1.0),
        key_selection_delta=1e-3,
    )  # fmt: skip
    release = selected.release
    assert release is not None
    pld = release_pld(release.noises)
    # An (ε, δ_sel)-DP pair: ε at δ_sel is at most ε, and below it δ_sel cannot be covered.
    assert epsilon_for_delta(pld, 1e-3) <= 1.0 + 1e-6
    assert epsilon_for_delta(pld, 1e-4) > 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "key_selection_delta"),  # no domain for k, no selection
        ({"keys": {"k": ["a"]}, "key_selection_delta": DELTA}, "key_selection_delta"),
        ({"key_selection_delta": 0.0}, "key_selection_delta"),
        ({"key_selection_delta": 1.5}, "key_selection_delta"),
    ],
)
def test_refused(table: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        program(table, "SELECT k, COUNT(*) FROM t GROUP BY k", dpcomm.Laplace(1.0), **options)
    with pytest.raises(InvalidParameterError, match="release"):
        noisy_program("SELECT k, COUNT(*) FROM t GROUP BY k", table, key_selection_delta=DELTA)
