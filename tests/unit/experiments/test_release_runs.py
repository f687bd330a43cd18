"""The release audit's runs are runs of the program: run 0 with the engine's seed is the
in-memory engine's run (same messages per compute node, same delivered tuples, same exact
result); its neighbouring tables differ in one row; its parameters are checked."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tests.conftest import messages_per_target

import dpcomm
from dpcomm.data.table import table_from_arrays
from dpcomm.engine.memory import simulate
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.release_audit import (
    audit_release,
    audited_program,
    contributions,
    release_neighbours,
    release_runs,
    traffic_runs,
)
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.groupby import partition_keys

COUNTERMEASURES = [
    dpcomm.Scramblers(sampling_rate=0.5, batch_size=6, num_dummies=4),
    dpcomm.LocalFlooding(sampling_rate=0.5, num_dummies=1),
]
SQL = "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY k"


def _per_target(run, flow: str) -> list[int]:
    """Messages each compute node of ``flow`` received, in target order (the observer's view)."""
    return messages_per_target(run, flow, lambda name: name != f"{flow} result")


@pytest.mark.parametrize("countermeasure", COUNTERMEASURES, ids=lambda c: type(c).__name__)
def test_run_zero_is_the_memory_engines_run(countermeasure) -> None:
    sources = countermeasure.batch_size if isinstance(countermeasure, dpcomm.Scramblers) else 1
    neighbours = release_neighbours(
        num_targets=4, num_sources=sources, bounds=(-10.0, 10.0), pair="others-on-destination"
    )
    for table in neighbours.tables():
        program = audited_program(table, dpcomm.Laplace(1.0), neighbours, 4, SQL)
        flow = program.flow_names[0]
        noises = program.release.noises
        for seed in (0, 1):
            runs = release_runs(
                program, countermeasure, keys=neighbours.keys, runs=3, randomness=Randomness(seed)
            )
            run = simulate(program, countermeasure, delta=1e-4, seed=seed)
            assert runs.counts[0].tolist() == _per_target(run, flow)
            assert np.array_equal(runs.delivered[0], run.delivered[flow])
            exact = {
                row["k"]: [row[n.output] for n in noises]
                for row in program.without_release().core_result(run.state)[0]
            }
            for index, key in enumerate(neighbours.keys):
                assert runs.exact[0, index].tolist() == exact.get(key, [0, 0])


@pytest.mark.parametrize("countermeasure", COUNTERMEASURES, ids=lambda c: type(c).__name__)
def test_the_audits_chunks_do_not_change_a_runs_traffic(countermeasure, monkeypatch) -> None:
    """The audit simulates its runs in chunks (`_traffic`): chunks of 1, 2, 8 messages or
    runs give the traffic of the same runs simulated at once."""
    from dpcomm.experiments import release_audit

    sources = countermeasure.batch_size if isinstance(countermeasure, dpcomm.Scramblers) else 1
    neighbours = release_neighbours(
        num_targets=3, num_sources=sources, bounds=(-10.0, 10.0), pair="others-on-source"
    )
    program = audited_program(neighbours.tables()[1], dpcomm.Laplace(1.0), neighbours, 3, SQL)
    at_once = traffic_runs(program, countermeasure, runs=37, randomness=Randomness(4), first_run=5)
    for chunk in (1, 2, 8 * (sources + 4)):
        monkeypatch.setattr(release_audit, "CHUNK_MESSAGES", chunk)
        monkeypatch.setattr(release_audit, "CHUNK_SOURCES", chunk)
        chunked = release_audit._traffic(
            program, countermeasure, first=5, stop=42, randomness=Randomness(4)
        )
        assert np.array_equal(chunked[0], at_once[0]) and np.array_equal(chunked[1], at_once[1])


def test_contributions_are_clamped_as_a_run_clamps() -> None:
    neighbours = release_neighbours(num_targets=3, num_sources=3, bound=10.0)
    d, d_prime = (
        audited_program(t, dpcomm.Laplace(1.0), neighbours, 3, SQL) for t in neighbours.tables()
    )
    # Source 0: (a, 500) clamped to 10 in D, (b, 10) in D′; the others (c, 5). Cells (n, s).
    assert contributions(d, neighbours.keys)[:, :, :].tolist() == [
        [[1, 10], [0, 0], [0, 0]],
        [[0, 0], [0, 0], [1, 5]],
        [[0, 0], [0, 0], [1, 5]],
    ]
    assert contributions(d_prime, neighbours.keys)[0].tolist() == [[0, 0], [1, 10], [0, 0]]


def test_neighbours_differ_in_one_row_on_the_boundary_targets() -> None:
    neighbours = release_neighbours(num_targets=5, num_sources=4, bound=2.0)
    keys = table_from_arrays("keys", {"k": np.array(neighbours.keys, dtype=object)})
    assert partition_keys(keys, 5).tolist() == [0, 4, 1] == list(neighbours.targets)
    d, d_prime = neighbours.tables()
    assert d.column("k").values[1:].tolist() == d_prime.column("k").values[1:].tolist()
    assert d.column("v").values.tolist() == [100.0, 1.0, 1.0, 1.0]
    assert d_prime.column("v").values[0] == 2.0
    assert "clamped to [0, 2]" in neighbours.describe()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"countermeasure": dpcomm.NoCountermeasure()}, "countermeasure"),
        ({"release": 1.0}, "release"),
        ({"runs": 99}, "runs"),
        ({"num_targets": 1}, "num_targets"),
        ({"bounds": (1.0, 1.0)}, "bounds"),
        ({"pairs": ["nowhere"]}, "pairs"),
        ({"confidence": 1.0}, "confidence"),
        ({"sql": "SELECT k, COUNT(*) FROM t GROUP BY ROLLUP (k)"}, "sql"),
        ({"fault": "no-shuffle"}, "fault"),
    ],
)
def test_invalid_parameters(kwargs, name) -> None:
    arguments = {
        "countermeasure": COUNTERMEASURES[0],
        "release": dpcomm.Laplace(1.0),
        "runs": 100,
        **kwargs,
    }
    with pytest.raises(InvalidParameterError) as error:
        audit_release(**arguments)
    assert error.value.name == name


