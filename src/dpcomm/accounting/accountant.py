"""One accountant for every mechanism and method: dispatch, and choice of the best valid bound.

A query fixes either δ (then every method answers with an ε; δ = 0 asks for pure ε) or ε
(then every method answers with a δ). Each method's answer keeps its status:

* ``valid``: a proven upper bound for the mechanism as implemented (tests check it against
  exhaustive enumeration and the certified lower bound);
* ``estimate``: Monte Carlo, valid only with the stated confidence; never chosen as the answer;
* ``printed``: a formula as printed in the paper that fails the checks; never chosen.

The reported guarantee is the smallest ``valid`` value, with the method that gave it. By
default only the ``valid`` methods run (milliseconds for n, d <= 1,000); the printed formulas
(``all_methods=True``) and the Monte Carlo estimate (``monte_carlo_samples=R``) on request.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from dpcomm._json import json_ready
from dpcomm.accounting import concentration, pure
from dpcomm.accounting.defaults import (
    DEFAULT_MONTE_CARLO_SAMPLES as DEFAULT_MONTE_CARLO_SAMPLES,
    MAX_ROUNDS as MAX_ROUNDS,
    METHOD_NAMES as METHOD_NAMES,
)
from dpcomm.accounting.exact import exact_lemma2
from dpcomm.accounting.guarantee import PrivacyGuarantee
from dpcomm.accounting.lower_bound import (
    CappedLowerBound,
    own_target_lower_bound,
    scrambler_lower_bound,
)
from dpcomm.accounting.mechanisms import (
    GenericLocalRandomizer,
    LocalRandomizer,
    Mechanism,
    ScramblerMechanism,
)
from dpcomm.accounting.search import epsilon_for_delta, lower_epsilon_for_delta
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.validation import check_delta, check_epsilon, check_int, check_seed

Status = Literal["valid", "estimate", "printed"]

#: The accountant enumerates only instances that take well under a second.
_ACCOUNTANT_ENUMERATION_LIMIT = 2_000_000
Query = Literal["epsilon", "delta"]

METHOD_DESCRIPTIONS: dict[str, str] = {
    "theorem-1": "pure ε of R_σ^d, Theorem 1 (local randomizer)",
    "exact": "exact δ(ε) (local randomizer) / Lemma 2 evaluated exactly (scrambler)",
    "post-processing": "the scrambler is a post-processing of one source's R_σ",
    "hoeffding": "Lemma 2 + Hoeffding, Theorem 'main_amplification'",
    "bennett": "Lemma 2 + Bennett (corrected statement)",
    "monte-carlo": "Algorithm 2 as in the paper (R samples per m); an estimate",
    "monte-carlo-upper": "Algorithm 2 with a 99% empirical-Bernstein upper confidence value",
    "enumeration": "exhaustive enumeration of the output distribution (tiny instances)",
    "theorem-exact": "capped scrambler pure ε as printed (invalid for T >= 3)",
    "bennett-printed": "Lemma 3's Bennett bound as printed (invalid)",
    "pld": "privacy loss distribution of a dominating pair, composed (dp_accounting)",
}


@dataclass(frozen=True)
class MethodResult:
    """One method's answer: an ε (for a δ query) or a δ (for an ε query)."""

    name: str
    value: float
    status: Status


