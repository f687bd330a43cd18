"""Central DP on the released result: sensitivities, noise scales, and their privacy loss.

The paper's Related Work ("Differentially private data analysis") notes that its guarantee on
the communication patterns composes with central DP on the released result: (ε1, δ1) for the
traffic and (ε2, δ2) for the release give (ε1 + ε2, δ1 + δ2) against an observer of both.

Neighbouring tables here are the traffic's: one source's row replaced by any other (bounded
DP). The release is computed over the tuples the traffic *delivered*, and which tuples are
delivered is the traffic's own randomness (R_σ's redraws): traffic and release share coins,
and composing them needs a theorem about the joint view (docs/accounting.md, "Noisy releases:
the joint view"). Its proof couples the two neighbouring tables so that, given what the
observer sees of the traffic, the delivered tuples differ in the replaced row *and at most one
other source's tuple*, delivered in one world and not in the other, on the compute node of the
row's old or new key (`JointView`). The sensitivities below are those of that coupled
difference, per grouping set with keys, for a row's contribution c in C = [lo, hi] ∪ {0} (a
NULL value or a row failing the WHERE adds 0), M = max |c| and W = max |c − c'| =
max(hi − lo, M) (COUNT: M = W = 1):

| view | L1 | L2 |
|---|---|---|
| ``own-row`` | 2M | max(√2·M, W) |
| ``one-other`` | M + W | √(M² + W²) |
| ``one-other-shared-node`` | 3M | max(√3·M, √(M² + W²)) |

In the empty grouping set (one group, one compute node, every tuple delivered) the change is
W in one cell. The released vector of one aggregate over every grouping set has the sum of
these as its L1 sensitivity and the root of the sum of squares as its L2 sensitivity.

Each aggregate's noise is calibrated to its share of the release's budget (the split that
minimises the published values' expected error, `release_shares`; δ in equal shares):
Laplace noise of scale L1 / ε_i (pure ε_i-DP), or Gaussian noise whose zero-concentrated
divergence ρ = L2² / (2 s²) converts to ε_i at δ_i (Bun and Steinke 2016, Prop. 1.3:
ε = ρ + 2 √(ρ ln(1/δ))). The library that draws the noise (OpenDP) reports its own privacy map,
which the tests compare with these numbers.

Without a public key domain, a grouping set's keys are chosen by a threshold on noisy counts
([`selection_distances`][], [`threshold_for`][]): the keys whose noisy COUNT(*) reaches
τ are released, the others not. In the coupled view the counts of at most 3 keys per selected
grouping set change, each by 1 (the replaced row's two keys and the other source's). A key that
exists in one table only has count 1 there; the threshold makes the chance that any such key is
released at most δ_sel (Rogers, Subramaniam and Winstanley 2023 analyse the mechanism; OpenDP's
own privacy map of it is the one checked).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_delta

ReleasedFunction = Literal["count_star", "count", "sum"]


@dataclass(frozen=True)
class Laplace:
    """Laplace noise on the released aggregates: pure ε-DP for the release.

    Attributes:
        epsilon: the release's ε (ε2), split among its aggregates to minimise the published
            values' expected error (`release_shares`).

    Examples:
        >>> import dpcomm
        >>> release = dpcomm.Laplace(epsilon=1.0)
        >>> (release.name, release.epsilon, release.delta)
        ('laplace', 1.0, 0.0)
    """

    epsilon: float

    def __post_init__(self) -> None:
        _check_positive("epsilon", self.epsilon)

    @property
    def delta(self) -> float:
        """δ2 = 0."""
        return 0.0

    @property
    def name(self) -> str:
        """``laplace``."""
        return "laplace"


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise on the released aggregates: (ε, δ)-DP for the release.

    Attributes:
        epsilon: the release's ε (ε2), split among its aggregates to minimise the published
            values' expected error (`release_shares`).
        delta: the release's δ (δ2), split equally among its aggregates.

    Examples:
        >>> import dpcomm
        >>> release = dpcomm.Gaussian(epsilon=1.0, delta=1e-6)
        >>> (release.name, release.epsilon, release.delta)
        ('gaussian', 1.0, 1e-06)
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        _check_positive("epsilon", self.epsilon)
        check_delta("delta", self.delta)
        if not 0.0 < self.delta < 1.0:
            raise InvalidParameterError("delta", "a number in (0, 1)", self.delta)

    @property
    def name(self) -> str:
        """``gaussian``."""
        return "gaussian"


ReleaseMechanism = Laplace | Gaussian


def _check_positive(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0.0 < float(value) < math.inf
    ):
        raise InvalidParameterError(name, "a finite number > 0", value)


@dataclass(frozen=True)
class Sensitivity:
    """The L1 and L2 sensitivity of one aggregate's released vector (every grouping set)."""

    l1: float
    l2: float


