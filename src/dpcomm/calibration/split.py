"""One (ε, δ) split between the traffic and a noisy release, for the least expected error.

A query whose result is released with noise spends its budget twice: the traffic's
countermeasure (ε1, δ1) and the release (ε2, δ2) read the same rows, and an observer of both
learns their composition (the paper's Related Work: at most (ε1 + ε2, δ1 + δ2)).
`split_budget` chooses the split for `dpcomm.calibrate`:

* **Traffic.** For a share f of ε on the grid `TRAFFIC_SHARES`, the planner
  (`dpcomm.calibration.plan_countermeasures`, under the user's limits) gives the
  countermeasure of least network load with ε1 ≤ f ε at δ1, and its accounted guarantee.
  Laplace releases take δ1 = δ (δ2 = 0); Gaussian ones δ1 = δ2 = δ/2. A DP key selection's
  δ_sel (`ReleaseShape.selection`) is set aside first: δ1 + δ2 = δ − δ_sel. At δ = 0 (a
  pure plan: Laplace, no key selection) δ1 = δ2 = 0.
* **Release.** ε2 is the largest (bisection, to 0.1% of ε) whose composition with that
  guarantee, `dpcomm.release.compose.compose_release` (the smaller of the PLD composition
  and the sum, the very function a run reports and a budget is charged with), is at most ε at
  δ1 + δ2 ≤ δ. It starts from ε − ε1, which the sum always allows: the split's guarantee is
  valid whatever the search does, because it is the number the run will report.
* **Error.** `expected_relative_error`: the root mean square, over every released COUNT
  and SUM value, of its error relative to its typical value, noise and sampling together.

The search, and why it may stop early: feasibility is monotone in f (a countermeasure meeting
f ε meets every larger share, and the least load can only fall as the target grows), so the
least feasible share is found by bisection over the grid. From there the grid is scanned
upwards, and the scan stops at the first share f whose countermeasure samples nothing (σ = 0:
every tuple arrives, no sampling error). A larger share's countermeasure fails the planner's
check at f ε (else it, no dearer, would have been chosen at f): by that check its ε1 exceeds
f ε, so the paper's sum leaves its release less than ε − f ε, which f's release has at least;
its noise is no smaller, and its sampling error is not below 0. The argument holds for the sum
and the planner's check; the accounted ε1 and the PLD composition (which gives every release at
least what the sum gives) follow the same order without a proof that they always do, so the
stop is a well-founded heuristic there. The split returned is valid either way: its guarantee is the
number the run will report. `BudgetSplit.points` lists every share evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from dpcomm.calibration.planner import PlannerResult
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.costs import delivery_probability
from dpcomm.plan.countermeasures import shares_blanket
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.release.compose import ReleaseComposition, compose_release
from dpcomm.release.mechanisms import (
    AggregateNoise,
    Gaussian,
    Laplace,
    ReleasedFunction,
    ReleaseMechanism,
    Sensitivity,
    aggregate_sensitivity,
)
from dpcomm.release.noise import calibrate_release_parts
from dpcomm.release.quantile import QuantileNoise, expected_squared_error, quantile_distance
from dpcomm.validation import check_column_bounds, check_delta, check_number

ReleaseName = Literal["laplace", "gaussian"]

#: The traffic's shares f of ε searched: 5%, 10%, ..., 95%.
TRAFFIC_SHARES: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))

#: The bisection of ε2 stops when its bracket is narrower than this fraction of ε.
RELEASE_TOLERANCE = 1e-3

#: The bracket of ε2 is doubled at most this many times (the sum bounds it long before).
MAX_DOUBLINGS = 30


@dataclass(frozen=True, kw_only=True)
class ReleaseShape:
    """What a release publishes, as the error model sees it: public quantities only.

    The split must not depend on the data beyond what the plan already reveals (the table's
    size S): a split chosen from the values would itself leak. So each cell of a grouping set
    with K keys is taken to hold S/K rows, and each SUM row its bounds' typical magnitude.

    Attributes:
        num_rows: S, the table's rows (one source each).
        aggregates: every released COUNT and SUM: its output, function and sensitivity (what
            `dpcomm.release.mechanisms.calibrate_noise` takes).
        magnitudes: per aggregate, the typical value of one row: 1 for a COUNT, the mean of
            |lo| and |hi| for a SUM clamped to [lo, hi].
        grouping_sets: per grouping set, its released keys (the product of its columns'
            domains; 1 for ``()``; T for a set whose keys a threshold selects: their number is
            not public) and its T (1 for the empty set's single compute node).
        selection: with DP key selection, the COUNT whose noisy values select keys and
            δ_sel (`dpcomm.release.noise.KeySelection`); None without.
        independent_aggregates: the same aggregates with the sensitivities of traffic that
            delivers each tuple independently (every countermeasure but scramblers with
            sampling: `dpcomm.release.mechanisms.JointView` ``own-row``); None: those of
            ``aggregates``.
        uses: what each published value reads (the query's ``value_uses``), which sets the
            aggregates' shares of ε2 (`dpcomm.release.mechanisms.release_shares`).
        quantiles: each released quantile (MEDIAN, QUANTILE_CONT): its output, α and public
            candidates over its bounds (`dpcomm.release.quantile.candidate_grid`).
        quantile_distances: the quantiles' d (`dpcomm.release.quantile.quantile_distance`)
            for ``aggregates``' views and for traffic that delivers each tuple independently.
    """

    num_rows: int
    aggregates: tuple[tuple[str, ReleasedFunction, Sensitivity], ...]
    magnitudes: tuple[float, ...]
    grouping_sets: tuple[tuple[int, int], ...]
    selection: tuple[str, float] | None = None
    independent_aggregates: tuple[tuple[str, ReleasedFunction, Sensitivity], ...] | None = None
    uses: tuple[tuple[tuple[str, float], ...], ...] = ()
    quantiles: tuple[tuple[str, float, tuple[float, ...]], ...] = ()
    quantile_distances: tuple[int, int] = (0, 0)

    def noises(
        self, mechanism: ReleaseMechanism, privacy: PlanGuarantee
    ) -> tuple[AggregateNoise | QuantileNoise, ...]:
        """The aggregates' noise, then the quantiles', for ``mechanism`` beside ``privacy``.

        As a run calibrates them (`dpcomm.release.noise.calibrate_release_parts`), next to
        the traffic ``privacy`` accounts.

        The sensitivities are those of its countermeasures: ``aggregates`` (and the first of
        ``quantile_distances``) where some cluster runs scramblers with sampling, else
        ``independent_aggregates`` (and the second).
        """
        blanket = any(shares_blanket(c.countermeasure) for c in privacy.clusters)
        chosen, distance = self.aggregates, self.quantile_distances[0]
        if not blanket:
            distance = self.quantile_distances[1]
            if self.independent_aggregates is not None:
                chosen = self.independent_aggregates
        noises, quantiles = calibrate_release_parts(
            mechanism, chosen, self.quantiles, distance, shared_blanket=blanket, uses=self.uses
        )
        return (*noises, *quantiles)

    def __post_init__(self) -> None:
        if self.num_rows < 1:
            raise InvalidParameterError("num_rows", "at least 1 row", self.num_rows)
        if not (self.aggregates or self.quantiles) or len(self.magnitudes) != len(self.aggregates):
            raise InvalidParameterError(
                "magnitudes",
                "one per released aggregate (at least one aggregate or quantile)",
                self.magnitudes,
            )
        if self.quantiles and min(self.quantile_distances) < 1:
            raise InvalidParameterError(
                "quantile_distances", "two distances >= 1", self.quantile_distances
            )
        if not self.grouping_sets or any(k < 1 or t < 1 for k, t in self.grouping_sets):
            raise InvalidParameterError(
                "grouping_sets", "(keys >= 1, T >= 1) per grouping set", self.grouping_sets
            )


def expected_relative_error(
    shape: ReleaseShape,
    noises: Sequence[AggregateNoise | QuantileNoise],
    *,
    sampling_rate: float,
) -> float:
    """The root mean square relative error of every released value (model beyond the paper).

    A released COUNT or SUM of a cell holding N = S/K rows is the sum over the tuples that
    arrived, plus noise. Under R_σ each tuple arrives independently with probability
    P = 1 − σ + σ/T (`dpcomm.plan.costs.delivery_probability`), so relative to the
    cell's value N m (m the row's typical magnitude) its mean squared error is
    (1 − P)² (the lost tuples' bias) + P (1 − P)/N (their variance, the Horvitz–Thompson
    variance of `dpcomm.pipeline.estimate` before division by P) + (s / (N m))² (the
    noise's standard deviation s, `AggregateNoise.standard_deviation`). A released
    quantile's is `_quantile_squared_error`. The mean is over every released value (each
    key of each grouping set, each aggregate and quantile); the root is returned. An AVG is
    the ratio of two such values.
    """
    total = 0.0
    cells = 0
    counted = [n for n in noises if isinstance(n, AggregateNoise)]
    quantiles = [n for n in noises if isinstance(n, QuantileNoise)]
    for keys, num_targets in shape.grouping_sets:
        rows = shape.num_rows / keys
        arrives = delivery_probability(sampling_rate=sampling_rate, num_targets=num_targets)
        for noise, magnitude in zip(counted, shape.magnitudes, strict=True):
            deviation = noise.standard_deviation
            relative_noise = 0.0 if deviation == 0.0 else deviation / (rows * magnitude)
            if math.isnan(relative_noise):  # a SUM of [0, 0] and no noise
                relative_noise = 0.0
            squared = (1.0 - arrives) ** 2 + arrives * (1.0 - arrives) / rows
            total += keys * (squared + relative_noise**2)
        for quantile in quantiles:
            total += keys * _quantile_squared_error(quantile, rows, arrives)
        cells += keys * (len(counted) + len(quantiles))
    return math.sqrt(total / cells)


def _quantile_squared_error(noise: QuantileNoise, rows: float, arrives: float) -> float:
    """A released quantile's mean squared error relative to its bounds' half-width (hi − lo)/2.

    The mechanism's over the P N delivered values of a uniform column
    (`dpcomm.release.quantile.expected_squared_error`: noise and the grid's rounding), plus
    the delivered values' sampling error against the quantile of all N:
    α (1 − α)(1 − P)/(P N) · (hi − lo)² (a sample quantile's variance, with the finite
    population's correction, for a uniform density 1/(hi − lo)). Relative to the half-width,
    as a K-means centroid's coordinate.
    """
    low, high = noise.candidates[0], noise.candidates[-1]
    width = high - low
    delivered = arrives * rows
    error = expected_squared_error(noise, delivered)
    if arrives < 1.0:
        error += noise.alpha * (1.0 - noise.alpha) * (1.0 - arrives) / delivered * width**2
    return error / (0.5 * width) ** 2


def release_mechanism(name: ReleaseName, *, epsilon: float, delta: float) -> ReleaseMechanism:
    """``Laplace(epsilon)`` or ``Gaussian(epsilon, delta)``."""
    return Laplace(epsilon) if name == "laplace" else Gaussian(epsilon, delta)


@dataclass(frozen=True, kw_only=True)
class SplitPoint:
    """One share of the grid, evaluated.

    Attributes:
        traffic_share: f: the traffic's countermeasure meets ε1 ≤ f ε.
        traffic: the planner's answer (None: nothing meets f ε within the limits).
        release: the release with its ε2 (and δ2) (None when infeasible).
        composition: the guarantee of traffic and release together (None when infeasible).
        expected_relative_error: `expected_relative_error` (∞ when infeasible).
        infeasible: why no countermeasure meets the share (None when one does).
    """

    traffic_share: float
    traffic: PlannerResult | None
    release: ReleaseMechanism | None
    composition: ReleaseComposition | None
    expected_relative_error: float
    infeasible: str | None = None


@dataclass(frozen=True, kw_only=True)
class BudgetSplit:
    """The split of (ε, δ) between traffic and release that `split_budget` chose.

    Attributes:
        epsilon: the target ε of traffic and release together.
        delta: the target δ.
        chosen: the share chosen (least expected error).
        points: every share evaluated, by share.
        shape: what the release publishes (the error model's input).
    """

    epsilon: float
    delta: float
    chosen: SplitPoint
    points: tuple[SplitPoint, ...]
    shape: ReleaseShape

    def _chosen(self) -> tuple[PlannerResult, ReleaseMechanism, ReleaseComposition]:
        chosen = self.chosen
        if chosen.traffic is None or chosen.release is None or chosen.composition is None:
            raise DpcommError("the chosen split has no traffic plan")  # never: chosen is feasible
        return chosen.traffic, chosen.release, chosen.composition

    @property
    def traffic(self) -> PlannerResult:
        """The traffic's plan (the planner's answer at the chosen share)."""
        return self._chosen()[0]

    @property
    def release(self) -> ReleaseMechanism:
        """The release's mechanism with its ε2 (and δ2)."""
        return self._chosen()[1]

    @property
    def composition(self) -> ReleaseComposition:
        """Traffic and release together: the guarantee the run will report."""
        return self._chosen()[2]

    @property
    def expected_relative_error(self) -> float:
        """The chosen split's `expected_relative_error`."""
        return self.chosen.expected_relative_error

    def describe(self) -> str:
        """One line: (ε1, δ1) + (ε2, δ2) → the composed guarantee, and the expected error."""
        traffic, release, both = self._chosen()
        return (
            f"traffic ε1 = {traffic.epsilon:.4g} at δ1 = {traffic.delta:g}, "
            f"{release.name} release ε2 = {release.epsilon:.4g} at δ2 = {both.release_delta:g}: "
            f"together ε = {both.epsilon:.4g} at δ = {both.delta:g}, expected relative error "
            f"{self.expected_relative_error:.1%}"
        )


def _largest_release(
    name: ReleaseName,
    shape: ReleaseShape,
    privacy: PlanGuarantee,
    *,
    epsilon: float,
    delta: float,
    release_delta: float,
) -> tuple[ReleaseMechanism, tuple[AggregateNoise | QuantileNoise, ...], ReleaseComposition]:
    """The largest ε2 whose release composed with ``privacy`` stays within (ε, δ)."""

    def evaluate(
        release_epsilon: float,
    ) -> tuple[ReleaseMechanism, tuple[AggregateNoise | QuantileNoise, ...], ReleaseComposition]:
        mechanism = release_mechanism(name, epsilon=release_epsilon, delta=release_delta)
        noises = shape.noises(mechanism, privacy)
        if shape.selection is not None:  # the COUNT that selects keys also spends δ_sel
            output, selection_delta = shape.selection
            noises = tuple(
                replace(n, selection_delta=selection_delta)
                if isinstance(n, AggregateNoise) and n.output == output
                else n
                for n in noises
            )
        return mechanism, noises, compose_release(privacy, noises)

    def fits(composition: ReleaseComposition) -> bool:
        return composition.epsilon <= epsilon and composition.delta <= delta

    low = epsilon - privacy.guarantee.epsilon  # the sum allows it (up to rounding)
    if not low > 0.0:
        raise DpcommError(f"the traffic's ε = {privacy.guarantee.epsilon:g} leaves no release")
    best = evaluate(low)
    if best[2].delta > delta:  # never: δ1, δ2 and δ_sel were split from δ
        raise DpcommError(f"the release's δ {best[2].delta:g} exceeds δ = {delta:g}")
    while not fits(best[2]):  # rounding of the aggregates' shares: a hair less
        low *= 1.0 - 1e-9
        best = evaluate(low)
    high = 2.0 * low
    for _ in range(MAX_DOUBLINGS):  # the PLD composition may leave more than the sum
        tried = evaluate(high)
        if not fits(tried[2]):
            break
        low, best, high = high, tried, 2.0 * high
    else:
        return best
    while high - low > RELEASE_TOLERANCE * epsilon:
        middle = 0.5 * (low + high)
        tried = evaluate(middle)
        if fits(tried[2]):
            low, best = middle, tried
        else:
            high = middle
    return best


def _split_deltas(shape: ReleaseShape, release: ReleaseName, delta: float) -> tuple[float, float]:
    """(δ2, δ1): the release's and the traffic's δ, out of δ less the key selection's δ_sel."""
    selection_delta = 0.0 if shape.selection is None else shape.selection[1]
    if selection_delta > 0.0 and not selection_delta < delta:
        raise InvalidParameterError(
            "key_selection_delta",
            f"below δ = {delta:g} (traffic and release need some)",
            selection_delta,
        )
    available = delta - selection_delta
    release_delta = 0.0 if release == "laplace" else 0.5 * available * (1.0 - 1e-9)
    traffic_delta = available - release_delta
    if selection_delta > 0.0:  # δ1 + δ2 + δ_sel, added in floating point, stays within δ
        traffic_delta *= 1.0 - 1e-9
    return release_delta, traffic_delta


def _split_point(
    share: float,
    *,
    shape: ReleaseShape,
    release: ReleaseName,
    epsilon: float,
    delta: float,
    release_delta: float,
    traffic_delta: float,
    plan_traffic: Callable[[float, float], PlannerResult],
) -> SplitPoint:
    """The traffic planned at ε1 = ``share`` · ε and the largest release the rest allows."""
    try:
        traffic = plan_traffic(share * epsilon, traffic_delta)
    except DpcommError as error:
        return SplitPoint(
            traffic_share=share,
            traffic=None,
            release=None,
            composition=None,
            expected_relative_error=math.inf,
            infeasible=str(error),
        )
    if traffic.privacy is None:
        raise DpcommError("the planner answered without its privacy")  # never
    mechanism, noises, composition = _largest_release(
        release,
        shape,
        traffic.privacy,
        epsilon=epsilon,
        delta=delta,
        release_delta=release_delta,
    )
    return SplitPoint(
        traffic_share=share,
        traffic=traffic,
        release=mechanism,
        composition=composition,
        expected_relative_error=expected_relative_error(
            shape, noises, sampling_rate=traffic.configuration.sampling_rate
        ),
    )


def _least_feasible(
    point: Callable[[int], SplitPoint], ordered: Sequence[float], epsilon: float
) -> int:
    """The index of the least feasible share (feasibility is monotone in the share)."""
    low, high = 0, len(ordered) - 1
    if point(low).traffic is not None:
        high = low
    else:
        last = point(high)
        if last.traffic is None:
            raise DpcommError(
                f"no split of ε = {epsilon:g} between traffic and release meets the limits: "
                f"even ε1 ≤ {ordered[high] * epsilon:.4g} for the traffic fails "
                f"({last.infeasible})"
            )
        low += 1
    while low < high:
        middle = (low + high) // 2
        if point(middle).traffic is None:
            low = middle + 1
        else:
            high = middle
    return low


def split_budget(
    *,
    shape: ReleaseShape,
    release: ReleaseName,
    epsilon: float,
    delta: float,
    plan_traffic: Callable[[float, float], PlannerResult],
    shares: Sequence[float] = TRAFFIC_SHARES,
) -> BudgetSplit:
    """The split of (ε, δ) between traffic and release of least expected error (module doc).

    ``plan_traffic(ε1, δ1)`` is the planner under the user's limits (it raises
    `dpcomm.errors.DpcommError` when nothing meets ε1 within them). Raises
    `dpcomm.errors.DpcommError` when no share of the grid is feasible, with the
    planner's advice at the largest share.
    """
    release_delta, traffic_delta = _split_deltas(shape, release, delta)
    ordered = sorted(shares)
    evaluated: dict[int, SplitPoint] = {}

    def point(index: int) -> SplitPoint:
        if index not in evaluated:
            evaluated[index] = _split_point(
                ordered[index],
                shape=shape,
                release=release,
                epsilon=epsilon,
                delta=delta,
                release_delta=release_delta,
                traffic_delta=traffic_delta,
                plan_traffic=plan_traffic,
            )
        return evaluated[index]

    best: SplitPoint | None = None
    for index in range(_least_feasible(point, ordered, epsilon), len(ordered)):
        candidate = point(index)
        if best is None or candidate.expected_relative_error < best.expected_relative_error:
            best = candidate
        traffic = candidate.traffic
        if traffic is not None and traffic.configuration.sampling_rate == 0.0:
            break  # every larger share leaves the release less (module doc)
    if best is None or best.traffic is None:
        raise DpcommError("no feasible split")  # never: the largest share is feasible
    points = tuple(evaluated[i] for i in sorted(evaluated))
    return BudgetSplit(epsilon=epsilon, delta=delta, chosen=best, points=points, shape=shape)


# ------------------------------------------------- a calibration's release (``release=``)

#: What ``release=`` of `dpcomm.calibrate` takes.
RELEASE_KINDS = "'laplace' or 'gaussian' (or the class dpcomm.Laplace or dpcomm.Gaussian)"


def release_kind(release: object) -> ReleaseName | None:
    """``release`` of `dpcomm.calibrate` as ``"laplace"``, ``"gaussian"`` or None.

    A mechanism with its ε (``dpcomm.Laplace(epsilon=1)``) is refused: its ε is what the
    calibration chooses.
    """
    if release is None:
        return None
    if release is Laplace or (isinstance(release, str) and release.lower() == "laplace"):
        return "laplace"
    if release is Gaussian or (isinstance(release, str) and release.lower() == "gaussian"):
        return "gaussian"
    if isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError("release", f"{RELEASE_KINDS}: calibrate chooses its ε", release)
    raise InvalidParameterError("release", RELEASE_KINDS, release)


def release_placeholder(kind: ReleaseName, delta: float) -> Any:
    """A release of the right kind to bind the query with (its ε is replaced by the split's)."""
    checked = check_delta("delta", delta)
    return release_mechanism(kind, epsilon=1.0, delta=0.5 * checked)


def release_shape(program: Any) -> ReleaseShape:
    """What the release of ``program`` publishes, as the split's error model sees it.

    ``program`` is an `dpcomm.queries.aggregate.AggregateProgram` bound with a release; the
    shape holds public quantities only ([`ReleaseShape`][dpcomm.calibration.split.ReleaseShape]).
    """
    import math

    release = program.release
    query = program.query
    clamps = {name: (low, high) for name, _, low, high in query.clamps}
    outputs = {o.name: o for o in query.outputs}
    magnitudes = []
    for noise in release.noises:
        column = outputs[noise.output].column
        if noise.function == "sum" and column in clamps:
            low, high = clamps[column]
            magnitudes.append(0.5 * (abs(low) + abs(high)))
        else:
            magnitudes.append(1.0)
    domains = dict(release.domains)
    grouping_sets = tuple(
        (
            math.prod(len(domains[c]) for c in columns)
            if all(c in domains for c in columns)
            else program.targets_of(index),  # keys selected by a threshold: not public
            program.targets_of(index),
        )
        for index, columns in enumerate(query.grouping_sets)
    )
    selection = release.selection
    independent = []
    for noise in release.noises:
        column = outputs[noise.output].column
        low, high = clamps.get(column, (0.0, 0.0)) if noise.function == "sum" else (0.0, 0.0)
        centre = dict(query.centres).get(column, 0.0)  # a centred sum's values: [lo − c, hi − c]
        low, high = low - centre, high - centre
        sensitivity = aggregate_sensitivity(
            noise.function,
            query.grouping_sets,
            bound=max(abs(low), abs(high)),
            width=high - low,
            views=["own-row"] * len(query.grouping_sets),
        )
        independent.append((noise.output, noise.function, sensitivity))
    return ReleaseShape(
        num_rows=program.num_sources,
        aggregates=tuple((n.output, n.function, n.sensitivity) for n in release.noises),
        independent_aggregates=tuple(independent),
        magnitudes=tuple(magnitudes),
        grouping_sets=grouping_sets,
        selection=None if selection is None else (selection.count_output, selection.delta),
        uses=query.value_uses,
        quantiles=tuple((q.output, q.alpha, q.candidates) for q in release.quantiles),
        quantile_distances=(
            quantile_distance(query.grouping_sets, release.views),
            quantile_distance(query.grouping_sets, ["own-row"] * len(query.grouping_sets)),
        ),
    )


def kmeans_release_shape(
    *, num_rows: int, num_centroids: int, num_iterations: int, bounds: object
) -> ReleaseShape:
    """What a released K-means publishes (`dpcomm.release.kmeans`), as the error model sees it.

    Every iteration's D centred sums and count per cluster (K cells each, one per compute
    node, S/K points each); a sum's typical magnitude is its bounds' half-width (hi − lo)/2,
    so its relative error is the centroid coordinate's error over that half-width.
    """
    from dpcomm.release.kmeans import kmeans_aggregates, kmeans_uses

    if isinstance(bounds, Mapping) or not isinstance(bounds, Sequence) or not bounds:
        raise InvalidParameterError(
            "bounds", "one public (lo, hi) per coordinate of the points (K-means)", bounds
        )
    pairs = check_column_bounds(bounds, len(bounds))
    names = [f"x{j}" for j in range(len(pairs))]
    shared = kmeans_aggregates(pairs, names, num_iterations, "one-other")
    magnitudes = [*(0.5 * (high - low) for low, high in pairs), 1.0] * num_iterations
    return ReleaseShape(
        num_rows=num_rows,
        aggregates=tuple(shared),
        independent_aggregates=tuple(kmeans_aggregates(pairs, names, num_iterations, "own-row")),
        magnitudes=tuple(magnitudes),
        grouping_sets=((num_centroids, num_centroids),),
        uses=kmeans_uses(pairs, names, num_iterations),
    )


def split_release(
    kind: ReleaseName,
    program: Any,
    epsilon: float,
    delta: float,
    plan_traffic: Callable[[float, float], PlannerResult],
) -> BudgetSplit:
    """`dpcomm.calibration.split.split_budget` for the release of ``program``."""
    shape = release_shape(program)
    return split_budget(
        shape=shape,
        release=kind,
        epsilon=check_number("epsilon", epsilon, above=0.0),
        delta=check_delta("delta", delta),
        plan_traffic=plan_traffic,
    )


__all__ = [
    "TRAFFIC_SHARES",
    "BudgetSplit",
    "ReleaseMechanism",
    "ReleaseName",
    "ReleaseShape",
    "SplitPoint",
    "expected_relative_error",
    "kmeans_release_shape",
    "release_mechanism",
    "split_budget",
]