@dataclass(frozen=True)
class AccountingReport:
    """Every method's answer for one mechanism and one query, and the best valid one.

    Attributes:
        mechanism: what was accounted.
        query: ``"epsilon"`` (ε asked for, δ fixed) or ``"delta"`` (δ asked for, ε fixed).
        fixed: the fixed δ (epsilon query) or ε (delta query).
        guarantee: the smallest valid bound, as (ε, δ, method).
        lower_bound: a certified lower bound on the same quantity, or None if unavailable.
        methods: every applicable method's answer.
        rounds: R, the number of identical rounds composed (1: one round). With R > 1 every
            single-round method is composed by Theorem 2 (R·ε at δ/R, or R·δ at ε/R) and
            ``pld`` composes the dominating pair's privacy loss distribution.
        notes: why a method is missing (e.g. no PLD for this mechanism or size).
    """

    mechanism: Mechanism
    query: Query
    fixed: float
    guarantee: PrivacyGuarantee
    lower_bound: float | None
    methods: tuple[MethodResult, ...] = field(default_factory=tuple)
    rounds: int = 1
    notes: tuple[str, ...] = ()

    @property
    def value(self) -> float:
        """The reported ε (epsilon query) or δ (delta query)."""
        return self.guarantee.epsilon if self.query == "epsilon" else self.guarantee.delta

    def method_values(self) -> dict[str, float | None]:
        """Every known method name mapped to its value, None where it does not apply.

        None also where a method was not asked for: the printed formulas need
        ``all_methods=True``, the Monte Carlo estimate ``monte_carlo_samples`` > 0.

        The values of ``printed`` methods (``bennett-printed``, ``theorem-exact``: formulas as
        the paper prints them, refuted by enumeration) are not bounds; `methods` holds
        each one's status.
        """
        values: dict[str, float | None] = dict.fromkeys(METHOD_NAMES)
        for result in self.methods:
            values[result.name] = result.value
        return values

    @property
    def method_is_valid_bound(self) -> bool | None:
        """Whether the reported method is a proven bound (None: no such method answered)."""
        return next(
            (r.status == "valid" for r in self.methods if r.name == self.guarantee.method), None
        )

    def why_infinite(self) -> InfiniteExplanation | None:
        """Why the best valid ε is infinite, and the least changes that make it finite.

        None unless ε was asked for one round of a local randomizer or scrambler and every
        valid method answered ∞ (whichever method `report_with_method` shows).
        """
        best = min((r.value for r in self.methods if r.status == "valid"), default=math.inf)
        mechanism = self.mechanism
        if (
            self.query != "epsilon"
            or self.rounds != 1
            or not math.isinf(best)
            or not isinstance(mechanism, LocalRandomizer | ScramblerMechanism)
        ):
            return None
        return explain_infinite(mechanism, delta=self.fixed)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (what ``dpcomm account --json`` prints, one per combination).

        The mechanism's parameters (null where its family has none), the fixed and the asked
        value, the method and whether it is a valid bound, the certified lower bound, every
        method's value and status, and ``why_infinite`` when ε = ∞ (`why_infinite`).
        ∞ is the string ``"inf"``.

        Examples:
            >>> from dpcomm import LocalRandomizer, account
            >>> report = account(LocalRandomizer(num_targets=20, sampling_rate=0.0), delta=1e-4)
            >>> document = report.to_dict()
            >>> document["epsilon"], document["why_infinite"]["changes"][0]["parameter"]
            ('inf', 'sampling_rate')
        """
        mechanism = self.mechanism
        row: dict[str, Any] = {
            "num_targets": getattr(mechanism, "num_targets", None),
            "sampling_rate": getattr(mechanism, "sampling_rate", None),
            "num_dummies": getattr(mechanism, "num_dummies", None),
            "batch_size": getattr(mechanism, "batch_size", None),
            "capped": getattr(mechanism, "capped", None),
        }
        if self.query == "epsilon":
            row["delta"] = self.fixed
            row["epsilon"] = self.guarantee.epsilon
        else:
            row["epsilon"] = self.fixed
            row["delta"] = self.guarantee.delta
        row["rounds"] = self.rounds
        row["method"] = self.guarantee.method
        row["method_is_valid_bound"] = self.method_is_valid_bound
        row["lower_bound"] = self.lower_bound
        row["notes"] = list(self.notes)
        row["methods"] = self.method_values()
        row["method_status"] = {r.name: r.status for r in self.methods}
        why = self.why_infinite()
        if why is not None:
            row["why_infinite"] = {
                "reason": why.reason,
                "changes": [
                    {
                        "parameter": change.parameter,
                        "value": change.value,
                        "epsilon": change.epsilon,
                        "least": change.least,
                    }
                    for change in why.changes
                ],
            }
        ready: dict[str, Any] = json_ready(row)
        return ready


DeltaCurve = Callable[[float], float]


@dataclass(frozen=True)
class _Method:
    name: str
    status: Status
    delta_of_epsilon: DeltaCurve
    epsilon_of_delta: Callable[[float], float] | None = None


def _enumeration_method(mechanism: Mechanism) -> _Method | None:
    """The exhaustive enumeration, when the instance is tiny enough."""
    from dpcomm.accounting import brute_force as enumeration

    try:
        enumeration.check_enumerable(mechanism, limit=_ACCOUNTANT_ENUMERATION_LIMIT)
    except InvalidParameterError:
        return None
    return _Method(
        "enumeration",
        "valid",
        lambda eps: enumeration.exact_delta(mechanism, eps),
        lambda delta: enumeration.exact_epsilon_for_delta(mechanism, delta),
    )


def _scrambler_methods(
    mechanism: ScramblerMechanism, *, printed: bool, monte_carlo_samples: int, seed: int | None
) -> list[_Method]:
    local = mechanism.local_randomizer
    methods = [
        _Method(
            "post-processing",
            "valid",
            lambda eps: pure.local_delta(local, eps),
            lambda delta: pure.local_epsilon_for_delta(local, delta),
        )
    ]
    if mechanism.capped:
        n, d = mechanism.batch_size, mechanism.num_dummies
        if printed and 1 <= d <= n - 1:
            theorem = pure.capped_theorem_epsilon(
                num_targets=mechanism.num_targets,
                lie_rate=local.lie_rate,
                batch_size=n,
                num_dummies=d,
            )
            methods.append(
                _Method(
                    "theorem-exact",
                    "printed",
                    lambda eps: pure.pure_to_delta(theorem, eps),
                    lambda delta: pure.pure_to_epsilon(theorem, delta),
                )
            )
    else:
        exact = exact_lemma2(mechanism)
        methods += [
            _Method("exact", "valid", exact.delta),
            _Method("bennett", "valid", lambda eps: concentration.bennett_delta(mechanism, eps)),
            _Method(
                "hoeffding", "valid", lambda eps: concentration.hoeffding_delta(mechanism, eps)
            ),
        ]
        if printed:
            methods.append(
                _Method(
                    "bennett-printed",
                    "printed",
                    lambda eps: concentration.bennett_printed_delta(mechanism, eps),
                )
            )
        if monte_carlo_samples > 0:
            from dpcomm.accounting.montecarlo import MonteCarloLemma2  # only with --mc-samples

            monte_carlo = MonteCarloLemma2(mechanism, num_samples=monte_carlo_samples, rng=seed)
            methods.append(_Method("monte-carlo", "estimate", monte_carlo.estimate))
            methods.append(_Method("monte-carlo-upper", "estimate", monte_carlo.upper_confidence))
    enumerated = _enumeration_method(mechanism)
    if enumerated is not None:
        methods.append(enumerated)
    return methods


def _methods_for(
    mechanism: Mechanism, *, printed: bool, monte_carlo_samples: int, seed: int | None
) -> list[_Method]:
    """The methods that apply: the valid ones, the printed ones if asked, Monte Carlo if R > 0."""
    if isinstance(mechanism, LocalRandomizer):
        epsilon_pure = pure.local_pure_epsilon(mechanism)
        return [
            _Method(
                "exact",
                "valid",
                lambda eps: pure.local_delta(mechanism, eps),
                lambda delta: pure.local_epsilon_for_delta(mechanism, delta),
            ),
            _Method(
                "theorem-1",
                "valid",
                lambda eps: pure.pure_to_delta(epsilon_pure, eps),
                lambda delta: pure.pure_to_epsilon(epsilon_pure, delta),
            ),
        ]
    if isinstance(mechanism, GenericLocalRandomizer):
        return [_Method("exact", "valid", lambda eps: pure.generic_delta(mechanism, eps))]
    if isinstance(mechanism, ScramblerMechanism):
        return _scrambler_methods(
            mechanism, printed=printed, monte_carlo_samples=monte_carlo_samples, seed=seed
        )
    randomizer = mechanism.randomizer
    methods = [_Method("post-processing", "valid", lambda eps: pure.generic_delta(randomizer, eps))]
    if math.isfinite(randomizer.epsilon0):
        methods += [
            _Method("bennett", "valid", lambda eps: concentration.bennett_delta(mechanism, eps)),
            _Method(
                "hoeffding", "valid", lambda eps: concentration.hoeffding_delta(mechanism, eps)
            ),
        ]
    enumerated = _enumeration_method(mechanism)
    if enumerated is not None:
        methods.append(enumerated)
    return methods


def _search_limit(mechanism: Mechanism) -> float:
    """An ε at which every valid method's δ is 0 if any finite one exists (ε0 of one source)."""
    if isinstance(mechanism, LocalRandomizer):
        return pure.local_pure_epsilon(mechanism)
    if isinstance(mechanism, ScramblerMechanism):
        return pure.local_pure_epsilon(mechanism.local_randomizer)
    if isinstance(mechanism, GenericLocalRandomizer):
        return mechanism.epsilon0
    return mechanism.randomizer.epsilon0


