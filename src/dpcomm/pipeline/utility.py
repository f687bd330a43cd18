"""What a run's result lost against its non-private baseline: the utility of its report.

Both results are the two runs' own (the run's, from the tuples it delivered; the baseline's,
from every tuple): an Aggregate's are read from their final states ([`flow_rows`][]), a
K-means' Rand indices from their final centroids. Nothing is evaluated a third time.

Under a noisy release the report never compares the published values with the data (nor with
another draw of the noise): its utility is the *expected* error of what is published, from
public quantities only ([`ReleaseUtility`][]). A comparison with the exact result is a separate
call for whoever holds the data (``dpcomm.compare_with_exact``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm._json import json_ready
from dpcomm.engine.run import Run
from dpcomm.queries.aggregate import AggregateProgram, AggregateState
from dpcomm.queries.kmeans import (
    KMeansProgram,
    adjusted_rand_index,
    normalized_mutual_info,
    rand_index,
)

Row = dict[str, Any]


@dataclass(frozen=True)
class GroupingSetUtility:
    """The tuples one grouping set used, and its groups that the run lost.

    Attributes:
        grouping_set: the grouping set, e.g. ``(A, B)``.
        tuples_used: real tuples counted.
        tuples_used_fraction: ``tuples_used`` / S (1 of a table without rows: none lost).
        groups: groups of the non-private result.
        groups_missing: of those, the groups absent from the run's result.
    """

    grouping_set: str
    tuples_used: int
    tuples_used_fraction: float
    groups: int
    groups_missing: int


@dataclass(frozen=True)
class AggregateUtility:
    """What an Aggregate run's result lost against the non-private one.

    The relative error of a value is |private − exact| / |exact| (absolute when exact = 0; 1
    when exactly one of the two is NULL); a group of the non-private result absent from the
    run's is *missing*.

    Attributes:
        sources: S, the sources (the table's rows; every grouping set of the non-private
            run counts all S).
        tuples_used: real tuples counted, per grouping set (each out of S).
        grouping_sets: per grouping set.
        groups: groups of the non-private result.
        groups_missing: of those, the groups absent from the run's result.
        mean_relative_error: per aggregate column of the result (for an estimated result,
            the estimates' columns), over the groups present in both.
        max_relative_error: per aggregate column.
        result_is_of_delivered_tuples: whether the run's result is the result of the tuples it
            delivered (always, unless a result computed elsewhere lost an output).
    """

    sources: int
    tuples_used: Mapping[str, int]
    grouping_sets: tuple[GroupingSetUtility, ...]
    groups: int
    groups_missing: int
    mean_relative_error: Mapping[str, float]
    max_relative_error: Mapping[str, float]
    result_is_of_delivered_tuples: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The utility as JSON."""
        document: dict[str, Any] = json_ready(asdict(self))
        return document


#: The fields of [`KMeansUtility`][] that only labels give.
LABEL_SCORES = (
    "test_points",
    "rand_index",
    "rand_index_nonprivate",
    "adjusted_rand_index",
    "adjusted_rand_index_nonprivate",
    "normalized_mutual_info",
    "normalized_mutual_info_nonprivate",
)


@dataclass(frozen=True)
class KMeansUtility:
    """What a K-means run's clusters lost against non-private K-means from the same start.

    The clusters are compared with the labels by three scikit-learn scores: the Rand index
    (share of point pairs on which they agree), the adjusted Rand index (0 for clusters drawn
    at random, 1 for the labels' partition; it moves where the Rand index, dominated by the
    pairs both split, barely does) and the normalized mutual information (arithmetic mean).

    Attributes:
        sources: S, the training points.
        test_points: points the scores are measured on (None: no labels were given).
        rand_index: the run's Rand index against the labels (None: no labels).
        rand_index_nonprivate: the non-private run's (None: no labels).
        tuples_used_per_iteration: real tuples counted in every iteration.
        tuples_used_fraction: their mean over S.
        adjusted_rand_index: the run's adjusted Rand index (None: no labels).
        adjusted_rand_index_nonprivate: the non-private run's (None: no labels).
        normalized_mutual_info: the run's normalized mutual information (None: no labels).
        normalized_mutual_info_nonprivate: the non-private run's (None: no labels).
    """

    sources: int
    test_points: int | None
    rand_index: float | None
    rand_index_nonprivate: float | None
    tuples_used_per_iteration: tuple[int, ...]
    tuples_used_fraction: float
    adjusted_rand_index: float | None = None
    adjusted_rand_index_nonprivate: float | None = None
    normalized_mutual_info: float | None = None
    normalized_mutual_info_nonprivate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The utility as JSON (without the scores when there were no labels)."""
        fields = asdict(self)
        if self.rand_index is None:
            for name in LABEL_SCORES:
                del fields[name]
        document: dict[str, Any] = json_ready(fields)
        return document


@dataclass(frozen=True)
class ReleaseUtility:
    """The expected error of a noisy release, from public quantities only.

    Every number is a function of public parameters (S, the countermeasure's delivery
    probability P, the noise of every released aggregate) and of the released rows (how many
    there are): none compares the release with the data, so printing it reveals nothing beyond
    the release. A published COUNT or SUM counts the delivered tuples, each with probability P:
    it is expected P times the exact value over every tuple (a relative bias of 1 − P; 0 for
    an estimate, which divides by P, and for AVG, where P cancels), plus noise of the standard
    deviation given (absolute, in the aggregate's unit).

    Attributes:
        sources: S, the sources (the table's rows, public).
        delivery_probability: P per grouping set (1 − σ + σ/T under local sampling σ).
        expected_tuples_used: P × S per grouping set.
        sampling_relative_bias: per grouping set, the expected relative error of a published
            COUNT or SUM from the tuples not delivered (1 − P; 0 for estimates).
        groups: the rows released, over every grouping set.
        groups_released: the rows released per grouping set.
        noise_standard_deviation: per released aggregate, its noise's standard deviation.
        noise_half_width_95: per released aggregate, half-width of its noise's 95% interval.
        estimated: whether the values are estimates over every tuple (``--estimate``).
    """

    sources: int
    delivery_probability: Mapping[str, float]
    expected_tuples_used: Mapping[str, float]
    sampling_relative_bias: Mapping[str, float]
    groups: int
    groups_released: Mapping[str, int]
    noise_standard_deviation: Mapping[str, float]
    noise_half_width_95: Mapping[str, float]
    estimated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The expected utility as JSON."""
        document: dict[str, Any] = json_ready(asdict(self))
        return document


def release_utility(
    *,
    sources: int,
    delivery_probability: Mapping[str, float],
    released: Mapping[str, int],
    noises: Sequence[tuple[str, float, float]],
    estimated: bool = False,
) -> ReleaseUtility:
    """The [`ReleaseUtility`][] of a release: no data, no second draw.

    ``released`` is the count of released rows per grouping set, ``noises`` each released
    aggregate's (label, standard deviation, 95% half-width) (`ReleaseReport.aggregates`).
    """
    return ReleaseUtility(
        sources=sources,
        delivery_probability=dict(delivery_probability),
        expected_tuples_used={n: p * sources for n, p in delivery_probability.items()},
        sampling_relative_bias={
            n: 0.0 if estimated else 1.0 - p for n, p in delivery_probability.items()
        },
        groups=sum(released.values()),
        groups_released=dict(released),
        noise_standard_deviation={label: sd for label, sd, _ in noises},
        noise_half_width_95={label: width for label, _, width in noises},
        estimated=estimated,
    )


def flow_rows(program: AggregateProgram, state: AggregateState) -> list[list[Row]]:
    """The result rows of every grouping set (in the result's order) from a final state."""
    return program.core_result(state)


def _numeric(value: object) -> bool:
    """Whether an aggregate's value has a relative error (not text, a date or a boolean)."""
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _keyed(rows: list[Row], key_columns: list[str]) -> dict[tuple[Any, ...], Row]:
    """Rows by their grouping key (numbered when a key repeats, e.g. unselected columns)."""
    seen: Counter[tuple[Any, ...]] = Counter()
    keyed = {}
    for row in rows:
        key = tuple(row[c] for c in key_columns)
        keyed[(*key, seen[key])] = row
        seen[key] += 1
    return keyed


def _fraction(used: int, sources: int) -> float:
    """``used`` / S; 1 when there is no source (no tuple was lost)."""
    return used / sources if sources else 1.0


def aggregate_utility(
    program: AggregateProgram,
    run: Run,
    baseline: Run,
    *,
    result_is_of_delivered_tuples: bool = True,
    results: Sequence[list[Row]] | None = None,
    column_names: Mapping[str, str] | None = None,
) -> AggregateUtility:
    """Tuples used per grouping set and every aggregate's error against the baseline's.

    Both results come from the two runs' final states (the run's from the tuples it
    delivered, the baseline's from every tuple): nothing is evaluated again. ``results``
    (per grouping set, with the query's column names) replaces the run's, e.g. by its
    estimates; ``column_names`` names their errors (an output's estimate column).
    """
    query = program.query
    group_names = [o.name for o in query.outputs if o.kind == "group"]
    value_names = [o.name for o in query.outputs if o.kind == "aggregate"]
    errors: dict[str, list[float]] = {name: [] for name in value_names}
    used = run.tuples_used()
    per_set = []
    exact_sets = flow_rows(program.without_release(), baseline.state)  # never a noisy draw
    private_sets = flow_rows(program, run.state) if results is None else list(results)
    for name, exact_rows, private_rows in zip(
        program.flow_names, exact_sets, private_sets, strict=True
    ):
        exact = _keyed(exact_rows, group_names)
        private = _keyed(private_rows, group_names)
        missing = 0
        for key, row in exact.items():
            other = private.get(key)
            if other is None:
                missing += 1
                continue
            for column in value_names:
                truth, value = row[column], other[column]
                if truth is None or value is None:
                    if (truth is None) != (value is None):
                        errors[column].append(1.0)
                    continue
                if not _numeric(truth) or not _numeric(value):
                    errors[column].append(0.0 if truth == value else 1.0)
                    continue
                scale = abs(float(truth)) or 1.0
                errors[column].append(abs(float(value) - float(truth)) / scale)
        per_set.append(
            GroupingSetUtility(
                grouping_set=name,
                tuples_used=used[name],
                tuples_used_fraction=_fraction(used[name], program.num_sources),
                groups=len(exact),
                groups_missing=missing,
            )
        )
    named = column_names or {name: query.output_label(name) for name in value_names}
    return AggregateUtility(
        sources=program.num_sources,
        tuples_used={p.grouping_set: p.tuples_used for p in per_set},
        grouping_sets=tuple(per_set),
        groups=sum(p.groups for p in per_set),
        groups_missing=sum(p.groups_missing for p in per_set),
        mean_relative_error={
            named.get(c, c): (float(np.mean(v)) if v else 0.0) for c, v in errors.items()
        },
        max_relative_error={
            named.get(c, c): (float(np.max(v)) if v else 0.0) for c, v in errors.items()
        },
        result_is_of_delivered_tuples=result_is_of_delivered_tuples,
    )


def kmeans_utility(
    program: KMeansProgram,
    run: Run,
    baseline: Run,
    *,
    test_points: npt.NDArray[np.float64] | None,
    test_labels: npt.NDArray[np.int64] | None,
) -> KMeansUtility:
    """Tuples used per iteration, and both runs' scores on the labelled test points.

    The Rand index, adjusted Rand index and normalized mutual information of each run's
    clusters of ``test_points`` against ``test_labels``; without them the scores are None.
    """
    used = run.tuples_used()
    per_iteration = tuple(used[program.flow_name(i + 1)] for i in range(program.num_iterations))
    private: tuple[float, float, float] | None = None
    nonprivate: tuple[float, float, float] | None = None
    if test_points is not None and test_labels is not None:
        private = label_scores(test_labels, program.assign(run.state, test_points))
        nonprivate = label_scores(test_labels, program.assign(baseline.state, test_points))
    return KMeansUtility(
        sources=program.num_sources,
        test_points=None if test_points is None else len(test_points),
        rand_index=None if private is None else private[0],
        rand_index_nonprivate=None if nonprivate is None else nonprivate[0],
        tuples_used_per_iteration=per_iteration,
        tuples_used_fraction=float(np.mean(per_iteration)) / program.num_sources,
        adjusted_rand_index=None if private is None else private[1],
        adjusted_rand_index_nonprivate=None if nonprivate is None else nonprivate[1],
        normalized_mutual_info=None if private is None else private[2],
        normalized_mutual_info_nonprivate=None if nonprivate is None else nonprivate[2],
    )


def label_scores(
    labels: npt.NDArray[np.int64], clusters: npt.NDArray[np.int64]
) -> tuple[float, float, float]:
    """The Rand index, adjusted Rand index and normalized mutual information of ``clusters``."""
    return (
        rand_index(labels, clusters),
        adjusted_rand_index(labels, clusters),
        normalized_mutual_info(labels, clusters),
    )