#: How far one row's replacement reaches into a grouping set's released cells, for an observer
#: of both the traffic and the release (module docstring; docs/accounting.md, "the joint view"):
#:
#: * ``own-row``: only the replaced row's tuple differs: every other source's delivery is
#:   independent of that row given the traffic view (no countermeasure, local sampling and
#:   flooding, scramblers without sampling, and any traffic accounted through R_σ's own pair);
#: * ``one-other``: the scramblers' shared blanket (σ > 0) can also move one other source's
#:   tuple in or out of delivery, on the compute node of the row's old or new key, and every
#:   compute node owns at most one released key of the grouping set (the same cell);
#: * ``one-other-shared-node``: likewise, where a compute node owns several released keys (or
#:   the keys are not public), so the other tuple can sit in a third cell.
JointView = Literal["own-row", "one-other", "one-other-shared-node"]

JOINT_VIEWS: tuple[JointView, ...] = ("own-row", "one-other", "one-other-shared-node")


def keyed_set_sensitivity(view: JointView, *, bound: float, width: float) -> Sensitivity:
    """The (L1, L2) change of one grouping set with keys, in the coupled ``view``.

    ``bound`` is M = max |c| and ``width`` W = max |c − c′| over the contributions c a row can
    make (module docstring). Replaced row: its old cell loses c0 and its new one gains c0′
    (2M, or |c0 − c0′| ≤ W in one cell). The other source's tuple j adds or removes c_j in the
    cell of its key, which is on the compute node of the old or the new key: in the same cell
    as one of the row's (one key per node) the two make c0 − c_j (at most W) next to c0′ (at
    most M); on a node with several keys it can be a third cell.

    Examples:
        >>> keyed_set_sensitivity("one-other", bound=1.0, width=2.0)
        Sensitivity(l1=3.0, l2=2.23606797749979)
    """
    if view not in JOINT_VIEWS:
        raise InvalidParameterError("view", f"one of {', '.join(JOINT_VIEWS)}", view)
    if view == "own-row":
        return Sensitivity(max(2.0 * bound, width), max(math.sqrt(2.0) * bound, width))
    if view == "one-other":
        return Sensitivity(bound + width, math.hypot(bound, width))
    return Sensitivity(
        max(3.0 * bound, bound + width), max(math.sqrt(3.0) * bound, math.hypot(bound, width))
    )


def aggregate_sensitivity(
    function: ReleasedFunction,
    grouping_sets: Sequence[Sequence[str]],
    bound: float | None = None,
    width: float | None = None,
    *,
    views: Sequence[JointView] | None = None,
) -> Sensitivity:
    """Sensitivity of COUNT(*), COUNT(x) or SUM(x) over ``grouping_sets`` (module docstring).

    ``bound`` is M = max(|lo|, |hi|) and ``width`` hi − lo of a SUM's clamped values (W is
    max(hi − lo, M): a NULL or a row failing the WHERE contributes 0). ``views`` gives each
    grouping set's `JointView` (default: ``one-other-shared-node``, valid for every
    countermeasure and key layout); the empty grouping set's is irrelevant (one cell, W).

    Examples:
        >>> s = aggregate_sensitivity("count_star", [("a",), ()], views=["one-other", "own-row"])
        >>> s.l1, round(s.l2, 6)
        (3.0, 1.732051)
    """
    if views is None:
        views = ["one-other-shared-node"] * len(grouping_sets)
    if len(views) != len(grouping_sets):
        raise InvalidParameterError(
            "views", f"one per grouping set ({len(grouping_sets)})", len(views)
        )
    if function == "sum":
        if bound is None or width is None:
            raise InvalidParameterError("bounds", "a (lo, hi) for every SUM", None)
        magnitude, spread = bound, max(width, bound)
    else:
        magnitude, spread = 1.0, 1.0
    l1 = 0.0
    squares = 0.0
    try:
        for grouping_set, view in zip(grouping_sets, views, strict=True):
            if grouping_set:
                cells = keyed_set_sensitivity(view, bound=magnitude, width=spread)
                l1 += cells.l1
                squares += cells.l2**2
            else:
                l1 += spread
                squares += spread**2
    except OverflowError:
        squares = math.inf
    if not (math.isfinite(l1) and math.isfinite(squares)):
        raise InvalidParameterError(
            "bounds",
            "bounds whose sensitivity is a finite number (|lo|, |hi| and hi - lo well below 1e150)",
            f"M = {magnitude:g}, hi - lo = {width:g}",
        )
    return Sensitivity(l1, math.sqrt(squares))


