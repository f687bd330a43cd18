"""The contract every engine satisfies: one run, any engine.

:class:`EngineContract` is the abstract test class (as dp_accounting's accountant tests are):
each engine's test module subclasses it and says how to build the engine. With the same seed an
engine gives the run of the in-memory engine (the reference), message for message: the same
result rows, the same delivered tuples, the same messages, dummies and edges per routed flow, the
same guarantee; and its result is DuckDB's over the delivered tuples. This holds for Aggregate and
K-means, at σ > 0, for every mechanism, and on a real public table.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources

import numpy as np
import pytest

from dpcomm.data import load_mnist5k, table_from_relation
from dpcomm.engine.memory import simulate
from dpcomm.pipeline.runs import run_aggregate, run_kmeans
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, reference_result
from dpcomm.queries.kmeans import KMeansProgram
from dpcomm.release.noise import noisy_program
from dpcomm.release.report import release_report

MECHANISMS = {
    "none": NoCountermeasure(),
    "local": LocalFlooding(sampling_rate=0.3, num_dummies=2),
    "scramblers": Scramblers(sampling_rate=0.25, batch_size=30, num_dummies=6),
    "capped": Scramblers(sampling_rate=0.25, batch_size=30, num_dummies=6, capped=True),
}
SEED = 1234
#: Table sizes are multiples of the batch size n = 30: batches of n exactly (no warning).
AUTOMPG_SQL = (
    'SELECT cylinders, "model year", "car name", COUNT(*), AVG(mpg) AS "mpg moyen", '
    'MAX(horsepower) FROM cars GROUP BY GROUPING SETS ((cylinders), ("model year"), '
    '("car name"), ())'
)


def autompg(rows: int = 150) -> AggregateProgram:
    """mlxtend's Auto MPG data (real, public; a text column of car names), first ``rows``."""
    import duckdb

    path = resources.files("mlxtend").joinpath("data/data/autompg.csv.gz")
    names = [
        "cylinders",
        "displacement",
        "horsepower",
        "weight",
        "acceleration",
        "model year",
        "origin",
        "car name",
        "mpg",
    ]
    relation = duckdb.connect().sql(
        f"SELECT * FROM read_csv(?, header = false, names = {names!r}) LIMIT {int(rows)}",
        params=[str(path)],
    )
    table = table_from_relation(relation, "cars")
    return AggregateProgram.from_sql(AUTOMPG_SQL, table, num_targets=4)


def synthetic_program(rows: int = 180) -> AggregateProgram:
    """A table with NULLs, a text key and float measures."""
    from dpcomm.data import Column, Table

    rng = np.random.default_rng(5)
    nulls = rng.random(rows) < 0.1
    columns = (
        Column("k", "BIGINT", np.where(nulls, 0, rng.integers(0, 9, rows)), nulls),
        Column("s", "VARCHAR", np.array(rng.choice(["é", "b c", "🙂", ""], rows), dtype=object),
               np.zeros(rows, dtype=bool)),
        Column("x", "DOUBLE", rng.normal(size=rows) * 1e3, np.zeros(rows, dtype=bool)),
    )  # fmt: skip
    table = Table("t", columns)
    sql = "SELECT k, s, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY GROUPING SETS ((k), (s))"
    return AggregateProgram.from_sql(sql, table, num_targets=5)


def release_program(rows: int = 120) -> AggregateProgram:
    """:func:`synthetic_program`'s table released with Laplace noise over k's public domain
    (its MEDIAN drawn by OpenDP's quantile mechanism from the delivered values' bins)."""
    from dpcomm.release.mechanisms import Laplace

    table = synthetic_program(rows).table
    return noisy_program(
        "SELECT k, COUNT(*), AVG(x), MEDIAN(x) FROM t GROUP BY k",
        table,
        num_targets=5,
        release=Laplace(1.0),
        bounds={"x": (-1000.0, 1000.0)},
        keys={"k": list(range(10))},
    )


def key_selection_program(rows: int = 360) -> AggregateProgram:
    """:func:`synthetic_program`'s table, its text keys released without a public domain:
    OpenDP's threshold selects them (4 keys of about 90 rows each and one, "rare", of 2 rows;
    τ is about 28)."""
    from dpcomm.data import Column, Table
    from dpcomm.release.mechanisms import Laplace

    table = synthetic_program(rows).table
    text = table.column("s")
    values = text.values.copy()
    values[:2] = "rare"
    table = Table("t", [Column("s", "VARCHAR", values, text.is_null)])
    return noisy_program(
        "SELECT s, COUNT(*) AS n FROM t GROUP BY s",
        table,
        num_targets=5,
        release=Laplace(1.0),
        key_selection_delta=1e-6,
    )


