"""The headline table: dummies needed for ε ≤ 1 in the paper's scenario, per accounting method.

Scenario (Section 5.2, Table 1): S = 10,000 tuples used, T = 20 targets (compute nodes),
δ = 1e-4, uncapped scramblers of at most n = 100 sources with sampling σ = 0.2, one cluster
(G = 1). Keeping 10,000 tuples in expectation takes S_t = ⌈S/(1 − σ + σ/T)⌉ = 12,346 sources,
cut into ⌈S_t/n⌉ = 124 balanced batches (70 of 100 sources, 54 of 99:
`dpcomm.plan.costs.balanced_batch_sizes`); the cluster sends the messages of the
transformed plan, 2·S_t + SC·d + C (`dpcomm.calibration.plan_costs`), against
S + C without countermeasures.

For each accounting method the table gives the least d with δ(ε = 1) ≤ 1e-4 for every batch
size (Lemma 2's bound is non-increasing in d; bisection). Monte Carlo (Algorithm 2) is an
estimate, not a guarantee; post-processing needs no amplification and never reaches ε ≤ 1 here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, pure
from dpcomm.accounting.concentration import bennett_delta, hoeffding_delta
from dpcomm.accounting.exact import ExactLemma2
from dpcomm.accounting.montecarlo import MonteCarloLemma2
from dpcomm.accounting.search import integer_crossing
from dpcomm.calibration import describe_batches, nonprivate_load, plan_costs, recruited_sources
from dpcomm.plan.costs import balanced_batch_sizes
from dpcomm.plan.countermeasures import Scramblers
from dpcomm.plan.mechanisms import countermeasure_mechanism

#: The paper's scenario (Section 5.2, Table 1).
NUM_SOURCES = 10_000
NUM_TARGETS = 20
DELTA = 1e-4
EPSILON = 1.0
BATCH_SIZE = 100
SAMPLING_RATE = 0.2
#: Largest d searched.
MAX_DUMMIES = 100_000


@dataclass(frozen=True, kw_only=True)
class HeadlineRow:
    """One accounting method's answer for the scenario.

    Attributes:
        method: the accountant's method name.
        label: what it is, for the table.
        status: ``valid`` (a proven bound) or ``estimate`` (Monte Carlo).
        num_dummies: least d per scrambler for ε ≤ 1 (None: unreachable for any d).
        num_scramblers: SC = ⌈S_t/n⌉.
        num_sources: S_t recruited.
        messages: 2·S_t + SC·d + C for one cluster (None if unreachable).
        nonprivate_messages: S + C.
        note: what a reader should know.
        scenario: (S, T, n, σ, ε, δ) the row was computed for.
        batch_sizes: the balanced batch sizes of the SC scramblers, largest first.
    """

    method: str
    label: str
    status: str
    num_dummies: int | None
    num_scramblers: int
    num_sources: int
    messages: int | None
    nonprivate_messages: int
    note: str = ""
    scenario: tuple[int, int, int, float, float, float] = (
        NUM_SOURCES,
        NUM_TARGETS,
        BATCH_SIZE,
        SAMPLING_RATE,
        EPSILON,
        DELTA,
    )
    batch_sizes: tuple[int, ...] = ()

    @property
    def overhead(self) -> float | None:
        """Messages / (S + C)."""
        if self.messages is None:
            return None
        return self.messages / self.nonprivate_messages


def _least(delta_of: Callable[[int], float], target: float, maximum: int) -> int | None:
    """Least d in [0, maximum] with delta_of(d) <= target (bisection; None if none)."""
    if delta_of(0) <= target:
        return 0
    high = 1
    while delta_of(high) > target:
        if high >= maximum:
            return None
        high = min(maximum, 2 * high)
    return integer_crossing(lambda d: delta_of(d) <= target, high, high // 2)


@dataclass(frozen=True, kw_only=True)
class _Scenario:
    """One table's scenario: (S, T, n, σ, ε, δ), its S_t sources and their balanced batches."""

    num_sources: int
    num_targets: int
    batch_size: int
    sampling_rate: float
    epsilon: float
    delta: float
    recruited: int = field(init=False)
    batches: tuple[int, ...] = field(init=False)
    nonprivate: int = field(init=False)

    def __post_init__(self) -> None:
        """S_t = ⌈S/(1 − σ + σ/T)⌉ and its batches of at most n."""
        recruited = recruited_sources(
            num_sources=self.num_sources,
            num_targets=self.num_targets,
            sampling_rate=self.sampling_rate,
        )
        nonprivate = nonprivate_load(
            num_sources=self.num_sources,
            num_targets=self.num_targets,
            workload="aggregate",
            num_clusters=1,
        )
        object.__setattr__(self, "recruited", recruited)
        object.__setattr__(self, "batches", balanced_batch_sizes(recruited, self.batch_size))
        object.__setattr__(self, "nonprivate", nonprivate)

    def cluster_delta(
        self, delta_of: Callable[[ScramblerMechanism], float]
    ) -> Callable[[int], float]:
        """δ of the cluster at d: the largest over its batch sizes."""
        sizes = sorted(set(self.batches), reverse=True)
        targets = self.num_targets

        def delta_at(dummies: int) -> float:
            scramblers = self.scramblers(dummies)
            return max(
                delta_of(countermeasure_mechanism(scramblers, targets, batch_size=batch))
                for batch in sizes
            )

        return delta_at

    def scramblers(self, dummies: int) -> Scramblers:
        """The scenario's scramblers with ``dummies`` per scrambler."""
        return Scramblers(
            sampling_rate=self.sampling_rate, batch_size=self.batch_size, num_dummies=dummies
        )

    def messages(self, dummies: int) -> int:
        """2·S_t + SC·d + C: the messages of one cluster with ``dummies`` per scrambler."""
        return plan_costs(
            self.scramblers(dummies),
            num_sources=self.recruited,
            num_targets=self.num_targets,
            workload="aggregate",
            num_clusters=1,
        ).messages

    def row(
        self, method: str, label: str, status: str, dummies: int | None, note: str
    ) -> HeadlineRow:
        """The row of a method that needs ``dummies`` per scrambler (None: unreachable)."""
        return HeadlineRow(
            method=method,
            label=label,
            status=status,
            num_dummies=dummies,
            num_scramblers=len(self.batches),
            num_sources=self.recruited,
            messages=None if dummies is None else self.messages(dummies),
            nonprivate_messages=self.nonprivate,
            note=note,
            scenario=(
                self.num_sources,
                self.num_targets,
                self.batch_size,
                self.sampling_rate,
                self.epsilon,
                self.delta,
            ),
            batch_sizes=self.batches,
        )