def centred_sum_sensitivity(
    grouping_sets: Sequence[Sequence[str]],
    low: float,
    high: float,
    *,
    views: Sequence[JointView] | None = None,
) -> Sensitivity:
    """Sensitivity of a centred SUM: values clamped to [lo, hi], less c = (lo + hi)/2.

    A row's contribution is then in [lo − c, hi − c] ∪ {0} (0: a NULL or a row failing
    the WHERE), so M = (hi − lo)/2 and W = hi − lo: the same theorem as every aggregate
    (docs/accounting.md, "Centred sums"), with the other source's tuple moving a cell by at
    most (hi − lo)/2. Per keyed grouping set: ``own-row`` hi − lo in L1 and L2,
    ``one-other`` 1.5 (hi − lo) and √5/2 (hi − lo), ``one-other-shared-node`` 1.5 (hi − lo)
    and √5/2 (hi − lo); the empty set hi − lo.

    Examples:
        >>> centred_sum_sensitivity([("species",)], 2500.0, 6500.0, views=["one-other"])
        Sensitivity(l1=6000.0, l2=4472.13595499958)
    """
    centre = (low + high) / 2.0
    shifted_low, shifted_high = low - centre, high - centre
    return aggregate_sensitivity(
        "sum",
        grouping_sets,
        bound=max(abs(shifted_low), abs(shifted_high)),
        width=shifted_high - shifted_low,
        views=views,
    )


def published_error_costs(
    uses: Sequence[Sequence[tuple[int, float]]], squared_sensitivities: Sequence[float]
) -> tuple[float, ...]:
    """Each aggregate's weight in the expected error of what a release publishes.

    ``uses`` lists, per published value j, the aggregates i its error reads with their
    coefficients a_ij: the value's error variance is Σ_i a_ij K_i v(ε_i), K_i =
    ``squared_sensitivities[i]`` and v the noise's variance per unit sensitivity². A COUNT or
    a plain SUM is ((i, 1),); an AVG (c + S_c / C) ((S, 1), (C, E[(R − c)²])) over the
    count, which cancels; a centred SUM ((S, 1), (C, c²)). A COUNT used by several values
    (published, and an AVG's denominator) is one aggregate: it appears in each. The weight
    is K_i Σ_j a_ij / Σ_i′ a_i′j K_i′: each published value's variance relative to its own
    at equal shares, so that values of different units (counts, grams) weigh alike and no
    cell size is needed. An aggregate no value reads weighs as a value of its own.

    Examples:
        >>> published_error_costs([[(0, 1.0), (1, 4.0)]], [9.0, 1.0])
        (0.6923076923076923, 0.3076923076923077)
    """
    weights = [0.0] * len(squared_sensitivities)
    for value in uses:
        if any(not (a >= 0.0 and math.isfinite(a)) for _, a in value):
            raise InvalidParameterError("uses", "finite coefficients >= 0 of aggregates", value)
        norm = math.fsum(a * squared_sensitivities[i] for i, a in value)
        if norm <= 0.0:
            # no noise to weigh: equal bounds (sensitivity 0), or squares that underflow
            continue
        for i, a in value:
            weights[i] += a * squared_sensitivities[i] / norm
    return tuple(w if w > 0.0 else 1.0 for w in weights)


