"""The planner's search: every privacy-feasible configuration worth costing, with its least d.

Every bound the search prunes with is valid, so the answer is the optimum over the σ grid,
every number K of scramblers and every d ≤ ``max_dummies``
(``tests/reference/test_planner_exhaustive.py`` compares it with a brute-force enumeration):

* σ on a 0.01 grid; for scramblers every K in 1..S_t that balanced batches realize
  (K = ⌈S_t/n⌉ for some n; the configuration is named by its largest batch n = ⌈S_t/K⌉).
* The least feasible d is non-decreasing in K (batches shrink, and the pair of a smaller batch
  dominates that of a larger one, `dpcomm.calibration.feasibility`), so the search over K
  starts at the previous K's d, and the one-cluster check at ε and δ (necessary: composing only
  adds loss) gives a floor. δ is non-increasing in d (the pair for d + 1 is a post-processing of
  the pair for d: one more uniform dummy), so the least d is found by galloping and bisection
  (`least_satisfying`).
* Pruning, from the cost model's monotonicity (messages non-decreasing in d, in K at fixed d
  and in S_t; channels non-decreasing in d): a σ whose cheapest scrambler configuration
  (K = 1, d = 0) costs more than the best feasible configuration found so far within the
  limits is skipped; the K loop stops when K with the previous K's d already costs more (every
  K' ≥ K needs at least that d), or when the largest d affordable at K is infeasible (d*(K') ≥
  d*(K) and the affordable d only shrinks with K'); a K whose channels at its floor on d exceed
  the channel limit is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dpcomm.accounting.search import integer_crossing
from dpcomm.calibration.configuration import Configuration
from dpcomm.calibration.costs import (
    PlanCosts,
    costs_for,
    recruited_for,
    scrambler_counts,
    utility_for,
)
from dpcomm.calibration.feasibility import Feasibility
from dpcomm.calibration.request import PlanRequest, SearchOptions
from dpcomm.plan.costs import balanced_batch_sizes
from dpcomm.plan.countermeasures import Countermeasure, LocalFlooding, Scramblers
from dpcomm.progress import with_progress

#: Slack on the utility limit (S_t·p/S computed in floating point).
UTILITY_TOLERANCE = 1e-12


def least_satisfying(
    predicate: Callable[[int], bool],
    *,
    low: int,
    high: int,
    guess: int | None = None,
    high_ok: bool = False,
) -> int | None:
    """Smallest d in [low, high] with ``predicate``, for a predicate monotone in d.

    The caller knows that ``predicate`` is false below ``low`` (and true at ``high`` when
    ``high_ok``). Gallops from ``guess`` (default ``low``) to bracket, then bisects, so that
    the answer passes and the answer − 1 fails or is below ``low``. None if
    ``predicate(high)`` is false.
    """
    if low > high:
        return None
    false_at = low - 1
    true_at: int | None = high if high_ok else None
    start = low if guess is None else min(max(guess, low), high)
    step = 1
    if true_at is not None and start >= true_at:
        pass
    elif predicate(start):
        true_at = start
        while True:
            probe = true_at - step
            if probe <= false_at:
                break
            if predicate(probe):
                true_at = probe
                step *= 2
            else:
                false_at = probe
                break
    else:
        false_at = start
        while True:
            probe = min(high, false_at + step)
            if true_at is not None and probe >= true_at:
                break
            if probe == false_at:
                return None
            if predicate(probe):
                true_at = probe
                break
            false_at = probe
            step *= 2
    assert true_at is not None
    return integer_crossing(predicate, true_at, false_at)


@dataclass(frozen=True)
class Found:
    """A privacy-feasible configuration before costs, for S_t recruited sources.

    Attributes:
        configuration: the countermeasure with its balanced batches for ``num_sources``.
        num_sources: S_t.
    """

    configuration: Configuration
    num_sources: int


def _found(countermeasure: LocalFlooding | Scramblers, recruited: int) -> Found:
    return Found(Configuration.for_sources(countermeasure, num_sources=recruited), recruited)


class _Search:
    """The pruned search of one request (module doc): candidates and the best load so far."""

    def __init__(
        self,
        request: PlanRequest,
        *,
        feasibility: Feasibility,
        batch_sizes: Sequence[int] | None,
        max_dummies: int,
        by_channels: bool = False,
    ) -> None:
        self.request = request
        self.by_channels = by_channels
        self.fewest_channels = math.inf
        self.feasibility = feasibility
        self.batch_sizes = batch_sizes
        self.max_dummies = max_dummies
        self.found: list[Found] = []
        self.best = math.inf  # least load of a candidate within the limits
        self.seeding = False  # basic composition only, to bound the best load (G > 1)
        self._best_sigma = 0.0

    def _messages(self, recruited: int, countermeasure: Countermeasure) -> PlanCosts:
        return costs_for(self.request, countermeasure, recruited)

    def _within(self, costs: PlanCosts) -> bool:
        return self.request.allows_channels(costs.max_channels)

    def _record(self, found: Found) -> None:
        self.found.append(found)
        costs = self._messages(found.num_sources, found.configuration.countermeasure)
        if self.by_channels:
            self.fewest_channels = min(self.fewest_channels, costs.max_channels)
        elif self._within(costs) and costs.messages < self.best:
            self.best = costs.messages
            self._best_sigma = found.configuration.sampling_rate

    def _seed(self, found: Found) -> None:
        """A feasible configuration (basic composition) bounds the best load; not recorded."""
        costs = self._messages(found.num_sources, found.configuration.countermeasure)
        if self._within(costs) and costs.messages < self.best:
            self.best = costs.messages
            self._best_sigma = found.configuration.sampling_rate

    def best_sigma(self) -> float:
        """σ of the least load found so far within the limits (0 if none)."""
        return self._best_sigma

    def local(self, sigma: float, recruited: int) -> None:
        """The least flooding d ≤ T − 1 for R_σ^d (δ non-increasing in d)."""
        check = self.feasibility
        dummies = least_satisfying(
            lambda d: check.local_ok(sigma, d), low=0, high=self.request.num_targets - 1
        )
        if dummies is not None:
            flooding = LocalFlooding(sampling_rate=sigma, num_dummies=dummies)
            self._record(_found(flooding, recruited))

    def _affordable(self, sigma: float, recruited: int, batch: int, low: int) -> int:
        """The largest d ≤ max_dummies whose load at this (σ, n) is at most the best so far."""
        if math.isinf(self.best):
            return self.max_dummies

        def load(d: int) -> int:
            return self._messages(
                recruited, Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=d)
            ).messages

        base = load(low)
        if base > self.best:
            return low - 1
        slope = load(low + 1) - base  # messages are affine in d (each dummy is a message)
        guess = self.max_dummies if slope <= 0 else low + int((self.best - base) // slope)
        guess = min(guess, self.max_dummies)
        if load(guess) <= self.best and (guess == self.max_dummies or load(guess + 1) > self.best):
            return guess
        found = least_satisfying(lambda d: load(d) > self.best, low=low, high=self.max_dummies)
        return self.max_dummies if found is None else found - 1

    def scramblers(self, sigma: float, recruited: int) -> None:
        """Every realized K with its least d, pruned by the best load (module doc)."""
        check = self.feasibility
        counts = scrambler_counts(recruited, self.batch_sizes)
        if not counts:
            return
        first = self._messages(
            recruited,
            Scramblers(sampling_rate=sigma, batch_size=-(-recruited // counts[0]), num_dummies=0),
        )
        if first.messages > self.best:
            return
        free = check.post_processing_ok(sigma)
        low = 0
        position: float | None = None  # where d* fell in its bracket at the previous K
        for count in counts:
            batch = -(-recruited // count)
            batches = sorted(set(balanced_batch_sizes(recruited, batch)))
            at_low = self._messages(
                recruited, Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=low)
            )
            if at_low.messages > self.best:
                break  # every K' >= K needs d >= low: it costs more
            if not self._within(at_low) or at_low.max_channels > self.fewest_channels:
                continue  # channels only grow with d
            if free:
                scramblers = Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=0)
                (self._seed if self.seeding else self._record)(_found(scramblers, recruited))
                continue

            def ok(d: int, batches: Sequence[int] = batches) -> bool:
                return check.scrambler_ok(sigma, batches, d)

            def basic_ok(d: int, batches: Sequence[int] = batches) -> bool:
                return check.scrambler_basic(sigma, batches, d)

            def one_cluster(d: int, smallest: int = batches[0]) -> bool:
                return check.scrambler_one_cluster(sigma, smallest, d)

            floor = low
            if self.request.num_clusters > 1:
                # The one-cluster floor on d is non-decreasing in K too: prune with it.
                found = least_satisfying(one_cluster, low=low, high=self.max_dummies)
                if found is None:
                    break
                floor = found
                at_floor = self._messages(
                    recruited,
                    Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=floor),
                )
                if at_floor.messages > self.best:
                    break
                if not self._within(at_floor) or at_floor.max_channels > self.fewest_channels:
                    continue
            high = self._affordable(sigma, recruited, batch, low)
            if high < low:
                break

            if self.request.num_clusters == 1:
                dummies = least_satisfying(ok, low=low, high=high)
            elif self.seeding:
                dummies = least_satisfying(basic_ok, low=low, high=high)
            else:
                if floor > high:
                    break
                basic = least_satisfying(basic_ok, low=floor, high=high)
                top = high if basic is None else basic
                if basic is None and not ok(high):
                    break
                guess = floor
                if floor > low and position is not None:
                    guess = floor + round(position * (top - floor))
                dummies = least_satisfying(ok, low=floor, high=top, guess=guess, high_ok=True)
                if dummies is not None and top > floor:
                    position = (dummies - floor) / (top - floor)
            if dummies is None:
                break  # d*(K) > the affordable d, which only shrinks with K
            low = dummies
            scramblers = Scramblers(sampling_rate=sigma, batch_size=batch, num_dummies=dummies)
            (self._seed if self.seeding else self._record)(_found(scramblers, recruited))


def search(
    request: PlanRequest,
    options: SearchOptions,
    *,
    progress: bool = False,
    feasibility: Feasibility | None = None,
    by_channels: bool = False,
) -> list[Found]:
    """Every privacy-feasible (mechanism, σ, K) the pruned search evaluates, with its least d.

    ``feasibility`` is the predicate (default: `Feasibility` of ``request`` on the search
    grid). ``by_channels``: prune by channels instead of load, to find the fewest channels that
    any feasible configuration needs (for the advice when the channel limit cannot be met).
    """
    check = Feasibility(request) if feasibility is None else feasibility
    search = _Search(
        request,
        feasibility=check,
        batch_sizes=options.batch_sizes,
        max_dummies=options.max_dummies,
        by_channels=by_channels,
    )
    mechanisms = options.mechanisms
    usable = []
    for sigma in options.sampling_rates:
        recruited = recruited_for(request, sigma)
        if utility_for(request, sigma, recruited) >= request.min_utility - UTILITY_TOLERANCE:
            usable.append((sigma, recruited))
    if "local" in mechanisms:  # cheap: an upper bound on the load before the scramblers
        for sigma, recruited in usable:
            search.local(sigma, recruited)
    if "scrambler" in mechanisms:
        # Coarse σ first (multiples of 0.1), then the others nearest the best σ so far: a good
        # bound early prunes the rest (the order does not change the answer).
        coarse = [item for item in usable if abs(item[0] * 10 - round(item[0] * 10)) < 1e-9]
        rest = [item for item in usable if item not in coarse]
        if request.num_clusters > 1 and not by_channels:
            # Basic composition alone (fast, and an upper bound on the least d) bounds the
            # best load before any PLD is composed; only the bound is kept.
            search.seeding = True
            for sigma, recruited in coarse:
                search.scramblers(sigma, recruited)
            search.seeding = False
        for sigma, recruited in with_progress(
            coarse, enabled=progress, description="planner σ grid", unit="σ"
        ):
            search.scramblers(sigma, recruited)
        centre = search.best_sigma()
        rest.sort(key=lambda item: (abs(item[0] - centre), item[0]))
        for sigma, recruited in with_progress(
            rest, enabled=progress, description="planner σ grid (fine)", unit="σ"
        ):
            search.scramblers(sigma, recruited)
    return search.found
