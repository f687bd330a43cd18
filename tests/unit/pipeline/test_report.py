"""The typed report: built once from a run and its unaccounted baseline; JSON only in to_dict()."""

import dataclasses
import json
import math

import numpy as np
import pytest

from dpcomm.data import table_from_arrays
from dpcomm.engine.engines import MemoryEngine, make_engine
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.estimate import ESTIMATE_SEMANTICS, EstimateReport
from dpcomm.pipeline.report import (
    NO_COUNTERMEASURE_REASON,
    RESULT_SEMANTICS,
    SEEDED_NOTE,
    Report,
)
from dpcomm.pipeline.runs import AggregateRun, KMeansRun, run_aggregate, run_kmeans
from dpcomm.pipeline.utility import KMeansUtility
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram

SQL = "SELECT a, COUNT(*), AVG(x) FROM t GROUP BY GROUPING SETS ((a), (b))"


def program(rows=400):
    rng = np.random.default_rng(3)
    table = table_from_arrays(
        "t",
        {"a": rng.integers(0, 6, rows), "b": rng.integers(0, 3, rows), "x": rng.normal(size=rows)},
    )
    return AggregateProgram.from_sql(SQL, table, num_targets=4)


def test_values_stay_floats_until_to_dict():
    outcome = run_aggregate(program(), NoCountermeasure(), delta=1e-4, seed=2)
    report = outcome.report
    assert isinstance(report, Report)
    assert report.privacy.epsilon == math.inf  # a float, not "inf"
    assert report.privacy.clusters[0].why_infinite == NO_COUNTERMEASURE_REASON
    document = report.to_dict()
    assert document["privacy"]["epsilon"] == "inf"
    assert json.loads(json.dumps(document, allow_nan=False)) == document
    assert list(document) == [
        "query",
        "engine",
        "countermeasure",
        "seed",
        "randomness",
        "privacy",
        "efficiency",
        "sql",
        "result_semantics",
        "utility",
    ]
    assert document["randomness"] == SEEDED_NOTE == report.randomness
    assert document["utility"]["grouping_sets"][0]["grouping_set"] == "(a)"
    assert document["efficiency"]["traffic"][0] == dataclasses.asdict(report.efficiency.traffic[0])


def test_the_baseline_is_not_accounted_and_utility_is_read_from_both_runs():
    outcome = run_aggregate(
        program(), Scramblers(sampling_rate=0.5, batch_size=50, num_dummies=3), delta=1e-4, seed=1
    )
    assert outcome.baseline.privacy is None and outcome.run.privacy is not None
    utility = outcome.report.utility
    used = outcome.run.tuples_used()
    assert [s.tuples_used for s in utility.grouping_sets] == [used["(a)"], used["(b)"]]
    assert utility.tuples_used == {"(a)": used["(a)"], "(b)": used["(b)"]}
    assert max(utility.tuples_used.values()) < utility.sources == 400
    summary = outcome.report.summary()
    assert f"(a) {used['(a)']}, (b) {used['(b)']} of 400 rows used" in summary
    assert utility.result_is_of_delivered_tuples
    assert max(utility.mean_relative_error.values()) > 0  # σ = 0.5 lost tuples


def test_an_estimate_is_labelled_and_typed():
    outcome = run_aggregate(
        program(), Scramblers(sampling_rate=0.5, batch_size=50, num_dummies=3), delta=1e-4, seed=1
    )
    estimated = outcome.with_unbiased_estimate()
    assert isinstance(estimated, AggregateRun) and outcome.report.estimate is None
    assert isinstance(estimated.report.estimate, EstimateReport)
    assert estimated.report.result_semantics == ESTIMATE_SEMANTICS
    assert outcome.report.result_semantics == RESULT_SEMANTICS
    document = estimated.report.to_dict()
    assert list(document)[-1] == "estimate"
    assert document["estimate"]["method"] == "horvitz-thompson"
    assert document["result_semantics"] == ESTIMATE_SEMANTICS
    assert str(estimated.result["count_star() (estimate)"].dtype) == "float64"
    assert list(estimated.result.columns) == list(estimated.columns)
    assert estimated.to_dict()["result"] == estimated.rows
    assert set(estimated.report.utility.mean_relative_error) == {
        "count_star() (estimate)",
        "avg(x) (estimate)",
    }