def minimum_error_split(
    epsilon: float, costs: Sequence[float], *, delta: float = 0.0
) -> tuple[float, ...]:
    """The shares ε_i (Σ ε_i = ``epsilon``) that minimise Σ_i costs_i · v(ε_i).

    v is the noise's variance per unit of squared sensitivity at ε_i: 2/ε_i² for Laplace
    (``delta`` 0; the minimum has ε_i ∝ costs_i^(1/3)), 1/(2ρ_i) for the Gaussian, ρ_i the
    zCDP of ε_i at δ/k (`rho_for`: each of the k aggregates keeps an equal share of δ),
    found by bisection on the Lagrange multiplier (ρ′/ρ² falls with ε, so each share is a
    monotone function of it). With `published_error_costs` as ``costs``, what is minimised
    is the expected squared error of the published values, each relative to its own at
    equal shares. A pure function of public quantities: the split leaks nothing.

    Examples:
        >>> [round(e, 4) for e in minimum_error_split(1.0, [8.0, 1.0])]
        [0.6667, 0.3333]
    """
    _check_positive("epsilon", epsilon)
    if not costs or any(not (c > 0.0 and math.isfinite(c)) for c in costs):
        raise InvalidParameterError("costs", "finite numbers > 0, one per aggregate", costs)
    if all(c == costs[0] for c in costs):  # equal costs: equal shares, exactly
        return _at_most(epsilon, [epsilon / len(costs)] * len(costs))
    roots = [c ** (1.0 / 3.0) for c in costs]
    if delta == 0.0:
        return _at_most(epsilon, [epsilon * r / math.fsum(roots) for r in roots])
    share_delta = delta / len(costs)
    log_term = math.log(1.0 / share_delta)

    def slope(e: float) -> float:  # ρ′(ε)/ρ(ε)², decreasing
        root = math.sqrt(log_term + e)
        return 1.0 / (root * (root - math.sqrt(log_term)) ** 3)

    def share(cost: float, multiplier: float) -> float:
        low, high = 0.0, epsilon
        for _ in range(200):
            middle = 0.5 * (low + high)
            if middle <= 0.0 or cost * slope(middle) > multiplier:
                low = middle
            else:
                high = middle
        return 0.5 * (low + high)

    low, high = -60.0, 60.0  # log of the multiplier
    for _ in range(200):
        middle = 0.5 * (low + high)
        if math.fsum(share(c, math.exp(middle)) for c in costs) > epsilon:
            low = middle
        else:
            high = middle
    shares = [share(c, math.exp(high)) for c in costs]
    scale = epsilon / math.fsum(shares)
    return _at_most(epsilon, [min(e * scale, epsilon) for e in shares])


def _at_most(epsilon: float, shares: list[float]) -> tuple[float, ...]:
    """``shares`` shrunk by a few ulps until their sum is at most ``epsilon`` (never above)."""
    while math.fsum(shares) > epsilon:
        shares = [math.nextafter(e, 0.0) for e in shares]
    return tuple(shares)


#: Which released aggregates each published value reads, with its coefficients a_ij
#: (`published_error_costs`), by the aggregates' output names.
ValueUses = Sequence[Sequence[tuple[str, float]]]


def release_shares(
    mechanism: ReleaseMechanism,
    aggregates: Sequence[tuple[str, ReleasedFunction, Sensitivity]],
    uses: ValueUses = (),
) -> tuple[float, ...]:
    """Each aggregate's share ε_i of ``mechanism``'s ε: the minimum expected error split.

    ``uses`` lists the aggregates each published value reads (`published_error_costs`);
    the squared sensitivity is L1² under Laplace noise (variance 2 (L1/ε_i)²) and L2² under
    Gaussian noise. Without ``uses`` every aggregate weighs alike: equal shares. Public
    quantities only (the query, its bounds and domains): the split costs no privacy.

    Examples:
        >>> from dpcomm.release.mechanisms import Laplace, Sensitivity
        >>> aggregates = [("s", "sum", Sensitivity(4000.0, 4000.0)),
        ...               ("c", "count", Sensitivity(2.0, 2.0))]
        >>> uses = [[("s", 1.0), ("c", 2000.0**2 / 3.0)]]
        >>> [round(e, 3) for e in release_shares(Laplace(1.0), aggregates, uses)]
        [0.591, 0.409]
    """
    index = {name: i for i, (name, _, _) in enumerate(aggregates)}
    gaussian = isinstance(mechanism, Gaussian)
    squared = [(s.l2 if gaussian else s.l1) ** 2 for _, _, s in aggregates]
    values = [[(index[n], a) for n, a in value if n in index] for value in uses]
    costs = published_error_costs([v for v in values if v], squared)
    return minimum_error_split(mechanism.epsilon, costs, delta=mechanism.delta)