#: Over a table without rows DuckDB answers one row for the empty grouping set and none for
#: a grouping set with keys: what every engine must give, as DuckDB names and types it.
EMPTY_SQL = (
    "SELECT k, s, COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(s), MAX(k) FROM t "
    "GROUP BY GROUPING SETS ((k), (s), ())"
)
EMPTY_ROW = {
    "k": None, "s": None, "count_star()": 0, "count(x)": 0, "sum(x)": None, "avg(x)": None,
    "min(s)": None, "max(k)": None, "grouping_set": "()",
}  # fmt: skip
#: Without countermeasure and with scramblers, at σ = 0 and with sampling.
EMPTY_MECHANISMS = {
    "none": NoCountermeasure(),
    "scramblers at σ = 0": Scramblers(sampling_rate=0.0, batch_size=30, num_dummies=6),
    "scramblers": MECHANISMS["scramblers"],
}


def without_rows(sql: str = EMPTY_SQL, **release) -> AggregateProgram:
    """``sql`` over :func:`synthetic_program`'s table without its rows (released if asked)."""
    table = synthetic_program().table.take(np.arange(0))
    if release:
        return noisy_program(sql, table, num_targets=5, **release)
    return AggregateProgram.from_sql(sql, table, num_targets=5)


def duckdb_types(sql: str) -> list[tuple[str, str]]:
    """DuckDB's (name, type) of each column of ``sql`` over a table t(k, s, x) without rows."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("CREATE TABLE t(k BIGINT, s VARCHAR, x DOUBLE)")
    cursor = connection.execute(sql)
    assert cursor.fetchall() == [(None, None, 0, 0, None, None, None, None)]
    return [(d[0], str(d[1])) for d in cursor.description]


def edges(flow) -> list[tuple[int, int, int]]:
    """A routed flow's (sender, receiver, messages) edges, sorted."""
    columns = (flow.senders.tolist(), flow.receivers.tolist(), flow.counts.tolist())
    return sorted(zip(*columns, strict=True))


def same_run(first, second) -> None:
    """Two runs of the same program with the same seed are the same run."""
    assert (
        second.result == first.result
        if not isinstance(first.result, np.ndarray)
        else (np.array_equal(first.result, second.result))
    )
    assert set(first.delivered) == set(second.delivered)
    for flow, mask in first.delivered.items():
        assert np.array_equal(mask, second.delivered[flow]), flow
    assert [f.flow for f in first.traffic] == [f.flow for f in second.traffic]
    for mine, theirs in zip(first.traffic, second.traffic, strict=True):
        assert (mine.messages, mine.dummies) == (theirs.messages, theirs.dummies), mine.flow
        if not hasattr(mine, "senders") or not hasattr(theirs, "senders"):
            # A run that kept summaries: the same number of edges and the same edge digest.
            assert mine.summary() == theirs.summary(), mine.flow
            continue
        edges = sorted(
            zip(mine.senders.tolist(), mine.receivers.tolist(), mine.counts.tolist(), strict=False)
        )
        other = sorted(
            zip(
                theirs.senders.tolist(),
                theirs.receivers.tolist(),
                theirs.counts.tolist(),
                strict=False,
            )
        )
        assert edges == other, mine.flow
    assert first.privacy.guarantee == second.privacy.guarantee


