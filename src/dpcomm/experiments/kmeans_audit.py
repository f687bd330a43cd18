"""Statistical audit of K-means released: one iteration's traffic and noisy sums and counts.

An observer of ``dpcomm.kmeans(..., release=..., bounds=...)`` sees every iteration's traffic
(the points routed to the compute node of their nearest centroid, through the countermeasure)
and the noisy per-cluster centred sums S̃_kj and counts Ñ_k each compute node releases
(`dpcomm.release.kmeans.KMeansRelease`); the report claims one guarantee for both, the
traffic composed with every released vector by PLD. This audit runs the first iteration many
times on two neighbouring tables of points, D and D′, that differ in one source's point, and
puts an empirical lower bound on ε next to that claim, with the machinery of the SQL release
audit (`dpcomm.experiments.release_audit`: the view reduced to the traffic's c_t − c_t′ and
each observed cluster's Σ_i x_k,i / b_i, raw and given the counts; events selected on half the
runs and estimated on the other half, Clopper-Pearson, Bonferroni over the events).

**The tables** (`kmeans_neighbours`): points (x, y), both coordinates clamped to [lo, hi]
(width W = hi − lo), K clusters whose public initial centroids (c, lo + (k + ½) W / K) differ
in y alone, so that y picks the cluster and x is free within it; cluster a = 0 is on compute
node 0 and b = K − 1 on node K − 1. ``others-on-destination``: source 0 holds
(lo − 50·W, lo) in D (cluster a, x clamped to lo: centred −W/2) and (hi, hi) in D′ (cluster b:
+W/2), the n − 1 others (lo, hi) (cluster b, −W/2): a tuple of b that the scramblers' redraws
move in or out of delivery in place of the row's moves b's centred sum of x by W, next to the
row's W/2 in a's. ``others-on-source`` mirrors it in cluster a. Either way x's centred sums
move by 1.5 W in L1: `dpcomm.release.mechanisms.centred_sum_sensitivity` under the
``one-other`` view, which the release is calibrated to (COUNT(*)'s is 2 in either view).

**One run** is iteration 1 of `dpcomm.kmeans` with the same program: the traffic by the role
steps and randomness streams every engine runs (`dpcomm.experiments.audit.scrambler_runs`,
flow ``iteration 1``: run r is scrambler r and its n sources), the exact clamped centred sums
and counts over the delivered points, and the release layer's noise (OpenDP, never seeded:
the lower bound varies from audit to audit).

Seeded faults (`KMEANS_FAULT_KINDS`; never an option of a run, each claims the declared
guarantee): ``own-row``, every released vector calibrated to the row's own change alone
(the sensitivity without the joint view: W for a centred sum, against 1.5 W; a count's is 2
either way), at its own share of ε2; ``unclamped``, the points summed without their clamp to
the bounds. ``own-row`` widens the sums' loss only, which the whole release's claim dilutes:
it shows against the traffic and SUM(x) observed alone (``aggregate="SUM(x"``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from dpcomm.errors import InvalidParameterError
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.experiments.audit import (
    CHUNK_SOURCES,
    EventEstimate,
    estimate_events,
    scrambler_runs,
)
from dpcomm.experiments.release_audit import (
    OUT_OF_BOUND_FACTOR,
    BoolArray,
    _Reduction,
    _rescaled,
    _selection_bound,
    _View,
    exact_results,
)
from dpcomm.plan.countermeasures import Scramblers
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.release.mechanisms import Gaussian, Laplace, ReleaseMechanism, centred_sum_sensitivity
from dpcomm.validation import check_delta, check_int, check_probability, make_rng

if TYPE_CHECKING:
    from dpcomm.plan.privacy import PlanGuarantee
    from dpcomm.queries.kmeans import KMeansProgram
    from dpcomm.release.compose import ReleaseComposition
    from dpcomm.release.kmeans import KMeansRelease

#: The seeded faults of the K-means release (``dpcomm audit kmeans-release --fault``).
KMEANS_FAULT_KINDS: tuple[str, ...] = ("own-row", "unclamped")

#: Names of the neighbouring pairs, in the order tried (module docstring).
KMEANS_PAIR_NAMES: tuple[str, ...] = ("others-on-destination", "others-on-source")

#: The audit's configuration by default: one scrambler of n = 2,000 points without dummies
#: over K = T = 2 clusters at σ = 0.04 (ε1 = 0.30 at δ = 10⁻²), both coordinates clamped to
#: [0, 20], a Laplace release of ε2 = 8 for one iteration, 20,000 runs per table: there, the
#: ``own-row`` fault shows against the traffic and SUM(x) observed alone (docs/audit.md).
DEFAULT_KMEANS_COUNTERMEASURE = Scramblers(sampling_rate=0.04, batch_size=2000, num_dummies=0)
DEFAULT_KMEANS_RELEASE = Laplace(8.0)
DEFAULT_KMEANS_BOUNDS = (0.0, 20.0)
DEFAULT_KMEANS_CLUSTERS = 2
DEFAULT_KMEANS_DELTA = 1e-2
DEFAULT_KMEANS_RUNS = 20_000


@dataclass(frozen=True)
class KMeansNeighbours:
    """The two neighbouring tables of points of the audit.

    Attributes:
        pair: one of `KMEANS_PAIR_NAMES`.
        bounds: [lo, hi], the coordinate's public bounds.
        num_clusters: K (= T, one cluster per compute node).
        num_sources: n, the points (one scrambler's batch).
    """

    pair: str
    bounds: tuple[float, float]
    num_clusters: int
    num_sources: int

    @property
    def initial(self) -> FloatArray:
        """The K public initial centroids (c, lo + (k + ½) W / K): the cluster is y's alone."""
        low, high = self.bounds
        width = high - low
        heights = low + (np.arange(self.num_clusters) + 0.5) * width / self.num_clusters
        centre = np.full(self.num_clusters, (low + high) / 2.0)
        return np.column_stack([centre, heights]).astype(np.float64)

    @property
    def cells(self) -> tuple[int, int]:
        """The clusters the audit observes: a = 0 and b = K − 1."""
        return (0, self.num_clusters - 1)

    def points(self) -> tuple[FloatArray, FloatArray]:
        """D and D′: (n, 2) points (x, y), source 0's first (module docstring)."""
        low, high = self.bounds
        beyond = OUT_OF_BOUND_FACTOR * (high - low)
        if self.pair == "others-on-destination":
            rows, other = ((low - beyond, low), (high, high)), (low, high)
        else:
            rows, other = ((high + beyond, low), (low, high)), (low, low)
        return tuple(  # type: ignore[return-value]
            np.array([own] + [other] * (self.num_sources - 1), dtype=np.float64) for own in rows
        )

    def describe(self) -> str:
        """One line for reports."""
        low, high = self.bounds
        d, d_prime = self.points()
        text = (
            f"{self.pair}: source 0 holds (x, y) = ({d[0, 0]:g}, {d[0, 1]:g}) in D (cluster 0, "
            f"clamped to [{low:g}, {high:g}]²) and ({d_prime[0, 0]:g}, {d_prime[0, 1]:g}) in D′ "
            f"(cluster {self.num_clusters - 1})"
        )
        if self.num_sources > 1:
            text += f"; the {self.num_sources - 1} others hold ({d[1, 0]:g}, {d[1, 1]:g})"
        return text


def kmeans_neighbours(
    *, pair: str, bounds: tuple[float, float], num_clusters: int, num_sources: int
) -> KMeansNeighbours:
    """The audit's tables (module docstring), their parameters checked."""
    if pair not in KMEANS_PAIR_NAMES:
        raise InvalidParameterError("pair", f"one of {', '.join(KMEANS_PAIR_NAMES)}", pair)
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidParameterError("bounds", "a pair (lo, hi) with lo < hi", bounds)
    low, high = (float(v) for v in bounds)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise InvalidParameterError("bounds", "a pair (lo, hi) of finite numbers, lo < hi", bounds)
    clusters = check_int("num_clusters", num_clusters, minimum=2)
    sources = check_int("num_sources", num_sources, minimum=2)
    return KMeansNeighbours(pair, (low, high), clusters, sources)


def audited_kmeans(
    points: FloatArray, neighbours: KMeansNeighbours, release: ReleaseMechanism
) -> KMeansProgram:
    """The program `dpcomm.kmeans` builds for ``points``: one iteration, released, public start."""
    from dpcomm.queries.kmeans import KMeansProgram
    from dpcomm.release.kmeans import bind_kmeans_release

    bound = bind_kmeans_release(
        release, [neighbours.bounds] * 2, dimension=2, num_iterations=1, columns=["x", "y"]
    )
    return KMeansProgram(
        points,
        neighbours.num_clusters,
        1,
        initial=neighbours.initial,
        init_public=True,
        release=bound,
    )


def seeded_kmeans_fault(release: KMeansRelease, kind: str) -> KMeansRelease:
    """``release`` with the seeded fault ``kind`` (``own-row``: its noise; else unchanged).

    ``own-row``: every vector's noise at its own (ε_i, δ_i), its scale calibrated to the
    ``own-row`` sensitivity (W, 2) instead of ``one-other``'s (1.5 W, 3), so that OpenDP's
    privacy map, checked against it, agrees; the release's claim is unchanged.
    ``unclamped`` changes the sums (`contributions`), not the noise.
    """
    from dpcomm.release.kmeans import CLUSTER_SET
    from dpcomm.release.mechanisms import aggregate_sensitivity

    if kind not in KMEANS_FAULT_KINDS:
        raise InvalidParameterError("fault", f"one of {', '.join(KMEANS_FAULT_KINDS)}", kind)
    if kind != "own-row":
        return release
    low, high = release.bounds[0]
    own = [
        centred_sum_sensitivity(CLUSTER_SET, low, high, views=["own-row"])
        if noise.function == "sum"
        else aggregate_sensitivity("count_star", CLUSTER_SET, views=["own-row"])
        for noise in release.noises
    ]
    noises = tuple(_rescaled(n, s) for n, s in zip(release.noises, own, strict=True))
    return replace(release, noises=noises)


def contributions(program: KMeansProgram, *, clamped: bool = True) -> tuple[IntArray, FloatArray]:
    """Each point's cluster, and what it adds to its cluster's (centred sums, count): (S, K, D + 1).

    The point clamped to the bounds (not with ``clamped=False``: the ``unclamped`` fault) less
    the centres c_j = (lo_j + hi_j)/2, and 1, in the cell of its nearest initial centroid.
    """
    from dpcomm.plan.builders import kmeans_flow

    release = program.release
    points = program.source_rows()
    clusters = program.route(program.initial_state(), kmeans_flow(1), points)
    values = release.clamp(points) if clamped else np.asarray(points, dtype=np.float64)
    rows = np.arange(points.shape[0])
    added = np.zeros((points.shape[0], program.num_centroids, program.dimension + 1))
    added[rows, clusters, :-1] = values - release.centres[None, :]
    added[rows, clusters, -1] = 1.0
    return np.asarray(clusters, dtype=np.int64), added


def traffic_runs(
    program: KMeansProgram,
    countermeasure: Scramblers,
    *,
    first: int,
    stop: int,
    randomness: Randomness,
) -> tuple[IntArray, BoolArray]:
    """Runs ``first`` … ``stop − 1`` of iteration 1's flow: counts (runs, K), delivered (runs, n).

    Run r is scrambler r of the flow and its n sources, drawn as the engines draw
    (`scrambler_runs`), in chunks of `CHUNK_SOURCES` sources.
    """
    from dpcomm.plan.builders import kmeans_flow

    clusters, _ = contributions(program)
    sources = clusters.shape[0]
    if countermeasure.batch_size != sources:
        raise InvalidParameterError(
            "countermeasure", f"scramblers of n = S = {sources} sources", countermeasure
        )
    step = max(1, CHUNK_SOURCES // sources)
    counts: list[IntArray] = []
    delivered: list[BoolArray] = []
    for low in range(first, stop, step):
        runs = min(stop, low + step) - low
        steps = scrambler_runs(
            np.tile(clusters, (runs, 1)),
            countermeasure,
            num_targets=program.num_centroids,
            randomness=randomness,
            first_run=low,
            flow=kmeans_flow(1),
        )
        real = np.asarray(steps.messages.is_real, dtype=bool)
        counts.append(steps.counts)
        delivered.append(
            roles.delivered(real, np.ones(real.shape[0], dtype=bool)).reshape(runs, sources)
        )
    return np.concatenate(counts), np.concatenate(delivered)


def noisy_cells(
    release: KMeansRelease, exact: FloatArray, vectors: Sequence[int] | None = None
) -> FloatArray:
    """(runs, K, V) ``exact`` centred sums and counts plus the release's noise (OpenDP's).

    Each vector's cells of every run are drawn at once by the release layer
    (`dpcomm.release.noise._noisy`, OpenDP's privacy map checked first), as the compute nodes
    draw them one cluster at a time; V = D + 1 vectors, or those of ``vectors`` (indices,
    in that order: the others are not drawn).
    """
    from dpcomm.release.noise import _noisy

    noises = release.iteration_noises(1)
    wanted = list(range(len(noises))) if vectors is None else list(vectors)
    noisy = np.empty((*exact.shape[:2], len(wanted)))
    for column, index in enumerate(wanted):
        drawn = _noisy(noises[index], exact[:, :, index].ravel().tolist())
        noisy[:, :, column] = np.asarray(drawn, dtype=float).reshape(exact.shape[:2])
    return noisy


@dataclass(frozen=True)
class KMeansAuditReport:
    """The audit of one iteration of K-means released, traffic and release together.

    Attributes:
        countermeasure: the traffic's.
        release: the release's mechanism (its claimed ε2, δ2).
        neighbours: the neighbouring tables chosen on the selection half.
        runs: runs per table (half select, half estimate).
        confidence: the confidence of the lower bound.
        delta: the composed δ the report gives (δ1 + δ2).
        traffic_epsilon: ε1 of iteration 1's traffic.
        reported_epsilon: the claim against the observer: the run's (traffic and release
            composed by PLD), or the traffic composed with the one observed vector.
        summed_epsilon: ε1 + ε2.
        noise_scales: each observed vector (as the run's report names it) and its noise scale.
        lower_bound: the empirical lower bound on ε (holds with probability >= confidence).
        events_tried: events estimated (the Bonferroni factor).
        best_event: the event that gave the lower bound, or None if none beat 0.
        pairs: every pair tried with its best event's bound on the selection half.
        fault: ``"none"`` or one of `KMEANS_FAULT_KINDS`.
        aggregate: None (every vector observed) or the one vector observed.
        seconds: wall-clock time.
    """

    countermeasure: Scramblers
    release: ReleaseMechanism
    neighbours: KMeansNeighbours
    runs: int
    confidence: float
    delta: float
    traffic_epsilon: float
    reported_epsilon: float
    summed_epsilon: float
    noise_scales: tuple[tuple[str, float], ...]
    lower_bound: float
    events_tried: int
    best_event: EventEstimate | None
    pairs: tuple[tuple[str, float], ...]
    fault: str = "none"
    aggregate: str | None = None
    seconds: float = field(default=0.0, compare=False)

    @property
    def passed(self) -> bool:
        """PASS when the lower bound does not exceed the reported composed ε."""
        return self.lower_bound <= self.reported_epsilon + 1e-9


@dataclass(frozen=True, eq=False)
class _Pair:
    """One candidate pair's programs (D, D′), their releases and contributions."""

    neighbours: KMeansNeighbours
    programs: tuple[KMeansProgram, KMeansProgram]
    added: tuple[FloatArray, FloatArray]
    release: KMeansRelease

    def views(
        self,
        countermeasure: Scramblers,
        first: int,
        stop: int,
        seed: int,
        observed: tuple[int, ...],
    ) -> tuple[_View, _View]:
        """Both tables' views of runs ``first`` … ``stop − 1`` (each table its own round).

        Each observed cluster's feature is Σ_i x_k,i / b_i over the ``observed`` vectors.
        """
        scales = np.array([noise.scale for noise in self.release.iteration_noises(1)])
        cells = list(self.neighbours.cells)
        chosen = list(observed)
        views = []
        for side, (program, added) in enumerate(zip(self.programs, self.added, strict=True)):
            counts, delivered = traffic_runs(
                program,
                countermeasure,
                first=first,
                stop=stop,
                randomness=Randomness(seed, round=side),
            )
            noisy = noisy_cells(self.release, exact_results(delivered, added), chosen)
            scaled = noisy[:, cells, :] / scales[chosen]
            views.append(_View(counts, scaled.sum(axis=2)))
        return views[0], views[1]


def _pairs(
    release: ReleaseMechanism,
    bounds: tuple[float, float],
    num_clusters: int,
    sources: int,
    fault: str,
) -> list[_Pair]:
    """Every candidate pair's programs, with the fault applied."""
    found = []
    for name in KMEANS_PAIR_NAMES:
        neighbours = kmeans_neighbours(
            pair=name, bounds=bounds, num_clusters=num_clusters, num_sources=sources
        )
        programs = tuple(audited_kmeans(p, neighbours, release) for p in neighbours.points())
        bound = programs[0].release
        faulty = bound if fault == "none" else seeded_kmeans_fault(bound, fault)
        added = tuple(contributions(p, clamped=fault != "unclamped")[1] for p in programs)
        found.append(_Pair(neighbours, (programs[0], programs[1]), (added[0], added[1]), faulty))
    return found


def _observed(
    release: KMeansRelease, privacy: PlanGuarantee, aggregate: str | None
) -> tuple[tuple[int, ...], ReleaseComposition]:
    """The released vectors observed, and the claim for that view.

    None: every vector, against the run's claim (the traffic composed with all of them).
    Otherwise the one vector whose description starts with ``aggregate`` (e.g. ``"SUM(x"``),
    against the traffic composed with that vector's noise alone: valid for that view, as
    `dpcomm.experiments.release_audit`'s ``aggregate`` (each vector's noise is independent and
    calibrated to its own joint sensitivity).
    """
    from dpcomm.release.compose import compose_release

    noises = release.iteration_noises(1)
    if aggregate is None:
        return tuple(range(len(noises))), compose_release(privacy, release.noises)
    names = [noise.output.split(": ", 1)[1] for noise in noises]
    matches = [i for i, name in enumerate(names) if name.startswith(str(aggregate))]
    if len(matches) != 1:
        allowed = "None or the start of one of: " + "; ".join(names)
        raise InvalidParameterError("aggregate", allowed, aggregate)
    return (matches[0],), compose_release(privacy, [noises[matches[0]]])


def _checked(
    countermeasure: Scramblers | None,
    release: ReleaseMechanism | None,
    *,
    runs: int,
    confidence: float,
    delta: float,
    fault: str,
) -> tuple[Scramblers, Laplace | Gaussian, int, float, float]:
    """`audit_kmeans_release`'s arguments checked (the defaults for None)."""
    countermeasure = countermeasure or DEFAULT_KMEANS_COUNTERMEASURE
    release = release or DEFAULT_KMEANS_RELEASE
    if not isinstance(countermeasure, Scramblers):
        raise InvalidParameterError("countermeasure", "Scramblers(...)", countermeasure)
    if not isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError("release", "dpcomm.Laplace(...) or Gaussian(...)", release)
    if fault != "none" and fault not in KMEANS_FAULT_KINDS:
        allowed = f"'none' or one of {', '.join(KMEANS_FAULT_KINDS)}"
        raise InvalidParameterError("fault", allowed, fault)
    count = check_int("runs", runs, minimum=100)
    level = check_probability("confidence", confidence)
    if not 0.0 < level < 1.0:
        raise InvalidParameterError("confidence", "a number in (0, 1)", confidence)
    return countermeasure, release, count, level, check_delta("delta", delta)


def _search(
    pairs: list[_Pair],
    countermeasure: Scramblers,
    *,
    runs: int,
    seed: int,
    observed: tuple[int, ...],
    confidence: float,
    delta: float,
) -> tuple[int, list[tuple[str, float]], tuple[EventEstimate, ...], int]:
    """The pair chosen on the selection half, every pair's bound, the estimated events."""
    half = runs // 2
    selections: list[tuple[str, float]] = []
    fitted = []
    for pair in pairs:
        views = pair.views(countermeasure, 0, half, seed, observed)
        reduction = _Reduction.fit(views, pair.neighbours.cells)
        bound = _selection_bound(
            reduction.categorizations(views), confidence=confidence, delta=delta
        )
        selections.append((pair.neighbours.pair, bound))
        fitted.append((reduction, views))
    chosen = max(range(len(pairs)), key=lambda i: (selections[i][1], -i))
    reduction, selected = fitted[chosen]
    estimation = pairs[chosen].views(countermeasure, half, runs, seed, observed)
    joined = (selected[0].join(estimation[0]), selected[1].join(estimation[1]))
    events, tried = estimate_events(
        reduction.categorizations(joined), confidence=confidence, delta=delta
    )
    return chosen, selections, events, tried


def audit_kmeans_release(
    countermeasure: Scramblers | None = None,
    release: ReleaseMechanism | None = None,
    *,
    num_clusters: int = DEFAULT_KMEANS_CLUSTERS,
    bounds: tuple[float, float] = DEFAULT_KMEANS_BOUNDS,
    runs: int = DEFAULT_KMEANS_RUNS,
    confidence: float = 0.95,
    delta: float = DEFAULT_KMEANS_DELTA,
    fault: str = "none",
    aggregate: str | None = None,
    rng: np.random.Generator | int | None = None,
) -> KMeansAuditReport:
    """Audit one iteration of K-means released: empirical lower bound vs the reported ε.

    Each pair of `KMEANS_PAIR_NAMES` runs on the first half of the runs of each table, its
    view reduced as the SQL release audit reduces it (`_Reduction`); the pair with the
    largest best-event bound runs on the second half, which estimates its selected events.

    Args:
        countermeasure: `Scramblers` (the tables have n points, one batch); default
            `DEFAULT_KMEANS_COUNTERMEASURE`.
        release: `dpcomm.Laplace` or `dpcomm.Gaussian`, for one iteration; default
            `DEFAULT_KMEANS_RELEASE`.
        num_clusters: K = T >= 2.
        bounds: [lo, hi] of both coordinates.
        runs: runs per table (>= 100).
        confidence: probability that the lower bound is below the true ε, in (0, 1).
        delta: the traffic's δ; the comparison is at the composed δ the report gives.
        fault: ``"none"`` or one of `KMEANS_FAULT_KINDS` (same claim, faulty mechanism).
        aggregate: None (every released vector observed, against the run's claim) or the
            start of one vector's description (``"SUM(x"``, ``"SUM(y"``, ``"COUNT"``): the
            traffic and that vector alone, against the traffic composed with its noise alone.
        rng: a numpy Generator, a seed, or None: the seed of the traffic's streams.
    """
    from dpcomm.plan.privacy import account_plan

    start = time.perf_counter()
    countermeasure, release, count, level, traffic_delta = _checked(
        countermeasure, release, runs=runs, confidence=confidence, delta=delta, fault=fault
    )
    pairs = _pairs(release, bounds, num_clusters, countermeasure.batch_size, fault)
    seed = int(make_rng(rng).integers(0, 1 << 62))
    program = pairs[0].programs[0]
    privacy = account_plan(program.plan, countermeasure, delta=traffic_delta)
    observed, claim = _observed(program.release, privacy, aggregate)
    chosen, selections, events, tried = _search(
        pairs,
        countermeasure,
        runs=count,
        seed=seed,
        observed=observed,
        confidence=level,
        delta=claim.delta,
    )
    best = max(events, key=lambda e: e.epsilon, default=None)
    noises = pairs[chosen].release.iteration_noises(1)
    return KMeansAuditReport(
        countermeasure=countermeasure,
        release=release,
        neighbours=pairs[chosen].neighbours,
        runs=count,
        confidence=level,
        delta=claim.delta,
        traffic_epsilon=privacy.guarantee.epsilon,
        reported_epsilon=claim.epsilon,
        summed_epsilon=claim.summed_epsilon,
        noise_scales=tuple((noises[i].output.split(": ", 1)[1], noises[i].scale) for i in observed),
        lower_bound=best.epsilon if best is not None else 0.0,
        events_tried=tried,
        best_event=best if best is not None and best.epsilon > 0 else None,
        pairs=tuple(selections),
        fault=fault,
        aggregate=None if aggregate is None else noises[observed[0]].output.split(": ", 1)[1],
        seconds=time.perf_counter() - start,
    )


__all__ = [
    "DEFAULT_KMEANS_BOUNDS",
    "DEFAULT_KMEANS_CLUSTERS",
    "DEFAULT_KMEANS_COUNTERMEASURE",
    "DEFAULT_KMEANS_DELTA",
    "DEFAULT_KMEANS_RELEASE",
    "DEFAULT_KMEANS_RUNS",
    "KMEANS_FAULT_KINDS",
    "KMEANS_PAIR_NAMES",
    "KMeansAuditReport",
    "KMeansNeighbours",
    "audit_kmeans_release",
    "audited_kmeans",
    "contributions",
    "kmeans_neighbours",
    "noisy_cells",
    "seeded_kmeans_fault",
    "traffic_runs",
]