#: How far above its share OpenDP's privacy map of a draw may be before the release refuses
#: to draw (every check of a draw against its share: `dpcomm.release.noise`,
#: `dpcomm.release.quantile`); the composition charges every share that much more
#: (`dpcomm.release.compose.charged_shares`).
MAP_TOLERANCE = 1e-9


def rho_for(epsilon: float, delta: float) -> float:
    """The largest zCDP ρ whose (ε, δ) conversion ρ + 2√(ρ ln(1/δ)) is at most ``epsilon``."""
    log_term = math.log(1.0 / delta)
    return (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2


def epsilon_of_rho(rho: float, delta: float) -> float:
    """ε at δ of a ρ-zCDP mechanism (Bun and Steinke 2016, Proposition 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@dataclass(frozen=True, kw_only=True)
class NoiseShare:
    """A released aggregate's share of the release's budget (what `Charged` reads).

    Attributes:
        epsilon: its share ε_i of the release's ε.
        delta: its share δ_i of the release's δ.
        selection_delta: δ_sel, the δ its threshold adds when its noisy values also select the
            keys of grouping sets without a public domain (a COUNT(*); else 0).
        shared_blanket: whether its sensitivity covers traffic by scramblers with sampling
            (one other source's tuple, `JointView` ``one-other``); False: only traffic that
            delivers each tuple independently of the others (``own-row``).
    """

    epsilon: float
    delta: float
    selection_delta: float = 0.0
    shared_blanket: bool = True

    @property
    def total_delta(self) -> float:
        """δ of this aggregate's release: its share δ_i and its threshold's δ_sel."""
        return self.delta + self.selection_delta


@dataclass(frozen=True, kw_only=True)
class AggregateNoise(NoiseShare):
    """How one released aggregate is perturbed.

    Attributes (besides its share's, `NoiseShare`: ε_i, δ_i — 0 for Laplace —, δ_sel and
    whether it covers a shared blanket):
        output: the aggregate's column (the core query's).
        function: COUNT(*), COUNT or SUM.
        sensitivity: its released vector's L1 and L2 sensitivity.
        scale: the noise's scale (Laplace b, or the Gaussian's standard deviation).
        integer: whether the noise is integer (counts: discrete Laplace or Gaussian).
    """

    output: str
    function: ReleasedFunction
    sensitivity: Sensitivity
    scale: float
    integer: bool

    @property
    def variance(self) -> float:
        """An upper bound on the noise's variance: 2b² (Laplace), s² (Gaussian).

        The discrete versions' variances are no larger (Canonne, Kamath and Steinke 2020).
        """
        return self.standard_deviation**2

    @property
    def standard_deviation(self) -> float:
        """The noise's standard deviation (√2 b for Laplace; a bound for discrete noise)."""
        return math.sqrt(2.0) * self.scale if self.delta == 0.0 else self.scale

    @property
    def half_width_95(self) -> float:
        """Half-width h with P(|noise| > h) ≤ 5%: b ln 20 (Laplace), 1.96 s (Gaussian).

        Integer noise has its own quantile, the least integer h with P(|Z| > h) ≤ 5%: for
        the discrete Laplace of scale t, P(|Z| > h) = 2 q^(h+1) / (1 + q) with q = e^(−1/t);
        for the discrete Gaussian, the tail summed (at most 1.96 s + 1 for large s). b ln 20
        would leave 7.3% of the discrete Laplace's mass outside at t = 1.
        """
        if not self.integer:
            if self.delta == 0.0:
                return self.scale * math.log(20.0)
            return _Z_95 * self.scale
        if self.delta == 0.0:
            ratio = math.exp(-1.0 / self.scale)
            return float(max(0, math.ceil(self.scale * math.log(40.0 / (1.0 + ratio))) - 1))
        return _discrete_gaussian_half_width(self.scale)