def _lower_bound_curve(mechanism: Mechanism) -> DeltaCurve | None:
    if isinstance(mechanism, LocalRandomizer):
        return lambda eps: pure.local_delta(mechanism, eps)
    if isinstance(mechanism, GenericLocalRandomizer):
        return lambda eps: pure.generic_delta(mechanism, eps)
    if isinstance(mechanism, ScramblerMechanism):
        if mechanism.capped:
            return CappedLowerBound(mechanism).delta
        third = scrambler_lower_bound(mechanism)
        if mechanism.num_targets < 3:  # T = 2: the third-target pair is the own-target one
            return third.delta
        own = own_target_lower_bound(mechanism)
        return lambda eps: max(third.delta(eps), own.delta(eps))
    return None


def _pure_lower_bound(mechanism: Mechanism) -> float | None:
    """A lower bound on pure ε (exact for the uncapped scrambler and the local randomizers)."""
    if isinstance(mechanism, LocalRandomizer):
        return pure.local_pure_epsilon(mechanism)
    if isinstance(mechanism, GenericLocalRandomizer):
        return mechanism.epsilon0
    if isinstance(mechanism, ScramblerMechanism):
        if mechanism.capped:
            return CappedLowerBound(mechanism).pure_epsilon()
        # Others at t and every message on t: the ratio is μ_t(t)/μ_t'(t) = e^ε0 exactly.
        return pure.local_pure_epsilon(mechanism.local_randomizer)
    return None


