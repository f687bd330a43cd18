"""An observer of a run's traffic that guesses each source's compute node.

The attacker sees every message's sender and receiver (never contents) and, as differential
privacy allows, knows every *other* source's data: for each source and each data-dependent
flow it guesses the compute node the source's data chose (the grouping value's partition in
an Aggregate, the nearest centroid in a K-means iteration). It is one concrete attacker, the
maximum a posteriori guess under a stated model, not necessarily the optimal one:

* no countermeasure: the receiver of the source's message (accuracy 1);
* local sampling and flooding R_σ^d: P(set S | x) ∝ (d + 1)q + (p − q)·1[x ∈ S] (exact), times
  the prior π(x);
* scramblers: the observer sees the counts c its scrambler sends to each target. With the
  source's own message at y (probability p if y = x, else q) and the rest of the batch R (the
  other sources, whose targets are known, and the d dummies),
  P(c | x) = Σ_y P(own = y | x) P(R = c − e_y). The attacker approximates P(R = ·) by the
  product of R's exact per-target marginals (a convolution of three binomials), so
  P(c | x) ∝ q Σ_y ρ_y + (p − q) ρ_x with ρ_y = f_y(c_y − 1)/f_y(c_y).

The bound beside it is what (ε, δ)-DP allows *any* attacker: see `dp_accuracy_bound`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

from dpcomm.engine.run import Run
from dpcomm.engine.traffic import FlowTraffic
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.transform import (
    flooding_flow_name,
    scrambled_flow_name,
    scrambler_group_name,
    to_scramblers_flow_name,
)
from dpcomm.validation import check_delta


def dp_accuracy_bound(prior: npt.ArrayLike, *, epsilon: float, delta: float) -> float:
    """Largest success probability of any guess of a k-valued secret under (ε, δ)-DP.

    The secret x is drawn from ``prior`` π; the guess g sees M(x), with
    P[M(x) ∈ E] <= e^ε P[M(x') ∈ E] + δ for all x, x', E. With a_x = P[g(M(x)) = x]:
    P[g(M(y)) = x] >= e^{−ε}(a_x − δ) for every y, and Σ_x P[g(M(y)) = x] = 1, so
    a_y + e^{−ε} Σ_{x ≠ y} (a_x − δ)_+ <= 1 for every y. The bound is the maximum of Σ π_x a_x
    over a ∈ [0, 1]^k under these k constraints (a linear programme). For a uniform prior it
    is (e^ε + (k − 1)δ)/(e^ε + k − 1) (sum the k constraints); it never exceeds
    min(1, e^ε π_max + δ).
    """
    weights = np.asarray(prior, dtype=float)
    if weights.ndim != 1 or weights.size == 0 or np.any(weights < 0) or weights.sum() <= 0:
        raise InvalidParameterError("prior", "a 1-D array of non-negative weights", prior)
    if not (isinstance(epsilon, int | float) and epsilon >= 0):
        raise InvalidParameterError("epsilon", "a number >= 0 (or inf)", epsilon)
    delta = check_delta("delta", delta)
    weights = weights / weights.sum()
    k = weights.size
    if math.isinf(epsilon) or k == 1:
        return 1.0
    shrink = math.exp(-epsilon)
    simple = min(1.0, math.exp(epsilon) * float(weights.max()) + delta)
    if np.allclose(weights, 1.0 / k):
        return float(min(1.0, (math.exp(epsilon) + (k - 1) * delta) / (math.exp(epsilon) + k - 1)))
    # Variables (a_1..a_k, b_1..b_k) with b_x >= e^{−ε}(a_x − δ), b_x >= 0.
    cost = np.concatenate([-weights, np.zeros(k)])
    rows = []
    limits = []
    for y in range(k):
        row = np.zeros(2 * k)
        row[y] = 1.0
        row[k:] = 1.0
        row[k + y] = 0.0
        rows.append(row)
        limits.append(1.0)
    for x in range(k):
        row = np.zeros(2 * k)
        row[x] = shrink
        row[k + x] = -1.0
        rows.append(row)
        limits.append(shrink * delta)
    solution = optimize.linprog(
        cost,
        A_ub=np.array(rows),
        b_ub=np.array(limits),
        bounds=[(0.0, 1.0)] * k + [(0.0, None)] * k,
        method="highs",
    )
    if not solution.success:
        return simple
    return float(min(simple, -solution.fun + 1e-12))


class _Guessing:
    """An attacker's accuracy beside the best guess from the prior (its baseline)."""

    accuracy: float
    baseline: float

    @property
    def advantage(self) -> float:
        """Accuracy minus the prior's best guess (for a run, their means over the flows)."""
        return self.accuracy - self.baseline


@dataclass(frozen=True)
class FlowAttack(_Guessing):
    """The attack on one data-dependent flow.

    Attributes:
        flow: the flow's name.
        countermeasure: ``none``, ``local`` or ``scramblers``.
        num_values: k, the number of compute nodes a source may choose.
        num_sources: sources attacked.
        accuracy: share of sources whose compute node was guessed right.
        baseline: share of the most frequent compute node (the best guess from the prior).
        epsilon: the flow's cluster ε at ``delta`` (the accountant's guarantee).
        delta: δ of the cluster.
        bound: `dp_accuracy_bound` for the empirical prior at (ε, δ).
    """

    flow: str
    countermeasure: str
    num_values: int
    num_sources: int
    accuracy: float
    baseline: float
    epsilon: float
    delta: float
    bound: float


@dataclass(frozen=True)
class AttackResult(_Guessing):
    """The attack on every data-dependent flow of a run, and its averages over the flows.

    Attributes:
        flows: per-flow results (one per grouping set, or per K-means iteration).
        accuracy: mean accuracy over the flows.
        baseline: mean baseline.
        bound: mean DP bound (a bound on the mean accuracy, flow by flow).
        epsilon: the largest cluster ε among the flows.
        plan_epsilon: the plan's ε (Theorem 2), which bounds an attacker using every flow.
    """

    flows: tuple[FlowAttack, ...]
    accuracy: float
    baseline: float
    bound: float
    epsilon: float
    plan_epsilon: float


def _true_targets(run: Run) -> dict[str, IntArray]:
    """Every flow's true targets, as the in-memory engine routed them (``true_targets``).

    The attacker knows every other source's data, hence the state each stage was routed under
    (the paper treats it as public output); the in-memory engine records the routes it took.
    """
    routes = run.true_targets
    if routes is None:
        raise InvalidParameterError(
            "run", "a run of the in-memory engine (it records the true targets)", run.engine
        )
    return dict(routes)


def _traffic(run: Run) -> dict[str, FlowTraffic]:
    return {flow.flow: flow for flow in run.edges()}


def _offset(run: Run, group: str) -> int:
    """The first node id of ``group`` in the run's routed plan."""
    return int(run.transformed.routed.node_id_offsets[group])


def _binomial_table(trials: int, probability: float, length: int) -> FloatArray:
    """Row a = pmf of Bin(a, probability) over 0..length − 1, for a = 0..trials."""
    values = np.arange(length)
    table = stats.binom.pmf(values[None, :], np.arange(trials + 1)[:, None], probability)
    return np.asarray(table, dtype=float)


@cache
def _rest_pmf(batch: int, dummies: int, num_targets: int, sampling_rate: float) -> FloatArray:
    """Row a = pmf of the rest's count at a target that a of the other n − 1 sources hold."""
    keep = 1.0 - sampling_rate + sampling_rate / num_targets
    other = sampling_rate / num_targets
    length = batch + dummies + 1
    own = _binomial_table(batch - 1, keep, length)
    rest = _binomial_table(batch - 1, other, length)
    blanket = stats.binom.pmf(np.arange(length), dummies, 1.0 / num_targets)
    table = np.zeros((batch, length))
    for holders in range(batch):
        mixed = np.convolve(own[holders], rest[batch - 1 - holders])[:length]
        table[holders] = np.convolve(mixed, blanket)[:length]
    table.setflags(write=False)
    return table


def _ratio(table: FloatArray, holders: IntArray, counts: IntArray) -> FloatArray:
    """ρ = f(c − 1)/f(c) for the rest's marginal f with ``holders`` known holders."""
    valid = holders >= 0
    safe_holders = np.where(valid, holders, 0)
    length = table.shape[1]
    at = table[safe_holders, np.minimum(counts, length - 1)]
    below = np.where(counts > 0, table[safe_holders, np.maximum(counts - 1, 0)], 0.0)
    ratio = below / np.maximum(at, 1e-300)
    return np.where(valid, np.minimum(ratio, 1e300), 0.0)


def _guess_scramblers(
    run: Run,
    name: str,
    truth: IntArray,
    prior: FloatArray,
    countermeasure: Scramblers,
    num_targets: int,
) -> IntArray:
    traffic = _traffic(run)
    to_scramblers = traffic[to_scramblers_flow_name(name)]
    scrambled = traffic[scrambled_flow_name(name)]
    sender_offset = _offset(run, run.program.plan.flow(name).sender)
    receiver_offset = _offset(run, run.program.plan.flow(name).receiver)
    scrambler_offset = _offset(run, scrambler_group_name(name))
    sources = truth.shape[0]
    # What the observer sees: each source's scrambler, and each scrambler's counts per target.
    scrambler_of = np.empty(sources, dtype=np.int64)
    scrambler_of[to_scramblers.senders - sender_offset] = to_scramblers.receivers - scrambler_offset
    num_scramblers = int(scrambler_of.max()) + 1
    counts = np.zeros((num_scramblers, num_targets), dtype=np.int64)
    np.add.at(
        counts,
        (scrambled.senders - scrambler_offset, scrambled.receivers - receiver_offset),
        scrambled.counts,
    )
    # What the DP adversary knows: every other source's true target.
    holders = np.zeros((num_scramblers, num_targets), dtype=np.int64)
    np.add.at(holders, (scrambler_of, truth), 1)
    sizes = np.bincount(scrambler_of, minlength=num_scramblers)
    sigma, dummies = countermeasure.sampling_rate, countermeasure.num_dummies
    keep = 1.0 - sigma + sigma / num_targets
    other = sigma / num_targets
    guesses = np.empty(sources, dtype=np.int64)
    for size in np.unique(sizes):
        table = _rest_pmf(int(size), dummies, num_targets, sigma)
        members = np.flatnonzero(sizes[scrambler_of] == size)
        mine = scrambler_of[members]
        # The others' counts: the batch's holders minus the attacked source itself.
        known = holders[mine].copy()
        known[np.arange(members.size), truth[members]] -= 1
        rho = _ratio(table, known, counts[mine])
        score = prior[None, :] * (other * rho.sum(axis=1, keepdims=True) + (keep - other) * rho)
        guesses[members] = np.argmax(score, axis=1)
    return guesses


def _guess_local(
    run: Run,
    name: str,
    prior: FloatArray,
    countermeasure: LocalFlooding,
    num_targets: int,
    sources: int,
) -> IntArray:
    traffic = _traffic(run)
    plan = run.program.plan
    sender_offset = _offset(run, plan.flow(name).sender)
    receiver_offset = _offset(run, plan.flow(name).receiver)
    observed = np.zeros((sources, num_targets), dtype=bool)
    for part in (name, flooding_flow_name(name)):
        if part in traffic:
            flow = traffic[part]
            observed[flow.senders - sender_offset, flow.receivers - receiver_offset] = True
    sigma, dummies = countermeasure.sampling_rate, countermeasure.num_dummies
    keep = 1.0 - sigma + sigma / num_targets
    other = sigma / num_targets
    score = prior[None, :] * ((dummies + 1) * other + (keep - other) * observed)
    return np.asarray(np.argmax(score, axis=1), dtype=np.int64)


def _guess_none(run: Run, name: str, sources: int) -> IntArray:
    flow = _traffic(run)[name]
    plan = run.program.plan
    guesses = np.empty(sources, dtype=np.int64)
    guesses[flow.senders - _offset(run, plan.flow(name).sender)] = flow.receivers - _offset(
        run, plan.flow(name).receiver
    )
    return guesses


def attack_run(run: Run) -> AttackResult:
    """Guess every source's compute node in every data-dependent flow of ``run``.

    Flows whose cluster has a single potential target are skipped (nothing to guess).
    """
    truths = _true_targets(run)
    plan = run.program.plan
    results: list[FlowAttack] = []
    privacy = run.privacy
    if privacy is None:
        raise InvalidParameterError("run", "an accounted run (a delta given)", "no guarantee")
    delta = privacy.delta_per_cluster
    for item in privacy.clusters:
        cluster = item.cluster
        if not cluster.data_dependent or cluster.num_targets <= 1:
            continue
        countermeasure = item.countermeasure
        for member in cluster.members:
            name = member.flow.name
            if name not in truths:
                continue
            truth = truths[name]
            num_targets = plan.group(member.flow.receiver).count
            prior = np.bincount(truth, minlength=num_targets) / truth.shape[0]
            if isinstance(countermeasure, Scramblers):
                guesses = _guess_scramblers(run, name, truth, prior, countermeasure, num_targets)
            elif isinstance(countermeasure, LocalFlooding):
                guesses = _guess_local(
                    run, name, prior, countermeasure, num_targets, truth.shape[0]
                )
            else:
                assert isinstance(countermeasure, NoCountermeasure)
                guesses = _guess_none(run, name, truth.shape[0])
            epsilon = float(item.guarantee.epsilon)
            results.append(
                FlowAttack(
                    flow=name,
                    countermeasure=countermeasure.name,
                    num_values=num_targets,
                    num_sources=int(truth.shape[0]),
                    accuracy=float(np.mean(guesses == truth)),
                    baseline=float(prior.max()),
                    epsilon=epsilon,
                    delta=float(item.guarantee.delta),
                    bound=dp_accuracy_bound(prior, epsilon=epsilon, delta=delta),
                )
            )
    if not results:
        raise InvalidParameterError("run", "a run with a data-dependent flow to attack", run)
    return AttackResult(
        flows=tuple(results),
        accuracy=float(np.mean([r.accuracy for r in results])),
        baseline=float(np.mean([r.baseline for r in results])),
        bound=float(np.mean([r.bound for r in results])),
        epsilon=max(r.epsilon for r in results),
        plan_epsilon=float(privacy.guarantee.epsilon),
    )
