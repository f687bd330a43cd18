"""K-means released end to end: noisy centroids from noisy per-cluster sums and counts.

In every iteration i = 1..I, compute node k of cluster k clamps each coordinate j of the points
it received to the public bounds [lo_j, hi_j], centres it on c_j = (lo_j + hi_j)/2 and releases
the noisy centred sums S̃_kj = Σ (x_j − c_j) + noise and the noisy count Ñ_k = n_k + noise
(integer noise), drawn by OpenDP at that node, once; the published centroid is

    μ̃_kj = clamp(c_j + w_kj · S̃_kj / Ñ_k, lo_j, hi_j)      (Ñ_k > 0)

and, where Ñ_k ≤ 0, the previous centroid, kept (post-processing of released values either
way). w_kj = τ_j² / (τ_j² + v_kj) shrinks the noisy mean towards the centre by how noisy it is
(the posterior mean of μ_kj − c_j under a prior of variance τ_j² = ((hi_j − lo_j)/6)², the
bounds read as ±3 standard deviations, given a measurement of variance
v_kj = (Var Z_S + τ_j² Var Z_N) / Ñ_k², `KMeansRelease.shrinkage`): at small ε the noise of a
per-cluster sum is many times the cluster's spread, and the raw ratio, clamped, throws the
centroids to the corners of the bounds; shrunk, they keep the noisy means' directions (measured
in docs/benchmarks.md). Every term is public or released, so the guarantee is unchanged.

The next iteration routes every point by these noisy centroids, which are DP outputs:
public, so the routing of iteration i + 1 is a function of public values and of the point
alone, and the I iterations are an adaptive composition of I instances of the joint theorem
(docs/accounting.md, "K-means released"), each iteration's clusters being the keys of a
grouping set with one key per compute node.

Per iteration the released vectors are one per coordinate (the K centred sums) and the K
counts; their sensitivities are `dpcomm.release.mechanisms.centred_sum_sensitivity` and COUNT(*)'s
over one keyed grouping set of `JointView` ``one-other`` (scramblers with sampling: one other
source's point moves in or out of delivery, on the compute node of the row's old or new cluster,
one cluster per node) or ``own-row``. ε2 is split among the I · (D + 1) released vectors to
minimise the published centroids' expected error (`kmeans_uses`; every iteration alike), δ2
equally; the (ε_i, δ_i) of every vector of every
iteration compose with the traffic by PLD (`dpcomm.release.compose.compose_release`).

The noise comes from OpenDP's cryptographically secure generator, as the SQL release's
(`dpcomm.release.noise`), never from the run's seed: a seeded run is reproducible up to the
release's noise (and, since the routing reads the noisy centroids, up to what it changes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasures, shares_blanket
from dpcomm.release.mechanisms import (
    AggregateNoise,
    Gaussian,
    JointView,
    Laplace,
    ReleasedFunction,
    ReleaseMechanism,
    Sensitivity,
    aggregate_sensitivity,
    calibrate_noise,
    centred_sum_sensitivity,
    mechanism_from_spec,
)
from dpcomm.release.noise import ReleaseShares, _noisy, _noisy_each
from dpcomm.validation import check_column_bounds

if TYPE_CHECKING:
    from dpcomm.plan.privacy import PlanGuarantee
    from dpcomm.queries.exactsum import ExactSums
    from dpcomm.release.compose import ReleaseComposition
    from dpcomm.release.report import ReleaseReport

FloatArray = npt.NDArray[np.float64]

#: The key the clusters form in the joint view (one cluster per compute node).
CLUSTER_SET: tuple[tuple[str, ...], ...] = (("cluster",),)


@dataclass(frozen=True)
class KMeansRelease(ReleaseShares):
    """K-means's noisy release: per iteration, each cluster's noisy centred sums and count.

    Attributes:
        mechanism: Laplace or Gaussian, with the release's whole budget (ε2, δ2) over the I
            iterations.
        bounds: (lo_j, hi_j) of every coordinate j: points are clamped to them and centred on
            c_j = (lo_j + hi_j)/2.
        num_iterations: I.
        noises: the noise of every released vector, iteration by iteration: the D centred
            sums, then the count (I · (D + 1) entries).
        view: the `JointView` of the clusters (``one-other`` or ``own-row``).
        shared_blanket: whether the sensitivities cover scramblers with sampling.
        columns: the coordinates' names (for reports).
    """

    mechanism: ReleaseMechanism
    bounds: tuple[tuple[float, float], ...]
    num_iterations: int
    noises: tuple[AggregateNoise, ...]
    view: JointView
    shared_blanket: bool
    columns: tuple[str, ...]

    @property
    def charged(self) -> tuple[AggregateNoise, ...]:
        """Every released vector's (ε_i, δ_i), as a query's release names them."""
        return self.noises

    @property
    def centres(self) -> FloatArray:
        """c_j = (lo_j + hi_j)/2 of every coordinate."""
        return np.asarray([(low + high) / 2.0 for low, high in self.bounds], dtype=np.float64)

    def iteration_noises(self, iteration: int) -> tuple[AggregateNoise, ...]:
        """The D + 1 noises of ``iteration`` (1-based): the centred sums, then the count."""
        width = len(self.bounds) + 1
        return self.noises[(iteration - 1) * width : iteration * width]

    def clamp(self, points: npt.ArrayLike) -> FloatArray:
        """``points`` clamped to the bounds, coordinate by coordinate (float64)."""
        lows = np.asarray([low for low, _ in self.bounds], dtype=np.float64)
        highs = np.asarray([high for _, high in self.bounds], dtype=np.float64)
        return np.clip(np.asarray(points, dtype=np.float64), lows, highs)

    @property
    def prior_variances(self) -> FloatArray:
        """τ_j² = ((hi_j − lo_j)/6)²: a centroid coordinate's prior variance about c_j.

        The bounds read as ±3 standard deviations (standardized data clipped to [−3, 3]: 1).
        """
        return np.asarray([((high - low) / 6.0) ** 2 for low, high in self.bounds])

    def shrinkage(self, iteration: int, noisy_count: int) -> FloatArray:
        """w_kj = τ_j² / (τ_j² + v_kj) of every coordinate j, for a noisy count Ñ_k > 0.

        v_kj = (Var Z_S_j + τ_j² Var Z_N) / Ñ_k² is the variance of the noisy mean S̃_kj / Ñ_k
        about μ_kj − c_j to first order (module docstring): public, from the noise's scales.
        """
        noises = self.iteration_noises(iteration)
        sums = np.asarray([noise.variance for noise in noises[:-1]], dtype=np.float64)
        prior = self.prior_variances
        measured = (sums + prior * noises[-1].variance) / float(noisy_count) ** 2
        return np.asarray(prior / (prior + measured), dtype=np.float64)

    def noisy_centroid(self, iteration: int, sums: ExactSums, previous: FloatArray) -> FloatArray:
        """Cluster k's published centroid μ̃_k of ``iteration`` from its exact clamped ``sums``.

        The noisy centred sums and the noisy count are drawn here, once (OpenDP, after its
        privacy map is checked); the noisy mean is shrunk towards the centre
        (`shrinkage`); with a noisy count ≤ 0 the ``previous`` centroid is kept.
        """
        noises = self.iteration_noises(iteration)
        count = int(sums.counts[0]) if len(sums.counts) else 0
        # Σ (x_j − c_j) exactly, then rounded once: the sum rounded before the subtraction
        # would differ between neighbours by far more than the sensitivity near large bounds.
        centred = sums.centred_sums(self.centres.tolist())
        noisy_sums = _noisy_each(noises[:-1], centred)
        noisy_count = int(_noisy(noises[-1], [count])[0])
        if noisy_count <= 0:
            return np.asarray(previous, dtype=np.float64).copy()
        mean = np.asarray(noisy_sums, dtype=np.float64) / noisy_count
        return self.clamp(self.centres + self.shrinkage(iteration, noisy_count) * mean)

    def check_for(self, countermeasures: Countermeasures) -> None:
        """Refuse scramblers with sampling for a release bound without their shared blanket."""
        if self.shared_blanket or not shares_blanket(countermeasures):
            return
        raise InvalidParameterError(
            "countermeasure",
            "the countermeasure the release was bound for (its noise covers traffic that "
            "delivers each point independently; bind the release with this countermeasure)",
            "scramblers with sampling",
        )

    def to_spec(self) -> dict[str, Any]:
        """The public description a node binds again (`release_from_spec`)."""
        return {
            "mechanism": self.mechanism.name,
            "epsilon": self.mechanism.epsilon,
            "delta": self.mechanism.delta,
            "bounds": [list(pair) for pair in self.bounds],
            "shared_blanket": self.shared_blanket,
            "columns": list(self.columns),
            "module": __name__,
        }


def kmeans_aggregates(
    bounds: Sequence[tuple[float, float]],
    columns: Sequence[str],
    num_iterations: int,
    view: JointView,
) -> list[tuple[str, ReleasedFunction, Sensitivity]]:
    """Every released vector of the I iterations with its sensitivity in ``view``.

    Per iteration, the D centred sums (`centred_sum_sensitivity` over the clusters, one
    key per compute node) and the count (COUNT(*)'s): what `calibrate_noise` splits ε2
    among (and `dpcomm.calibration` plans with).
    """
    one: list[tuple[str, ReleasedFunction, Sensitivity]] = []
    for name, (low, high) in zip(columns, bounds, strict=True):
        sensitivity = centred_sum_sensitivity(CLUSTER_SET, low, high, views=[view])
        described = f"SUM({name} clamped to [{low:g}, {high:g}], centred on {(low + high) / 2:g})"
        one.append((described, "sum", sensitivity))
    one.append(
        ("COUNT(*)", "count_star", aggregate_sensitivity("count_star", CLUSTER_SET, views=[view]))
    )
    return [
        (f"iteration {i}: {output}", function, sensitivity)
        for i in range(1, num_iterations + 1)
        for output, function, sensitivity in one
    ]


def kmeans_uses(
    bounds: Sequence[tuple[float, float]], columns: Sequence[str], num_iterations: int
) -> tuple[tuple[tuple[str, float], ...], ...]:
    """What each published centroid coordinate reads, for the minimum-error split of ε2.

    The noisy mean c_j + S̃_kj / Ñ_k (before its shrinkage): its error is about
    (Z_S − (μ_kj − c_j) Z_N) / n_k, so it reads the sum with coefficient 1 and the count
    with E[(μ − c)²], taken as (hi_j − lo_j)²/12
    (a centroid uniform in the bounds: public, as the SQL release's AVG takes it).
    """
    aggregates = kmeans_aggregates(bounds, columns, num_iterations, "own-row")
    width = len(columns) + 1
    uses = []
    for start in range(0, len(aggregates), width):
        count = aggregates[start + width - 1][0]
        for (name, _, _), (low, high) in zip(
            aggregates[start : start + width - 1], bounds, strict=True
        ):
            uses.append(((name, 1.0), (count, (high - low) ** 2 / 12.0)))
    return tuple(uses)


def bind_kmeans_release(
    mechanism: ReleaseMechanism,
    bounds: object,
    *,
    dimension: int,
    num_iterations: int,
    shared_blanket: bool = True,
    columns: Sequence[str] | None = None,
) -> KMeansRelease:
    """The K-means release of ``mechanism`` over ``bounds`` for I = ``num_iterations``.

    ``shared_blanket``: the sensitivities cover scramblers with sampling (`JointView`
    ``one-other``; else ``own-row``, valid only for traffic that delivers each point
    independently of the others). ε2 is split among the I · (D + 1) released vectors to
    minimise the centroids' expected error, δ2 equally (module docstring).
    """
    if not isinstance(mechanism, Laplace | Gaussian):
        raise InvalidParameterError(
            "release", "dpcomm.Laplace(epsilon) or dpcomm.Gaussian(epsilon, delta)", mechanism
        )
    pairs = check_column_bounds(bounds, dimension)
    names = tuple(columns) if columns is not None else tuple(f"x{j}" for j in range(dimension))
    if len(names) != dimension:
        raise InvalidParameterError("columns", f"{dimension} names", len(names))
    view: JointView = "one-other" if shared_blanket else "own-row"
    aggregates = kmeans_aggregates(pairs, names, num_iterations, view)
    uses = kmeans_uses(pairs, names, num_iterations)
    noises = calibrate_noise(mechanism, aggregates, shared_blanket=shared_blanket, uses=uses)
    return KMeansRelease(mechanism, pairs, num_iterations, noises, view, shared_blanket, names)


def release_from_spec(
    spec: Mapping[str, Any], *, dimension: int, num_iterations: int
) -> KMeansRelease:
    """The release `KMeansRelease.to_spec` describes, bound again."""
    mechanism = mechanism_from_spec(spec)
    return bind_kmeans_release(
        mechanism,
        [tuple(pair) for pair in spec["bounds"]],
        dimension=dimension,
        num_iterations=num_iterations,
        shared_blanket=bool(spec.get("shared_blanket", True)),
        columns=[str(c) for c in spec.get("columns", [])] or None,
    )


def kmeans_release_report(
    release: KMeansRelease, privacy: PlanGuarantee, composition: ReleaseComposition | None = None
) -> ReleaseReport:
    """The release's noise (each vector over the I iterations) and its composition."""
    from dpcomm.release.compose import compose_release
    from dpcomm.release.report import ReleasedAggregate, ReleaseReport

    both = composition or compose_release(privacy, release.noises)
    iterations = release.num_iterations
    aggregates = []
    for noise in release.iteration_noises(1):
        label = noise.output.split(": ", 1)[1]
        aggregates.append(
            ReleasedAggregate(
                f"{label} per cluster"
                + ("" if iterations == 1 else f", in each of the {iterations} iterations"),
                release.mechanism.name + (" (discrete)" if noise.integer else ""),
                noise.sensitivity.l1,
                noise.sensitivity.l2,
                noise.scale,
                noise.standard_deviation,
                noise.half_width_95,
                noise.epsilon * iterations,
                noise.total_delta * iterations,
            )
        )
    return ReleaseReport(
        mechanism=release.mechanism.name,
        epsilon=release.epsilon,
        delta=release.delta,
        keys="the K clusters (public: one per compute node), every iteration",
        composed_epsilon=both.composed_epsilon,
        composed_delta=both.delta,
        summed_epsilon=both.summed_epsilon,
        epsilon_total=both.epsilon,
        aggregates=tuple(aggregates),
        split=tuple((a.aggregate, a.epsilon) for a in aggregates),
        split_rule="to minimise the centroids' expected error (each iteration alike)",
    )


__all__ = [
    "KMeansRelease",
    "bind_kmeans_release",
    "kmeans_aggregates",
    "kmeans_release_report",
    "kmeans_uses",
    "release_from_spec",
]