def _single_round(
    mechanism: Mechanism,
    methods: list[_Method],
    *,
    query: Query,
    fixed: float,
) -> tuple[list[MethodResult], float | None]:
    """Every method's answer for one round at the fixed δ (ε query) or ε (δ query)."""
    results: list[MethodResult] = []
    if query == "delta":
        for method in methods:
            results.append(
                MethodResult(method.name, min(1.0, method.delta_of_epsilon(fixed)), method.status)
            )
        curve = _lower_bound_curve(mechanism)
        return results, None if curve is None else curve(fixed)
    limit = _search_limit(mechanism)
    lower: float | None
    if fixed == 0.0:
        lower = _pure_lower_bound(mechanism)
    else:
        curve = _lower_bound_curve(mechanism)
        lower = None if curve is None else lower_epsilon_for_delta(curve, fixed, upper=limit)
    # The exact method last: the certified lower bound and the best valid ε so far bracket its
    # search (hints that are checked before use, so they only save evaluations).
    best_valid: float | None = None
    for method in sorted(methods, key=lambda m: m.name == "exact"):
        if method.epsilon_of_delta is not None:
            value = method.epsilon_of_delta(fixed)
        else:
            hint = (lower, best_valid) if method.name == "exact" else (None, None)
            value = epsilon_for_delta(method.delta_of_epsilon, fixed, upper=limit, bracket=hint)
        if method.status == "valid" and math.isfinite(value):
            best_valid = value if best_valid is None else min(best_valid, value)
        results.append(MethodResult(method.name, value, method.status))
    return results, lower