def _methods(
    scenario: _Scenario, *, monte_carlo_samples: int, seed: int
) -> list[tuple[str, str, str, Callable[[int], float], str]]:
    """Each amplifying method: name, label, status, the cluster's δ at d, and a note."""
    epsilon = scenario.epsilon

    def monte_carlo(one: ScramblerMechanism) -> float:
        estimator = MonteCarloLemma2(one, num_samples=monte_carlo_samples, rng=seed)
        return estimator.estimate(epsilon)

    return [
        (
            "exact",
            "exact (Lemma 2 evaluated exactly)",
            "valid",
            scenario.cluster_delta(lambda one: ExactLemma2(one).delta(epsilon)),
            "the quantity Algorithm 2 estimates, computed exactly",
        ),
        (
            "bennett",
            "Bennett, corrected statement",
            "valid",
            scenario.cluster_delta(lambda one: bennett_delta(one, epsilon)),
            "",
        ),
        (
            "hoeffding",
            "Hoeffding (Theorem main_amplification)",
            "valid",
            scenario.cluster_delta(lambda one: hoeffding_delta(one, epsilon)),
            "",
        ),
        (
            "monte-carlo",
            f"Monte Carlo, Algorithm 2 (R = {monte_carlo_samples})",
            "estimate",
            scenario.cluster_delta(monte_carlo),
            "an estimate, not a guarantee (seeded; not monotone in d in general)",
        ),
    ]


def _post_processing_row(scenario: _Scenario) -> HeadlineRow:
    """R_σ's own guarantee, with no amplification: d = 0 if it meets (ε, δ), else none."""
    local = LocalRandomizer(num_targets=scenario.num_targets, sampling_rate=scenario.sampling_rate)
    delta = scenario.delta
    reachable = pure.local_delta(local, scenario.epsilon) <= delta
    floor = pure.local_epsilon_for_delta(local, delta)
    return scenario.row(
        "post-processing",
        "post-processing of R_σ (no amplification)",
        "valid",
        0 if reachable else None,
        "" if reachable else f"unreachable: ε = {floor:.2f} at δ = {delta:g} for any d",
    )


def headline_rows(
    *,
    num_sources: int = NUM_SOURCES,
    num_targets: int = NUM_TARGETS,
    epsilon: float = EPSILON,
    delta: float = DELTA,
    batch_size: int = BATCH_SIZE,
    sampling_rate: float = SAMPLING_RATE,
    monte_carlo_samples: int = 5000,
    seed: int = 0,
) -> tuple[HeadlineRow, ...]:
    """The table's rows: least d per scrambler for (ε, δ), per accounting method.

    Defaults are the paper's scenario (module docstring). Every method bounds (or, for
    Monte Carlo, estimates) Lemma 2 of App. E for one scrambler of each balanced batch size
    (docs/accounting.md); d must reach δ for every size.
    """
    scenario = _Scenario(
        num_sources=num_sources,
        num_targets=num_targets,
        batch_size=batch_size,
        sampling_rate=sampling_rate,
        epsilon=epsilon,
        delta=delta,
    )
    rows = [
        scenario.row(name, label, status, _least(curve, delta, MAX_DUMMIES), note)
        for name, label, status, curve, note in _methods(
            scenario, monte_carlo_samples=monte_carlo_samples, seed=seed
        )
    ]
    rows.append(_post_processing_row(scenario))
    return tuple(rows)


def headline_markdown(rows: tuple[HeadlineRow, ...]) -> str:
    """The rows as a Markdown table, with the scenario in a caption line."""
    first = rows[0]
    tuples, targets, batch, sigma, epsilon, delta = first.scenario
    lines = [
        f"Scenario: {tuples:,} tuples used, T = {targets}, δ = {delta:g}, ε ≤ {epsilon:g}, "
        f"scramblers n = {batch}, σ = {sigma:g}; {first.num_sources:,} sources in "
        f"{describe_batches(first.batch_sizes)}; non-private: {first.nonprivate_messages:,} "
        "messages (S + C).",
        "",
        "| accounting method | status | dummies d per scrambler | scramblers | messages "
        "(one cluster) | overhead vs non-private | note |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        dummies = "unreachable" if row.num_dummies is None else f"{row.num_dummies:,}"
        messages = "—" if row.messages is None else f"{row.messages:,}"
        overhead = "—" if row.overhead is None else f"×{row.overhead:.2f}"
        lines.append(
            f"| {row.label} | {row.status} | {dummies} | {row.num_scramblers} | {messages} | "
            f"{overhead} | {row.note} |"
        )
    return "\n".join(lines)