_Z_95 = 1.959963984540054


def _discrete_gaussian_half_width(scale: float) -> float:
    """The least integer h with P(|Z| > h) ≤ 5% for Z discrete Gaussian of parameter s."""
    if scale > 1_000.0:
        return float(math.ceil(_Z_95 * scale) + 1)
    support = np.arange(0, math.ceil(12.0 * scale) + 2, dtype=np.float64)
    weights = np.exp(-(support**2) / (2.0 * scale**2))
    mass = weights.copy()
    mass[1:] *= 2.0  # ±z
    mass /= mass.sum()
    outside = 1.0 - np.cumsum(mass)  # P(|Z| > h) for h = 0, 1, ...
    return float(np.argmax(outside <= 0.05))


def _finite_scale(sensitivity: float, divisor: float) -> float:
    """The noise scale ``sensitivity / divisor``, refused in one line unless finite.

    An ε so small (5e-324, 1e-320) that the scale overflows, or is a division by zero, is
    refused here, before any run, never by OpenDP after it.
    """
    try:
        scale = sensitivity / divisor
    except ZeroDivisionError:
        scale = math.inf
    if not math.isfinite(scale):
        raise InvalidParameterError(
            "release",
            "an ε whose noise scale (sensitivity / ε share) is a finite number",
            f"a scale of {sensitivity:g} / {divisor:g}",
        )
    return scale


def calibrate_noise(
    mechanism: ReleaseMechanism,
    aggregates: Sequence[tuple[str, ReleasedFunction, Sensitivity]],
    *,
    shared_blanket: bool = True,
    uses: ValueUses = (),
    shares: Sequence[float] | None = None,
    parts: int | None = None,
) -> tuple[AggregateNoise, ...]:
    """Each aggregate's noise for its share of ``mechanism``'s budget (`release_shares`).

    ``uses``: what each published value reads (none: equal shares of ε); δ is split
    equally. ``shared_blanket`` says whether the sensitivities cover scramblers with
    sampling (`AggregateNoise.shared_blanket`). ``shares`` and ``parts`` (the number of
    aggregates δ is split among) are given when the release has other aggregates too.
    """
    if not aggregates:
        raise InvalidParameterError("release", "a query with COUNT or SUM to release", "none")
    if shares is None:
        shares = release_shares(mechanism, aggregates, uses)
    if len(shares) != len(aggregates) or (parts is not None and parts < len(aggregates)):
        raise InvalidParameterError("shares", "one per aggregate", shares)
    parts = len(aggregates) if parts is None else parts
    noises = []
    for (output, function, sensitivity), share in zip(aggregates, shares, strict=True):
        if isinstance(mechanism, Laplace):
            scale, delta_share = _finite_scale(sensitivity.l1, share), 0.0
        else:
            delta_share = mechanism.delta / parts
            if not delta_share > 0.0:  # a δ so small that its share underflows
                raise InvalidParameterError(
                    "release",
                    f"a Gaussian δ whose share per released aggregate (δ / {parts}) "
                    "is a positive number",
                    mechanism.delta,
                )
            rho = rho_for(share, delta_share)
            scale = _finite_scale(sensitivity.l2, math.sqrt(2.0 * rho))
        noises.append(
            AggregateNoise(
                output=output,
                function=function,
                sensitivity=sensitivity,
                scale=scale,
                integer=function != "sum",
                epsilon=share,
                delta=delta_share,
                shared_blanket=shared_blanket,
            )
        )
    return tuple(noises)