def _composed_rounds(
    mechanism: Mechanism,
    methods: list[_Method],
    *,
    query: Query,
    fixed: float,
    rounds: int,
) -> tuple[list[MethodResult], float | None, list[str]]:
    """R rounds: every single-round method by Theorem 2, and the composed PLD.

    Theorem 2 (basic composition): rounds that are each (ε_1, δ/R)-DP are (R·ε_1, δ)-DP
    together, and rounds that are each (ε/R, δ_1)-DP are (ε, R·δ_1)-DP. The PLD of the
    dominating pair composed R times is valid for every ε at once (module
    `dpcomm.accounting.pld`). The lower bound composes explicit pairs.
    """
    from dpcomm.accounting import pld

    notes: list[str] = []
    share = fixed / rounds
    single, _ = _single_round(mechanism, methods, query=query, fixed=share)
    results = [
        MethodResult(
            r.name, min(1.0, rounds * r.value) if query == "delta" else rounds * r.value, r.status
        )
        for r in single
    ]
    lower: float | None
    if query == "epsilon" and fixed == 0.0:
        pure_lower = _pure_lower_bound(mechanism)
        lower = None if pure_lower is None else rounds * pure_lower
        notes.append("pld: not used for pure ε (δ = 0); pure ε adds up exactly")
        return results, lower, notes
    try:
        pair = pld.dominating_pair(mechanism)
    except pld.PairUnavailableError as error:
        notes.append(f"pld: {error}")
    else:
        composed = pld.compose_pairs([pair], counts=[rounds])
        if query == "epsilon":
            value = pld.epsilon_for_delta(composed, fixed)
        else:
            value = min(1.0, float(composed.get_delta_for_epsilon(fixed)))
        results.append(MethodResult("pld", value, "valid"))
    if query == "epsilon":
        lower = pld.composed_lower_epsilon(mechanism, rounds=rounds, delta=fixed)
    else:
        lower = pld.composed_lower_delta(mechanism, rounds=rounds, epsilon=fixed)
    return results, lower, notes