def test_candidate_pairs_for_signed_and_nonnegative_bounds() -> None:
    from dpcomm.experiments.release_audit import candidate_pairs

    signed = {p.name: p for p in candidate_pairs((-10.0, 10.0))}
    assert list(signed) == ["third-key", "signed", "others-on-destination", "others-on-source"]
    # The counterexample's shape: the row moves from (a, +M) to (b, −M), the others on b at +M.
    assert signed["others-on-destination"].values == (500.0, -10.0)
    assert signed["others-on-destination"].others == (1, 10.0)
    assert signed["others-on-source"].values == (-500.0, 10.0)
    assert signed["others-on-source"].others == (0, 10.0)
    assert signed["third-key"].others == (2, 0.0)
    assert "signed" not in {p.name for p in candidate_pairs((0.0, 10.0))}


def _median_cells(neighbours, table) -> list[np.ndarray]:
    """Each of keys a's and b's median scores over the grid, from the program's own bins."""
    from dpcomm.release.quantile import quantile_scores

    program = audited_program(
        table, dpcomm.Laplace(1.0), neighbours, 2, "SELECT k, MEDIAN(v) AS m FROM t GROUP BY k"
    )
    added = contributions(program, neighbours.keys).sum(axis=0)  # every tuple delivered
    scores = []
    for cell in (0, 1):
        bins = np.zeros(2 * added.shape[1] - 1)
        bins[::2] = added[cell]  # each value is snapped to a candidate: bin 2i
        scores.append(quantile_scores(bins.tolist(), 0.5))
    return scores


@pytest.mark.parametrize("bounds", [(-10.0, 10.0), (-20.0, 10.0)])  # the row at hi, at lo
def test_the_near_tie_pair_lets_the_row_tip_each_median(bounds) -> None:
    """Key b's median is a tie without the row, a's with it; the row tips each by one step
    (½ up for one candidate, ½ down for the other: OpenDP's worst case for one value)."""
    from dpcomm.experiments.release_audit import TIE_VALUES

    neighbours = release_neighbours(
        num_targets=2, num_sources=4 * TIE_VALUES + 10, bounds=bounds, pair="quantile-near-tie"
    )
    assert neighbours.cells == (0, 1)
    (a_in_d, b_in_d), (a_in_d_prime, b_in_d_prime) = (
        _median_cells(neighbours, table) for table in neighbours.tables()
    )
    for tied, tipped in ((a_in_d, a_in_d_prime), (b_in_d, b_in_d_prime)):
        best = np.flatnonzero(tied == tied.min())
        assert best.size == 2 and best[1] == best[0] + 1  # two adjacent candidates tie
        assert abs(tipped[best[0]] - tipped[best[1]]) == 1.0  # one whole step apart
        others = np.delete(tipped, best)
        assert others.min() >= tipped[best].max() + TIE_VALUES / 2 - 1  # the rest far behind
    assert "quantile-near-tie" in neighbours.describe()