def test_kmeans_without_labels_reports_no_rand_index():
    points = np.random.default_rng(1).normal(size=(60, 2))
    outcome = run_kmeans(KMeansProgram(points, 2, 2), NoCountermeasure(), delta=1e-4, seed=1)
    assert isinstance(outcome, KMeansRun) and outcome.rand_index is None
    assert isinstance(outcome.report.utility, KMeansUtility)
    utility = outcome.report.to_dict()["utility"]
    assert not {"rand_index", "adjusted_rand_index", "normalized_mutual_info"} & set(utility)
    assert outcome.adjusted_rand_index is None and outcome.normalized_mutual_info is None
    assert outcome.assignments.shape == (60,) and outcome.centroids.dtype == np.float64


def test_kmeans_scores_are_scikit_learns_against_the_labels():
    """Iris, K = 3: the three scores of the run and of its baseline, as scikit-learn computes
    them from the labels and each run's clusters."""
    from sklearn.datasets import load_iris
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, rand_score

    iris = load_iris()
    program = KMeansProgram(iris.data, 3, 3, seed=2)
    chosen = Scramblers(sampling_rate=0.5, batch_size=30, num_dummies=3)
    outcome = run_kmeans(
        program, chosen, test_points=iris.data, test_labels=iris.target, delta=1e-4, seed=4
    )
    utility = outcome.report.utility
    for suffix, state in (("", outcome.run.state), ("_nonprivate", outcome.baseline.state)):
        clusters = program.assign(state, iris.data)
        for name, score in (
            ("rand_index", rand_score),
            ("adjusted_rand_index", adjusted_rand_score),
            ("normalized_mutual_info", normalized_mutual_info_score),
        ):
            assert getattr(utility, name + suffix) == score(iris.target, clusters), name + suffix
    assert outcome.adjusted_rand_index == utility.adjusted_rand_index
    assert outcome.normalized_mutual_info == utility.normalized_mutual_info
    assert f"adjusted {utility.adjusted_rand_index:.4f};" in repr(outcome)
    assert set(outcome.report.to_dict()["utility"]) >= {
        "adjusted_rand_index_nonprivate",
        "normalized_mutual_info_nonprivate",
    }


def test_a_run_without_guarantee_cannot_be_reported():
    from dpcomm.pipeline.report import run_report

    baseline = MemoryEngine().baseline(program(), seed=1)
    with pytest.raises(InvalidParameterError) as caught:
        run_report(baseline, baseline, None)
    assert caught.value.name == "run"


def test_engines_are_made_in_one_place():
    assert make_engine("memory").name == "memory"
    engine = MemoryEngine()
    assert make_engine(engine) is engine
    with pytest.raises(InvalidParameterError) as caught:
        make_engine("memory", scheduler="tcp://127.0.0.1:1")
    assert caught.value.name == "scheduler" and "engine='dask'" in caught.value.allowed
    with pytest.raises(InvalidParameterError) as caught:
        make_engine("dask", scheduler="tcp://127.0.0.1:1", workers=2)
    assert caught.value.name == "workers"
    with pytest.raises(InvalidParameterError) as caught:
        make_engine("spark")
    assert caught.value.name == "engine"
    dask = make_engine("dask", partitions=3)
    assert dask.reads_row_sources and not engine.reads_row_sources


def test_the_summary_leads_with_the_guarantee_of_everything_published():
    """Under a release, the one line starts with the ε of traffic and release together (what
    an observer of both learns), then each one's; K-means counts its caveats."""
    import numpy as np

    import dpcomm

    table = dpcomm.datasets.synthetic(rows=300, seed=1)
    scramblers = dpcomm.Scramblers(sampling_rate=0.2, batch_size=50, num_dummies=5)
    run = dpcomm.run_sql(
        "SELECT g1, COUNT(*) AS n FROM t GROUP BY g1", table, countermeasure=scramblers,
        release=dpcomm.Laplace(1.0), keys={"g1": list(range(20))},
    )  # fmt: skip
    release, privacy = run.report.release, run.report.privacy
    assert release is not None
    assert run.report.summary().startswith(
        f"ε = {release.epsilon_total:.4g} at δ = {release.composed_delta:g} for the traffic and "
        f"the noisy release together (traffic ε1 = {privacy.epsilon:.4g}, release ε2 = 1)"
    )
    points = np.random.default_rng(0).normal(size=(100, 2))
    kmeans = dpcomm.kmeans(points, k=2, iterations=1, countermeasure=scramblers, seed=1)
    count = len(kmeans.report.privacy.caveats)
    assert count >= 1 and f"{count} caveat" in kmeans.report.summary()