class EngineContract:
    """Subclass and define :meth:`engine` (an object with ``execute``) to test an engine."""

    def engine(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
    def test_aggregate_is_the_memory_run_and_duckdbs_result(self, mechanism):
        program = synthetic_program()
        countermeasure = MECHANISMS[mechanism]
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
        same_run(reference, run)
        masks = [run.delivered[flow] for flow in program.flow_names]
        expected = reference_result(program.query, program.table, masks)
        assert compare_results(run.result, expected) == []
        if mechanism != "none":
            assert not all(mask.all() for mask in masks)  # σ > 0 dropped some tuples

    @pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
    def test_kmeans_is_the_memory_run(self, mechanism):
        digits = load_mnist5k()
        program = KMeansProgram(digits.train_images[:150], 3, 3, seed=2)
        countermeasure = MECHANISMS[mechanism]
        if isinstance(countermeasure, LocalFlooding):
            countermeasure = LocalFlooding(sampling_rate=0.5, num_dummies=1)
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
        same_run(reference, run)
        assert run.state.iterations_done == 3

    def test_a_kmeans_release_is_the_memory_run_up_to_its_noise(self):
        # The noise is OpenDP's (never the seed's): at a huge ε2 it moves the centroids by
        # ~1e-8, so every engine routes, delivers and reports as the memory engine does, and
        # the noisy centroids agree to that noise.
        from dpcomm.release.kmeans import bind_kmeans_release
        from dpcomm.release.mechanisms import Laplace

        rng = np.random.default_rng(3)
        points = np.vstack([rng.normal(c, 0.3, (40, 2)) for c in (0.0, 3.0, 6.0)])
        countermeasure = MECHANISMS["scramblers"]
        release = bind_kmeans_release(
            Laplace(1e9), [(-1.0, 7.0)] * 2, dimension=2, num_iterations=2
        )
        program = KMeansProgram(points, 3, 2, seed=2, release=release)
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
        assert np.allclose(run.result, reference.result, atol=1e-4)
        assert not np.array_equal(run.result, program.without_release().initial_centroids)
        same_run(reference, replace(run, result=reference.result))
        assert run.state.iterations_done == 2

    def test_a_real_public_table(self):
        program = autompg()
        countermeasure = MECHANISMS["scramblers"]
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        same_run(simulate(program, countermeasure, delta=1e-4, seed=SEED), run)
        masks = [run.delivered[flow] for flow in program.flow_names]
        assert (
            compare_results(run.result, reference_result(program.query, program.table, masks)) == []
        )

    def test_count_star_over_the_empty_grouping_set(self):
        # The empty set's sources carry no value (COUNT(*) only): every row still counts.
        from dpcomm.data import table_from_arrays

        table = table_from_arrays("t", {"a": np.arange(60) % 7, "x": np.arange(60) * 0.5})
        program = AggregateProgram.from_sql(
            "SELECT a, COUNT(*) FROM t GROUP BY ROLLUP (a)", table, num_targets=3
        )
        run = self.engine().execute(program, MECHANISMS["scramblers"], delta=1e-4, seed=SEED)
        same_run(simulate(program, MECHANISMS["scramblers"], delta=1e-4, seed=SEED), run)
        total = next(row for row in run.result if row["a"] is None)
        assert total["count_star()"] == 60  # a single target: never sampled, never lost

    @pytest.mark.parametrize("mechanism", sorted(EMPTY_MECHANISMS))
    def test_a_table_without_rows_is_duckdbs_answer(self, mechanism):
        # No source sends: the empty grouping set's compute node gets no tuple and still
        # sends its row; a grouping set with keys has none. No row, no neighbour: (0, 0).
        program = without_rows()
        countermeasure = EMPTY_MECHANISMS[mechanism]
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        same_run(simulate(program, countermeasure, delta=1e-4, seed=SEED), run)
        assert run.result == [EMPTY_ROW]
        query = program.query
        typed = list(zip(query.result_names, map(str, query.result_types), strict=True))
        assert typed[:-1] == duckdb_types(EMPTY_SQL)  # the grouping_set column is dpcomm's
        guarantee = run.privacy.guarantee
        assert (guarantee.epsilon, guarantee.delta, guarantee.method) == (0.0, 0.0, "no-data")
        assert all(not mask.size for mask in run.delivered.values())

    def test_a_release_over_a_table_without_rows_draws_its_noise(self):
        from dpcomm.release.mechanisms import Laplace

        program = without_rows(
            "SELECT k, COUNT(*), SUM(x) FROM t GROUP BY k",
            release=Laplace(1.0),
            bounds={"x": (-10.0, 10.0)},
            keys={"k": list(range(10))},
        )
        countermeasure = MECHANISMS["scramblers"]
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
        exact = program.without_release()
        same_run(*[replace(r, result=exact.result(r.state)) for r in (reference, run)])
        assert exact.result(run.state) == []
        raw = program.raw_result(run.state)
        assert [row["k"] for row in raw] == list(range(10))  # every key of the domain
        assert any(row["sum(x)"] != 0 for row in raw)  # the noise was drawn
        report = release_report(program, run.privacy)
        assert report == release_report(program, reference.privacy)
        assert run.privacy.guarantee.epsilon == 0.0
        # ε2, and ε2 with every share's allowances (`charged_shares`) against both.
        assert report.epsilon == pytest.approx(1.0)
        assert report.epsilon <= report.epsilon_total <= report.epsilon * (1 + 2e-9)

    def test_one_report_shape(self):
        program = synthetic_program(120)
        outcome = run_aggregate(
            program, MECHANISMS["scramblers"], delta=1e-4, seed=SEED, engine=self.engine()
        )
        report = outcome.report
        document = report.to_dict()
        assert {"privacy", "utility", "efficiency", "seed", "randomness", "engine"} <= set(document)
        traffic = report.efficiency.traffic
        assert [t.flow for t in traffic] == [f.name for f in outcome.run.transformed.flows]
        assert sum(t.messages for t in traffic) == outcome.run.transformed.messages
        assert document["efficiency"]["traffic"][0]["flow"] == traffic[0].flow
        assert report.seed == SEED and "seed" in report.randomness
        # An engine computing the result elsewhere is checked against the delivered tuples.
        assert report.utility.result_is_of_delivered_tuples is True
        # The non-private baseline is not accounted; the run is.
        assert outcome.baseline.privacy is None and outcome.run.privacy is not None
        digits = load_mnist5k()
        kmeans = run_kmeans(
            KMeansProgram(digits.train_images[:90], 2, 2, seed=0),
            MECHANISMS["scramblers"],
            test_points=digits.test_images[:200],
            test_labels=digits.test_labels[:200],
            delta=1e-4,
            seed=SEED,
            engine=self.engine(),
        )
        assert set(kmeans.report.to_dict()) >= {"privacy", "utility", "efficiency"}
        assert 0.0 <= kmeans.rand_index <= 1.0

    def test_a_release_is_the_memory_run_up_to_its_noise(self):
        program = release_program()
        countermeasure = MECHANISMS["scramblers"]
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
        exact = program.without_release()
        before_noise = [replace(r, result=exact.result(r.state)) for r in (reference, run)]
        same_run(*before_noise)
        # the same exact core rows, the MEDIAN's bins included: the same draw's inputs
        assert exact.core_result(run.state) == exact.core_result(reference.state)
        assert release_report(program, run.privacy) == release_report(program, reference.privacy)
        keys = [
            [(row["k"], row["count_star()"] is None) for row in r.result] for r in (reference, run)
        ]
        grid = set(program.release.quantiles[0].candidates)
        assert all(row["median(x)"] in grid for r in (reference, run) for row in r.result)
        assert keys[0] == keys[1] == [(k, False) for k in range(10)]  # the domain, nothing else
        assert run.result != before_noise[1].result  # the noise was added

    def test_key_selection_is_the_memory_run_up_to_its_noise(self):
        program = key_selection_program()
        countermeasure = MECHANISMS["scramblers"]
        run = self.engine().execute(program, countermeasure, delta=1e-4, seed=SEED)
        reference = simulate(program, countermeasure, delta=1e-4, seed=SEED)
        exact = program.without_release()
        same_run(*[replace(r, result=exact.result(r.state)) for r in (reference, run)])
        report = release_report(program, run.privacy)
        assert report == release_report(program, reference.privacy)
        assert report.key_selection is not None and report.delta == pytest.approx(1e-6)
        counts = {row["s"]: row["n"] for row in exact.result(reference.state)}
        assert counts["rare"] <= 2 and min(n for n in counts.values() if n > 2) > 60
        for result in (reference.result, run.result):
            released = {row["s"]: row["n"] for row in result}
            # Every key far above τ, not the rare one (raw keys would show it; P ≈ 1e-6 under
            # the threshold), none outside the data. (That the counts are noisy: the release
            # test above; an integer noise is 0 for all four keys one time in 300.)
            assert set(released) == set(counts) - {"rare"}
            assert all(n >= report.key_selection.threshold for n in released.values())

    def test_without_a_seed_the_draws_are_fresh(self):
        program = synthetic_program(120)
        countermeasure = LocalFlooding(sampling_rate=0.5, num_dummies=1)
        first = self.engine().execute(program, countermeasure, delta=1e-4, seed=None)
        second = self.engine().execute(program, countermeasure, delta=1e-4, seed=None)
        assert first.seed is None
        masks = [(first.delivered[f], second.delivered[f]) for f in program.flow_names]
        # 120 sources × 2 flows, each real with probability 0.5 + 0.5/5: equal by chance 2^-150.
        assert any(not np.array_equal(a, b) for a, b in masks)