def test_the_near_tie_pair_is_tried_for_quantiles_only() -> None:
    from dpcomm.experiments.release_audit import (
        _candidate_neighbours,
        _releases_quantile,
        candidate_pairs,
    )

    assert "quantile-near-tie" not in {p.name for p in candidate_pairs((-10.0, 10.0))}
    assert candidate_pairs((-10.0, 10.0), quantile=True)[-1].name == "quantile-near-tie"
    median = "SELECT k, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY k"
    assert _releases_quantile(median, (-10.0, 10.0))
    assert not _releases_quantile(SQL, (-10.0, 10.0))

    def searched(sources: int, quantile: bool) -> list[str]:
        found = _candidate_neighbours((-10.0, 10.0), 2, sources, None, quantile=quantile)
        return [n.pair.name for n in found]

    assert searched(2000, quantile=True)[-1] == "quantile-near-tie"
    assert "quantile-near-tie" not in searched(2000, quantile=False)
    assert "quantile-near-tie" not in searched(1, quantile=True)  # local flooding: no others
    with pytest.raises(InvalidParameterError) as error:  # SUM(v): no median to tip
        audit_release(runs=100, pairs=("quantile-near-tie",), rng=0)
    assert error.value.name == "pairs"
    with pytest.raises(InvalidParameterError) as error:  # too few sources to place
        release_neighbours(num_targets=2, num_sources=5, pair="quantile-near-tie")
    assert error.value.name == "num_sources"


def test_with_two_compute_nodes_the_third_key_shares_the_first_ones_node() -> None:
    neighbours = release_neighbours(num_targets=2, num_sources=3, pair="others-on-destination")
    assert neighbours.targets == (0, 1, 0) and len(set(neighbours.keys)) == 3
    keys = table_from_arrays("keys", {"k": np.array(neighbours.keys, dtype=object)})
    assert partition_keys(keys, 2).tolist() == [0, 1, 0]
    d, d_prime = neighbours.tables()
    assert d.column("v").values.tolist() == [500.0, 10.0, 10.0]
    assert d_prime.column("k").values.tolist() == [neighbours.keys[1]] * 3
    assert d_prime.column("v").values.tolist() == [-10.0, 10.0, 10.0]


def test_exact_results_add_up_the_delivered_contributions() -> None:
    from dpcomm.experiments.release_audit import exact_results

    rng = np.random.default_rng(0)
    added = rng.integers(-2, 3, size=(7, 3, 2)).astype(float)
    added[3:] = added[3]  # identical contributions are counted together
    delivered = rng.random((50, 7)) < 0.6
    expected = np.einsum("rs,ska->rka", delivered.astype(float), added)
    assert np.allclose(exact_results(delivered, added), expected)


def test_the_old_sensitivity_fault_claims_the_declared_guarantee() -> None:
    """``old-sensitivity``: noise calibrated to 2M (every view own-row), the claim unchanged."""
    from dpcomm.experiments.release_audit import (
        DEFAULT_COUNTERMEASURE,
        DEFAULT_RELEASE,
        seeded_release_fault,
    )
    from dpcomm.plan.privacy import account_plan
    from dpcomm.release.report import release_report

    neighbours = release_neighbours(num_targets=2, num_sources=3, pair="others-on-destination")
    table = neighbours.tables()[0]
    correct = audited_program(table, DEFAULT_RELEASE, neighbours, 2)
    faulty = audited_program(table, DEFAULT_RELEASE, neighbours, 2, fault="old-sensitivity")
    assert seeded_release_fault(correct, "old-sensitivity").release == faulty.release
    (right,), (wrong,) = correct.release.noises, faulty.release.noises
    # Three keys on T = 2 nodes: one node owns two, 3M (= M + W for [−10, 10]).
    assert correct.release.views == ("one-other-shared-node",)
    assert right.sensitivity.l1 == pytest.approx(30.0)
    assert wrong.sensitivity.l1 == pytest.approx(20.0)  # 2M: the row's own change alone
    assert wrong.scale == pytest.approx(20.0 / 3.0) and right.scale == pytest.approx(10.0)
    assert faulty.release.views == correct.release.views  # the views it claims
    privacy = account_plan(correct.plan, DEFAULT_COUNTERMEASURE, delta=1e-2)
    claimed = release_report(correct, privacy)
    assert release_report(faulty, privacy) == dataclasses.replace(
        claimed, aggregates=release_report(faulty, privacy).aggregates
    )
    with pytest.raises(InvalidParameterError, match="fault"):
        seeded_release_fault(correct, "half-noise")