def account(
    mechanism: Mechanism,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    rounds: int = 1,
    all_methods: bool = False,
    monte_carlo_samples: int = 0,
    seed: int | None = 0,
) -> AccountingReport:
    """Account ``mechanism``: ε for a fixed δ (default δ = 0, pure ε), or δ for a fixed ε.

    The default runs the valid methods only: the best valid bound and the certified lower
    bound, in milliseconds for n, d <= 1,000 and in seconds at n = 10^6.

    Args:
        mechanism: any mechanism description of `dpcomm.accounting.mechanisms`.
        delta: the target δ in [0, 1); with ``epsilon`` unset, every method reports its ε.
        epsilon: the target ε >= 0; every method reports its δ. Exclusive with ``delta``.
        rounds: R, identical rounds composed (each source takes part in every round with fresh
            randomness): δ and ε are then the whole composition's.
        all_methods: also evaluate the formulas as printed in the paper (``bennett-printed``,
            ``theorem-exact``: refuted, never chosen), e.g. to compare methods.
        monte_carlo_samples: R of Algorithm 2, an estimate that is never chosen (0, the
            default, skips it; the paper uses 5000; at large n memory limits R).
        seed: seed of the Monte Carlo estimate.

    Examples:
        >>> from dpcomm import LocalRandomizer, account
        >>> report = account(LocalRandomizer(num_targets=20, sampling_rate=0.5, num_dummies=5),
        ...                  delta=1e-4, rounds=4)
        >>> one_round = account(report.mechanism, delta=1e-4 / 4).guarantee.epsilon
        >>> report.guarantee.epsilon < 4 * one_round
        True
        >>> report.lower_bound <= report.guarantee.epsilon
        True
    """
    if not isinstance(mechanism, Mechanism):
        raise InvalidParameterError(
            "mechanism",
            "a LocalRandomizer, ScramblerMechanism, GenericLocalRandomizer or GenericScrambler",
            mechanism,
        )
    if delta is not None and epsilon is not None:
        raise InvalidParameterError("epsilon", "unset when delta is given", epsilon)
    if not isinstance(all_methods, bool):
        raise InvalidParameterError("all_methods", "True or False", all_methods)
    monte_carlo_samples = check_int("monte_carlo_samples", monte_carlo_samples, minimum=0)
    rounds = check_int("rounds", rounds, minimum=1, maximum=MAX_ROUNDS)
    seed = None if seed is None else check_seed(seed)
    methods = _methods_for(
        mechanism, printed=all_methods, monte_carlo_samples=monte_carlo_samples, seed=seed
    )
    query: Query
    if epsilon is not None:
        fixed = check_epsilon("epsilon", epsilon)
        query = "delta"
    else:
        fixed = check_delta("delta", 0.0 if delta is None else delta)
        query = "epsilon"
    notes: list[str] = []
    if rounds == 1:
        results, lower = _single_round(mechanism, methods, query=query, fixed=fixed)
    else:
        results, lower, notes = _composed_rounds(
            mechanism, methods, query=query, fixed=fixed, rounds=rounds
        )
    valid = [r for r in results if r.status == "valid"]
    if not valid:
        raise DpcommError("no valid accounting method applies to this mechanism")
    best = min(valid, key=lambda r: (r.value, METHOD_NAMES.index(r.name)))
    if query == "epsilon":
        guarantee = PrivacyGuarantee(best.value, fixed, best.name)
    else:
        guarantee = PrivacyGuarantee(fixed, best.value, best.name)
    order = {name: index for index, name in enumerate(METHOD_NAMES)}
    ordered = tuple(sorted(results, key=lambda r: order[r.name]))
    return AccountingReport(
        mechanism, query, fixed, guarantee, lower, ordered, rounds=rounds, notes=tuple(notes)
    )


def report_with_method(report: AccountingReport, method: str) -> AccountingReport:
    """The same report with the answer taken from ``method`` (any status) instead of the best."""
    for result in report.methods:
        if result.name == method:
            if report.query == "epsilon":
                guarantee = PrivacyGuarantee(result.value, report.fixed, result.name)
            else:
                guarantee = PrivacyGuarantee(report.fixed, result.value, result.name)
            return AccountingReport(
                report.mechanism,
                report.query,
                report.fixed,
                guarantee,
                report.lower_bound,
                report.methods,
                rounds=report.rounds,
                notes=report.notes,
            )
    available = ", ".join(r.name for r in report.methods)
    raise InvalidParameterError("method", f"one of {available}", method)


# --------------------------------------------------------------------------- ε = ∞

#: Sampling rates tried, smallest first: the least one giving a finite ε is reported.
SAMPLING_GRID: tuple[float, ...] = (0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 0.9, 1.0)
#: Largest number of dummies searched.
MAX_DUMMIES_SEARCHED = 1 << 20


@dataclass(frozen=True)
class FiniteChange:
    """One change of one parameter that makes ε finite.

    Attributes:
        parameter: ``"sampling_rate"`` (σ) or ``"num_dummies"`` (d).
        value: its new value.
        epsilon: the valid ε the accountant gives with it (same δ).
        least: True when no smaller value of the parameter gives a finite ε (d: the exact
            least; σ: the least of `SAMPLING_GRID`, any σ > 0 being finite when
            ``least`` is False).
    """

    parameter: str
    value: float
    epsilon: float
    least: bool

    def describe(self) -> str:
        """One line, e.g. ``"d = 40 dummies (ε = 3.21)"``."""
        if self.parameter == "num_dummies":
            what = f"d = {int(self.value):,} dummies"
        else:
            what = f"σ = {self.value:g}"
        return f"{what} (ε = {self.epsilon:.4g})"