class Charged(Protocol):
    """A released aggregate as the composition sees it: its (ε_i, δ_i) guarantee."""

    @property
    def output(self) -> str:
        """The released column."""
        ...

    @property
    def epsilon(self) -> float:
        """ε_i."""
        ...

    @property
    def total_delta(self) -> float:
        """δ_i, with any threshold's δ_sel."""
        ...

    @property
    def shared_blanket(self) -> bool:
        """Whether it covers scramblers with sampling (`AggregateNoise.shared_blanket`)."""
        ...


def release_pld(noises: Sequence[Charged]) -> object:
    """The release's privacy loss distribution (dp_accounting): its aggregates composed.

    Each aggregate is represented by the dominating pair of an (ε_i, δ_i)-DP mechanism
    (``from_privacy_parameters``), valid for any mechanism with that guarantee, whatever the
    shape of its noise or of its sensitivity (a vector's, integer or floating-point noise);
    pessimistic, so δ(ε) is an upper bound. A COUNT(*) whose noisy values also select keys
    by a threshold is (ε_i, δ_i + δ_sel)-DP and is represented by that pair: the threshold
    mechanism has no exact PLD here, and the pair dominates every mechanism with that
    guarantee, so the composition stays an upper bound (conservative, not tight).
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_module
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    result = None
    for noise in noises:
        part = pld_module.from_privacy_parameters(
            DifferentialPrivacyParameters(noise.epsilon, noise.total_delta),
            value_discretization_interval=1e-4,
        )
        result = part if result is None else result.compose(part)
    if result is None:
        raise InvalidParameterError("noises", "at least one released aggregate", 0)
    return result


@dataclass(frozen=True)
class SelectionDistances:
    """How far apart the thresholded count maps of two neighbouring tables can be.

    Attributes:
        l0: keys whose count changes (3 per selected grouping set in the joint view).
        l1: the sum of the changes (likewise).
        linf: the largest change of one key's count (1).
    """

    l0: int
    l1: int
    linf: int

    @property
    def l2(self) -> float:
        """√(Σ changes²) = √l0 (every change is 1)."""
        return math.sqrt(self.l0)


#: Keys whose count changes per selected grouping set: the replaced row's old and new key,
#: and the key of the one other source whose delivery the coupling moves (`JointView`
#: ``one-other-shared-node``: selected keys are not public, so they may share a node).
SELECTED_SET_CELLS = 3


def selection_distances(
    num_selected_sets: int, *, cells_per_set: int = SELECTED_SET_CELLS
) -> SelectionDistances:
    """(l0, l1, l∞) of the counts thresholded over ``num_selected_sets`` grouping sets.

    One source sends one tuple per grouping set; replacing its row moves that tuple from one
    key to another (or in or out of a WHERE): 2 keys change by 1 (``cells_per_set`` = 2, the
    ``own-row`` view). Under scramblers with sampling, in the joint view with the traffic one
    other source's tuple may be delivered in one table's run only: 3 keys (the default).

    Examples:
        >>> selection_distances(2)
        SelectionDistances(l0=6, l1=6, linf=1)
    """
    if (
        isinstance(num_selected_sets, bool)
        or not isinstance(num_selected_sets, int)
        or num_selected_sets < 1
    ):
        raise InvalidParameterError("num_selected_sets", "an integer >= 1", num_selected_sets)
    if cells_per_set not in (2, 3):
        raise InvalidParameterError("cells_per_set", "2 or 3", cells_per_set)
    cells = cells_per_set * num_selected_sets
    return SelectionDistances(cells, cells, 1)


def threshold_for(
    *, scale: float, delta: float, distances: SelectionDistances, gaussian: bool
) -> float:
    """The threshold τ at which keys of one table only are released with probability ≤ δ.

    The standard formula, which OpenDP's own privacy map then refines.

    Such a key has count at most l∞ = 1 there, and there are at most l0 of them. Laplace of
    scale b: l0 · ½ e^{−(τ − l∞)/b} ≤ δ gives τ = l∞ + b ln(l0 / (2δ)). Gaussian of standard
    deviation s: l0 · P(N(0, s²) ≥ τ − l∞) ≤ δ gives τ = l∞ + s Φ⁻¹(1 − δ/l0).

    Examples:
        >>> distances = selection_distances(1)
        >>> round(threshold_for(scale=4.0, delta=1e-6, distances=distances, gaussian=False), 3)
        57.884
    """
    check_key_selection_delta(delta)
    _check_positive("scale", scale)
    if gaussian:
        from scipy.stats import norm

        return distances.linf + scale * float(norm.isf(min(delta / distances.l0, 0.5)))
    return distances.linf + scale * max(math.log(distances.l0 / (2.0 * delta)), 0.0)


def check_key_selection_delta(value: object) -> float:
    """``key_selection_delta`` checked: a number in (0, 1)."""
    delta = check_delta("key_selection_delta", value)
    if not 0.0 < delta < 1.0:
        raise InvalidParameterError("key_selection_delta", "a number in (0, 1)", value)
    return delta


def half_width(*, normal_sd: float, laplace_scale: float = 0.0, confidence: float = 0.95) -> float:
    """The half-width h with P(|N(0, s²) + Laplace(b)| > h) = 1 − ``confidence``.

    The central interval of a normal error (a Horvitz–Thompson estimate's, s) plus Laplace
    noise (b): with X = N + L, P(X > h) = Φ(−h/s) + ½ e^{s²/2b² − h/b} Φ(h/s − s/b)
    − ½ e^{s²/2b² + h/b} Φ(−h/s − s/b) (the convolution, in closed form), solved for h.
    b = 0 gives z s, s = 0 gives b ln(1/(1 − confidence)); N and L are independent.

    Examples:
        >>> round(half_width(normal_sd=1.0), 4)
        1.96
        >>> round(half_width(normal_sd=0.0, laplace_scale=1.0), 4)
        2.9957
    """
    from scipy.optimize import brentq
    from scipy.special import log_ndtr, ndtri

    alpha = 1.0 - confidence
    if not 0.0 < alpha < 1.0:
        raise InvalidParameterError("confidence", "a number in (0, 1)", confidence)
    if not (normal_sd >= 0.0 and laplace_scale >= 0.0):
        raise InvalidParameterError("normal_sd, laplace_scale", "numbers >= 0", normal_sd)
    if laplace_scale == 0.0:
        return float(normal_sd * -ndtri(alpha / 2.0))
    if normal_sd == 0.0:
        return laplace_scale * math.log(1.0 / alpha)
    s, b = normal_sd, laplace_scale

    def outside(h: float) -> float:
        shift = s * s / (2.0 * b * b)
        upper = (
            math.exp(float(log_ndtr(-h / s)))
            + 0.5 * math.exp(shift - h / b + float(log_ndtr(h / s - s / b)))
            - 0.5 * math.exp(shift + h / b + float(log_ndtr(-h / s - s / b)))
        )
        return 2.0 * upper - alpha

    # Union bound: N beyond z_{1−α/4} s and L beyond b ln(2/α) each have chance α/2.
    high = s * float(-ndtri(alpha / 4.0)) + b * math.log(2.0 / alpha)
    return float(brentq(outside, 0.0, high, xtol=1e-12 * high, rtol=1e-12))


__all__ = [
    "JOINT_VIEWS",
    "AggregateNoise",
    "Charged",
    "Gaussian",
    "JointView",
    "Laplace",
    "NoiseShare",
    "ReleaseMechanism",
    "SelectionDistances",
    "Sensitivity",
    "ValueUses",
    "aggregate_sensitivity",
    "calibrate_noise",
    "centred_sum_sensitivity",
    "check_key_selection_delta",
    "epsilon_of_rho",
    "half_width",
    "keyed_set_sensitivity",
    "minimum_error_split",
    "published_error_costs",
    "release_pld",
    "release_shares",
    "rho_for",
    "selection_distances",
    "threshold_for",
]


def mechanism_from_spec(spec: Mapping[str, Any]) -> ReleaseMechanism:
    """The mechanism a release spec names (``mechanism``, ``epsilon``, ``delta``).

    What a node binds again from a program's public description.
    """
    name = spec.get("mechanism")
    if name not in ("laplace", "gaussian"):
        raise InvalidParameterError("release mechanism", "'laplace' or 'gaussian'", name)
    epsilon = float(spec["epsilon"])
    return Laplace(epsilon) if name == "laplace" else Gaussian(epsilon, float(spec["delta"]))
