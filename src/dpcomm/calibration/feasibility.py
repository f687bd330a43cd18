"""The planner's privacy predicate: whether the whole plan is (ε, δ)-DP with a configuration.

The G (or I) clusters lie on every data path and compose. A configuration is feasible when the
whole plan is (ε, δ)-DP by either of two valid accountings (each an upper bound on the plan's
δ(ε), so meeting either suffices, and their OR is monotone in d when both are):

* basic composition (Theorem 2): every cluster reaches ε/G at δ/G, checked with the exact
  valid accounting the accountant reports: Lemma 2 evaluated exactly (``Lemma2AtEpsilon``,
  equal to ``ExactLemma2``) for every balanced batch size, or post-processing of one source's
  R_σ; the exact δ(ε) of R_σ^d (``pure.local_delta``) for the local randomizer;
* composition of privacy loss distributions (G > 1 only, `dpcomm.accounting.pld`): the
  G-fold composition of the cluster's dominating pair reaches δ at ε. The cluster's pair is
  the Lemma 2 pair of its *smallest* balanced batch, or R_σ's pair (post-processing, valid for
  every n and d), or R_σ^d's for local flooding. The search discretizes losses on a grid of
  `SEARCH_INTERVAL` = 10⁻³, which rounds every loss up to a subset of the 10⁻⁴ grid
  (`dpcomm.accounting.pld.DEFAULT_INTERVAL`), hence dominates the finer PLD: a
  configuration feasible in the search stays feasible at 10⁻⁴, where the chosen one is checked
  again.

Why the smallest batch's pair dominates a cluster of scramblers: scramblers of one cluster see
disjoint sources, so a source's data reaches one of them only, and the other scramblers'
outputs are independent of it (a post-processing): the cluster is dominated by the pair of the
scrambler holding the source, of batch size ⌈S_t/K⌉ or ⌊S_t/K⌋. The smaller batch dominates
the larger: the Lemma 2 pair for n + 1 sources is a post-processing of the pair for n (one more
source that, w.p. σ, adds a uniform draw to the counts and one to the announced m, and
otherwise sends to a fixed target whose count the observer subtracts). Likewise the pair for
d + 1 dummies is a post-processing of the pair for d (add a uniform dummy), which makes δ(ε)
non-increasing in d.

With G = 1 both accountings coincide with the exact one-cluster check (no composition). Checks
are made at ε − 10⁻⁶ so that the accountant's bisections (tolerance 10⁻⁶) report at most ε.

At δ = 0 (a pure plan) the checks are those of pure ε, exactly: R_σ^d is ε0-DP with ε0 its
Theorem 1 value (`pure.local_pure_epsilon`), and G pure clusters compose to G·ε0 (basic
composition, tight for pure DP, so the PLDs add nothing); a scrambler is feasible at δ = 0
only as a post-processing of R_σ, whose pure ε bounds it: the uncapped scrambler's pure ε
equals R_σ's (the accountant's pure lower bound), so Lemma 2, whose tails need δ > 0, is not
used and scramblers with dummies are infeasible at δ = 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, pld, pure
from dpcomm.accounting.exact import Lemma2AtEpsilon, SizeTable
from dpcomm.calibration.configuration import Configuration
from dpcomm.calibration.request import PlanRequest

#: PLD grid of the search; a multiple of `FINAL_INTERVAL`, so it dominates it.
SEARCH_INTERVAL = 1e-3
#: PLD grid the chosen configuration is checked on (dp_accounting's and the accountant's).
FINAL_INTERVAL = pld.DEFAULT_INTERVAL
#: The accountant inverts δ(ε) by bisection to this tolerance; the planner checks ε_c minus it.
EPSILON_MARGIN = 1e-6


def _margin(epsilon: float) -> float:
    """ε minus `EPSILON_MARGIN` (minus ε/2 at most): where the checks are made."""
    return max(0.0, epsilon - min(EPSILON_MARGIN, epsilon / 2))


class Feasibility:
    """The planner's privacy predicate for one request (module doc), with its caches.

    ``interval`` is the PLD grid (`SEARCH_INTERVAL` in the search; the chosen
    configuration is checked again at `FINAL_INTERVAL`).
    """

    def __init__(self, request: PlanRequest, *, interval: float = SEARCH_INTERVAL) -> None:
        self.request = request
        self.interval = interval
        self.pure = request.delta == 0.0
        self.clusters = request.num_clusters
        self.epsilon_check = _margin(request.epsilon)
        self.cluster_epsilon_check = _margin(request.epsilon / self.clusters)
        self.cluster_delta = request.delta / self.clusters
        self.sizes = SizeTable(request.num_targets)
        self._evaluators: dict[tuple[float, float], Lemma2AtEpsilon] = {}
        self._composed: dict[tuple[object, ...], bool] = {}

    def evaluator(self, sampling_rate: float, epsilon: float) -> Lemma2AtEpsilon:
        """Lemma 2 evaluated exactly at one (σ, ε), cached (shared across n and d)."""
        key = (sampling_rate, epsilon)
        found = self._evaluators.get(key)
        if found is None:
            found = Lemma2AtEpsilon(
                num_targets=self.request.num_targets,
                sampling_rate=sampling_rate,
                epsilon=epsilon,
                sizes=self.sizes,
            )
            self._evaluators[key] = found
        return found

    def _composed_ok(
        self, key: tuple[object, ...], make_pld: Callable[[], PrivacyLossDistribution]
    ) -> bool:
        """The G-fold composition of a cluster's PLD has δ ≤ the plan's δ at ε (cached)."""
        found = self._composed.get(key)
        if found is None:
            try:
                one = make_pld()
            except pld.PairUnavailableError:
                found = False  # no pair: basic composition only (still valid)
            else:
                try:
                    composed = pld.compose([one], counts=[self.clusters])
                except ValueError:
                    # dp_accounting cannot compose a PLD whose mass is all at +∞: δ = 1.
                    found = False
                else:
                    delta = float(composed.get_delta_for_epsilon(self.epsilon_check))
                    found = delta <= self.request.delta
            self._composed[key] = found
        return found

    def local_ok(self, sampling_rate: float, num_dummies: int) -> bool:
        """R_σ^d (R_σ for d = 0) meets the plan's (ε, δ) on the G clusters."""
        local = LocalRandomizer(
            num_targets=self.request.num_targets,
            sampling_rate=sampling_rate,
            num_dummies=num_dummies,
        )
        if self.pure:  # G clusters of ε0-DP compose to G·ε0 (module doc)
            return self.clusters * pure.local_pure_epsilon(local) <= self.epsilon_check
        if self.clusters == 1:
            return pure.local_delta(local, self.epsilon_check) <= self.request.delta
        if pure.local_delta(local, self.cluster_epsilon_check) <= self.cluster_delta:
            return True
        if pure.local_delta(local, self.epsilon_check) > self.request.delta:
            return False  # one cluster already misses it, and composing only adds loss
        return self._composed_ok(
            ("local", sampling_rate, num_dummies),
            lambda: pld.local_randomizer_pair(local).pld(interval=self.interval),
        )

    def scrambler_basic(self, sampling_rate: float, batches: Sequence[int], dummies: int) -> bool:
        """Every batch size meets (ε/G, δ/G) by Lemma 2 evaluated exactly (G = 1: (ε, δ)).

        False at δ = 0: there a scrambler is feasible only as a post-processing of R_σ.
        """
        if self.pure:
            return False
        evaluator = self.evaluator(sampling_rate, self.cluster_epsilon_check)
        return all(
            evaluator.delta(batch_size=b, num_dummies=dummies) <= self.cluster_delta
            for b in batches
        )

    def scrambler_one_cluster(self, sampling_rate: float, batch: int, dummies: int) -> bool:
        """Necessary for G > 1: one cluster's pair reaches the plan's δ at ε.

        Composing G clusters only adds loss (the first cluster's output is a post-processing
        of all G), so a configuration whose one cluster misses (ε, δ) is infeasible by the
        PLD check, and a fortiori by basic composition. ``Lemma2AtEpsilon`` is the pair's
        hockey-stick curve plus tail charges below 10⁻²⁸ and a factor 1 + 10⁻⁹; the test
        allows 10⁻⁶ relative for them. False at δ = 0 (`scrambler_basic`).
        """
        if self.pure:
            return False
        evaluator = self.evaluator(sampling_rate, self.epsilon_check)
        value = evaluator.delta(batch_size=batch, num_dummies=dummies)
        return value <= self.request.delta * (1.0 + 1e-6) + 1e-25

    def scrambler_ok(self, sampling_rate: float, batches: Sequence[int], dummies: int) -> bool:
        """The cluster's scramblers meet the plan's target (basic composition or PLDs)."""
        if self.scrambler_basic(sampling_rate, batches, dummies):
            return True
        if self.clusters == 1:
            return False
        if not self.scrambler_one_cluster(sampling_rate, min(batches), dummies):
            return False
        size = self.request.num_targets
        mechanism = ScramblerMechanism(
            num_targets=size,
            sampling_rate=sampling_rate,
            batch_size=min(batches),
            num_dummies=dummies,
        )
        # The PLD of the smallest batch's Lemma 2 pair (module doc), from cached rows.
        return self._composed_ok(
            ("scrambler", sampling_rate, min(batches), dummies),
            lambda: pld.scrambler_pld(mechanism, interval=self.interval),
        )

    def post_processing_ok(self, sampling_rate: float) -> bool:
        """The scrambler's output is a post-processing of one source's R_σ (any n, d)."""
        return self.local_ok(sampling_rate, 0)

    def configuration_ok(self, configuration: Configuration) -> bool:
        """The predicate for a configuration (as the search evaluates it)."""
        sigma, dummies = configuration.sampling_rate, configuration.num_dummies
        if configuration.batch_sizes is None:  # local flooding
            return self.local_ok(sigma, dummies)
        if self.post_processing_ok(sigma):
            return True
        return self.scrambler_ok(sigma, sorted(set(configuration.batch_sizes)), dummies)