@dataclass(frozen=True)
class InfiniteExplanation:
    """Why ε = ∞, and what would make it finite.

    Attributes:
        reason: one sentence.
        changes: the least change of each parameter found (may be empty).
    """

    reason: str
    changes: tuple[FiniteChange, ...]

    def describe(self) -> str:
        """The reason and the changes, on one line."""
        if not self.changes:
            return self.reason
        options = " or ".join(c.describe() for c in self.changes)
        return f"{self.reason}; the smallest changes that make it finite: {options}"


def _epsilon(mechanism: LocalRandomizer | ScramblerMechanism, delta: float) -> float:
    return account(mechanism, delta=delta, monte_carlo_samples=0).guarantee.epsilon


def _least_dummies(
    mechanism: LocalRandomizer | ScramblerMechanism, delta: float
) -> FiniteChange | None:
    """The least d giving a finite ε, by doubling then bisection.

    Valid because ε can only fall as d grows: one more dummy (uniform, capped, or to a new
    other target under R_σ^d) is a randomized function of the output with d dummies, a
    post-processing.
    """
    upper = (
        mechanism.num_targets - 1 if isinstance(mechanism, LocalRandomizer) else None
    )  # R_σ^d floods at most the T − 1 other targets
    low, high = mechanism.num_dummies, max(1, mechanism.num_dummies * 2)
    found: float | None = None
    while True:
        if upper is not None:
            high = min(high, upper)
        if high > MAX_DUMMIES_SEARCHED:
            return None
        try:
            value = _epsilon(replace(mechanism, num_dummies=high), delta)
        except ValueError:
            return None
        if math.isfinite(value):
            found = value
            break
        if upper is not None and high >= upper:
            return None
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        value = _epsilon(replace(mechanism, num_dummies=middle), delta)
        if math.isfinite(value):
            high, found = middle, value
        else:
            low = middle
    assert found is not None
    return FiniteChange("num_dummies", high, found, True)


def _least_sampling(
    mechanism: LocalRandomizer | ScramblerMechanism, delta: float
) -> FiniteChange | None:
    for rate in SAMPLING_GRID:
        if rate <= mechanism.sampling_rate:
            continue
        value = _epsilon(replace(mechanism, sampling_rate=rate), delta)
        if math.isfinite(value):
            return FiniteChange("sampling_rate", rate, value, rate == SAMPLING_GRID[0])
    return None


@functools.lru_cache(maxsize=256)
def explain_infinite(
    mechanism: LocalRandomizer | ScramblerMechanism, *, delta: float
) -> InfiniteExplanation:
    """Why ``mechanism`` has ε = ∞ at ``delta``, and the least σ and d that make it finite.

    Only for a mechanism whose best valid ε is ∞ (the accountant's answer). A pure function
    of its (frozen) arguments, searched by accounting a few dozen mechanisms (~0.2 s): kept
    for the last 256 asked, since every run of the same plan asks again.
    """
    if isinstance(mechanism, LocalRandomizer):
        reason = (
            f"σ = {mechanism.sampling_rate:g}: a source's message always goes to its own "
            f"target and its {mechanism.num_dummies} dummies to other targets, so an input's "
            "target always receives a message that a neighbouring input's may not"
        )
    else:
        reason = (
            f"σ = {mechanism.sampling_rate:g} and d = {mechanism.num_dummies} dummies per "
            f"scrambler: the counts per target of neighbouring inputs differ by one message "
            f"that the dummies hide with probability below 1 − δ (δ = {delta:g})"
        )
    changes = [
        change
        for change in (_least_sampling(mechanism, delta), _least_dummies(mechanism, delta))
        if change is not None
    ]
    return InfiniteExplanation(reason, tuple(changes))
