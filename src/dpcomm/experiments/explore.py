"""The numbers of ``dpcomm explore``: one configuration's privacy, costs, utility and attacker.

Every number the explorer shows comes from a function of this module, which only calls the
library (the app draws them; a test compares the page with them and with ``dpcomm.account``):

* `explore`: the best valid ε and the certified lower bound of one round
  (`dpcomm.account`, through `dpcomm.plan.account_cluster`), and of the G grouping
  sets or I iterations composed
  (`dpcomm.plan.account_plan` on the plan `dpcomm.calibration.request_plan` builds,
  the ε ``dpcomm run`` reports); the network load and channels per node from the cost model
  (`dpcomm.calibration.plan_costs`); the expected fraction of tuples used
  (`dpcomm.calibration.expected_utility`);
* `attack`: the traffic-analysis attacker (`dpcomm.experiments.attacker.attack_run`)
  on simulated rounds, beside the success that (ε, δ)-DP allows any attacker
  (`dpcomm.experiments.attacker.dp_accuracy_bound`);
* `tradeoff_front`: the least network load for each ε of a grid, by the planner
  (`dpcomm.calibration.plan_countermeasures`);
* `run_arguments`, `account_arguments` and `python_snippet`: the commands and
  the code that run and account the configuration.

The query panel's run beside DuckDB's exact answer is
`dpcomm.explorer.query.query_against_exact` (it calls the front door, `dpcomm.run_sql`).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism
from dpcomm.calibration.configuration import describe_batches
from dpcomm.calibration.costs import (
    expected_utility,
    nonprivate_load,
    plan_costs,
    recruited_sources,
    request_plan,
)
from dpcomm.data.synthetic import synthetic_sql
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.codec import run_command
from dpcomm.plan.costs import balanced_batch_sizes
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.plan.mechanisms import countermeasure_mechanism
from dpcomm.plan.privacy import account_cluster, account_plan
from dpcomm.validation import MAX_COUNT, check_delta, check_int, check_probability

Workload = Literal["aggregate", "kmeans"]
Mechanism = Literal["scrambler", "local"]

#: The largest G (or I) the explorer composes, and the largest T, n, d and S it takes.
MAX_CLUSTERS = 100
MAX_EXPLORED_SOURCES = 10_000_000
#: Points of the embedded digits (``dpcomm run kmeans`` without ``--dataset``).
EMBEDDED_DIGITS = 4_000


@dataclass(frozen=True, kw_only=True)
class ExplorerSettings:
    """One configuration of the explorer (every control of the page).

    Attributes:
        workload: ``"aggregate"`` (G grouping sets) or ``"kmeans"`` (I iterations, K = T).
        mechanism: ``"scrambler"`` (σ, n, d per scrambler, Section 4) or ``"local"``
            (sampling σ and flooding d per source, Section 3).
        num_targets: T, targets (compute nodes, centroids) per cluster.
        sampling_rate: σ.
        batch_size: n, sources per scrambler (scramblers only).
        num_dummies: d, dummies per scrambler (or per source, local: at most T − 1).
        delta: δ of the whole plan.
        num_clusters: G grouping sets or I iterations, composed.
        num_sources: S, the sources (one tuple each).
    """

    workload: Workload = "aggregate"
    mechanism: Mechanism = "scrambler"
    num_targets: int = 20
    sampling_rate: float = 0.2
    batch_size: int = 100
    num_dummies: int = 50
    delta: float = 1e-4
    num_clusters: int = 1
    num_sources: int = 1000

    def __post_init__(self) -> None:
        if self.workload not in ("aggregate", "kmeans"):
            raise InvalidParameterError("workload", "'aggregate' or 'kmeans'", self.workload)
        if self.mechanism not in ("scrambler", "local"):
            raise InvalidParameterError("mechanism", "'scrambler' or 'local'", self.mechanism)
        targets = check_int("num_targets", self.num_targets, minimum=2, maximum=MAX_COUNT)
        set_field = object.__setattr__
        set_field(self, "num_targets", targets)
        set_field(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        set_field(self, "batch_size", check_int("batch_size", self.batch_size, minimum=1))
        most_dummies = targets - 1 if self.mechanism == "local" else None
        set_field(
            self,
            "num_dummies",
            check_int("num_dummies", self.num_dummies, minimum=0, maximum=most_dummies),
        )
        delta = check_delta("delta", self.delta)
        if delta <= 0.0:
            raise InvalidParameterError("delta", "a number in (0, 1)", self.delta)
        set_field(self, "delta", delta)
        set_field(
            self,
            "num_clusters",
            check_int("num_clusters", self.num_clusters, minimum=1, maximum=MAX_CLUSTERS),
        )
        set_field(
            self,
            "num_sources",
            check_int("num_sources", self.num_sources, minimum=1, maximum=MAX_EXPLORED_SOURCES),
        )

    @property
    def countermeasure(self) -> Scramblers | LocalFlooding:
        """The countermeasure of every data-dependent cluster."""
        if self.mechanism == "scrambler":
            return Scramblers(
                sampling_rate=self.sampling_rate,
                batch_size=self.batch_size,
                num_dummies=self.num_dummies,
            )
        return LocalFlooding(sampling_rate=self.sampling_rate, num_dummies=self.num_dummies)

    @property
    def batch_sizes(self) -> tuple[int, ...] | None:
        """The balanced batches of S sources (`dpcomm.plan.costs.balanced_batch_sizes`)."""
        if self.mechanism != "scrambler":
            return None
        return balanced_batch_sizes(self.num_sources, self.batch_size)

    @property
    def mechanism_of_one_round(self) -> LocalRandomizer | ScramblerMechanism:
        """What one cluster is accounted as: R_σ^d, or A_σ^{n,d} of the smallest batch.

        Scramblers of one cluster see disjoint sources (parallel composition) and the smallest
        balanced batch's guarantee covers the larger ones (the Lemma 2 pair for n + 1 sources is
        a post-processing of the pair for n: `dpcomm.calibration.feasibility`).
        """
        sizes = self.batch_sizes
        smallest = None if sizes is None else min(sizes)
        return countermeasure_mechanism(self.countermeasure, self.num_targets, batch_size=smallest)

    @property
    def cluster_noun(self) -> str:
        """``"grouping set"`` or ``"iteration"``."""
        return "grouping set" if self.workload == "aggregate" else "iteration"


@dataclass(frozen=True)
class Bound:
    """An ε with the method that gave it and a certified lower bound on it (None: unknown)."""

    epsilon: float
    method: str
    lower_bound: float | None


@dataclass(frozen=True)
class ExplorerNumbers:
    """Everything the explorer shows for one configuration (`explore`).

    Attributes:
        settings: the configuration.
        one_round: one cluster at the plan's δ (`dpcomm.account`).
        composed: the whole plan, its G grouping sets or I iterations composed
            (`dpcomm.plan.account_plan`, what ``dpcomm run`` reports).
        network_load_messages: every message of the plan, dummies included (the cost model).
        nonprivate_load_messages: the plan's messages without countermeasures.
        max_channels_per_node: an upper bound on one node's secure channels.
        channels_by_role: that bound per role.
        batches: the balanced batches of one cluster, described (None for local flooding).
        num_scramblers: scramblers of the whole plan (0 for local flooding).
        tuples_used_fraction: expected tuples used / S (1 − σ + σ/T, Section 2.5).
        sources_to_recruit: S_t, the sources that deliver S tuples in expectation.
    """

    settings: ExplorerSettings
    one_round: Bound
    composed: Bound
    network_load_messages: int
    nonprivate_load_messages: int
    max_channels_per_node: int
    channels_by_role: dict[str, int]
    batches: str | None
    num_scramblers: int
    tuples_used_fraction: float
    sources_to_recruit: int

    @property
    def load_overhead(self) -> float:
        """Network load over the non-private load."""
        return self.network_load_messages / self.nonprivate_load_messages


@lru_cache(maxsize=1024)
def explore(settings: ExplorerSettings) -> ExplorerNumbers:
    """The privacy, costs and utility of ``settings`` (module doc), cached.

    One round is the first data-dependent cluster accounted at the plan's δ
    (`dpcomm.plan.account_cluster`: `dpcomm.account` of each balanced batch size,
    the worst one reported, each batch's certified lower bound a lower bound for the cluster);
    with one cluster, the plan's own accounting reuses it.
    """
    shape: dict[str, Any] = {
        "num_sources": settings.num_sources,
        "num_targets": settings.num_targets,
        "workload": settings.workload,
        "num_clusters": settings.num_clusters,
    }
    plan = request_plan(**shape)
    cluster = next(c for c in plan.clusters if c.data_dependent and c.num_targets > 1)
    parts = account_cluster(cluster, settings.countermeasure, delta=settings.delta).parts
    worst = max(parts, key=lambda part: part.guarantee.epsilon)
    lower = [part.lower_bound for part in parts if part.lower_bound is not None]
    one_round = Bound(worst.guarantee.epsilon, worst.guarantee.method, max(lower, default=None))
    privacy = account_plan(plan, settings.countermeasure, delta=settings.delta)
    composed = Bound(privacy.guarantee.epsilon, privacy.guarantee.method, privacy.lower_bound)
    costs = plan_costs(settings.countermeasure, **shape)
    sizes = settings.batch_sizes
    return ExplorerNumbers(
        settings=settings,
        one_round=one_round,
        composed=composed,
        network_load_messages=costs.messages,
        nonprivate_load_messages=nonprivate_load(**shape),
        max_channels_per_node=costs.max_channels,
        channels_by_role=dict(costs.channels_by_role),
        batches=None if sizes is None else describe_batches(sizes),
        num_scramblers=costs.num_scramblers,
        tuples_used_fraction=expected_utility(
            num_sources=settings.num_sources,
            num_targets=settings.num_targets,
            sampling_rate=settings.sampling_rate,
            recruited=settings.num_sources,
        ),
        sources_to_recruit=recruited_sources(
            num_sources=settings.num_sources,
            num_targets=settings.num_targets,
            sampling_rate=settings.sampling_rate,
        ),
    )


# ------------------------------------------------------------------------------ the attacker
#: Simulated rounds the attacker's success is averaged over.
ATTACK_ROUNDS = 4
#: Most sources of a simulated round (a larger S is attacked on this many).
ATTACK_MAX_SOURCES = 20_000


@dataclass(frozen=True)
class AttackEstimate:
    """The attacker's success at guessing a source's compute node, and what DP allows.

    Attributes:
        accuracy: the share of sources whose compute node it guessed, over every round.
        standard_error: the standard error of ``accuracy`` over the rounds.
        baseline: the best guess from the prior alone (the most frequent compute node).
        bound: the most any attacker can achieve under the round's (ε, δ)
            (`dpcomm.experiments.attacker.dp_accuracy_bound`, empirical prior).
        epsilon: the round's ε (its cluster's guarantee at δ).
        delta: δ.
        rounds: simulated rounds.
        sources: sources of each round.
    """

    accuracy: float
    standard_error: float
    baseline: float
    bound: float
    epsilon: float
    delta: float
    rounds: int
    sources: int


@lru_cache(maxsize=16)
def _attack_program(num_sources: int, num_targets: int) -> Any:
    """One grouping set over a uniform synthetic table of S rows, T compute nodes."""
    from dpcomm.data import synthetic_table
    from dpcomm.queries.aggregate import AggregateProgram

    table = synthetic_table(num_rows=num_sources, distribution="uniform", seed=0, name="t")
    sql = synthetic_sql(1)
    assert sql is not None
    return AggregateProgram.from_sql(sql, table, num_targets=num_targets)


@lru_cache(maxsize=256)
def attack(settings: ExplorerSettings, *, rounds: int = ATTACK_ROUNDS) -> AttackEstimate:
    """The attacker on ``rounds`` simulated rounds of one cluster of ``settings`` (cached).

    Each round is one grouping set of T compute nodes over a uniform synthetic table of S
    sources (at most `ATTACK_MAX_SOURCES`), run by the in-memory engine with the
    configuration's countermeasure and seeds 0, 1, ...; the attacker
    (`dpcomm.experiments.attacker.attack_run`) sees all traffic and knows every other
    source's data. Its accuracy is a measurement (it varies from round to round); the bound
    is a guarantee for every attacker.
    """
    from dpcomm.engine import simulate
    from dpcomm.experiments.attacker import attack_run

    rounds = check_int("rounds", rounds, minimum=1, maximum=100)
    sources = min(settings.num_sources, ATTACK_MAX_SOURCES)
    program = _attack_program(sources, settings.num_targets)
    results = [
        attack_run(simulate(program, settings.countermeasure, delta=settings.delta, seed=seed))
        for seed in range(rounds)
    ]
    accuracies = np.array([r.accuracy for r in results])
    spread = float(accuracies.std(ddof=1) / math.sqrt(rounds)) if rounds > 1 else math.nan
    first = results[0]
    return AttackEstimate(
        accuracy=float(accuracies.mean()),
        standard_error=spread,
        baseline=first.baseline,
        bound=first.bound,
        epsilon=first.epsilon,
        delta=settings.delta,
        rounds=rounds,
        sources=sources,
    )


# ------------------------------------------------------------------------ the trade-off front
#: The ε targets of `tradeoff_front`.
FRONT_EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class FrontPoint:
    """The planner's least-load configuration for one target ε (`tradeoff_front`).

    Attributes:
        target_epsilon: the ε asked for.
        epsilon: the plan's ε with the chosen configuration (at most the target).
        network_load_messages: its network load.
        max_channels_per_node: its channels bound.
        utility: expected tuples used / S.
        mechanism: ``"scrambler"`` or ``"local"``.
        sampling_rate: σ.
        batch_size: n, the largest balanced batch (None for local).
        num_dummies: d.
        description: the configuration in words.
    """

    target_epsilon: float
    epsilon: float
    network_load_messages: int
    max_channels_per_node: int
    utility: float
    mechanism: Mechanism
    sampling_rate: float
    batch_size: int | None
    num_dummies: int
    description: str


@lru_cache(maxsize=64)
def tradeoff_front(
    settings: ExplorerSettings,
    *,
    min_utility: float = 0.9,
    epsilons: tuple[float, ...] = FRONT_EPSILONS,
) -> tuple[FrontPoint, ...]:
    """The least network load against ε for the table of ``settings`` (its S, T, G or I, δ).

    For each target ε the planner (`dpcomm.calibration.plan_countermeasures`, exact search
    over σ, the number of scramblers and d) finds the configuration of least load whose whole
    plan is (ε, δ)-DP on the S sources as they are (no extra consent) with an expected fraction
    of tuples used of at least ``min_utility``; targets no configuration meets are left out,
    as are points another point beats in both ε and load. Sorted by ε. The other controls of
    ``settings`` (mechanism, σ, n, d) do not matter. Cached (a point takes up to seconds).
    """
    from dpcomm.calibration import plan_countermeasures

    utility = check_probability("min_utility", min_utility)
    aggregate = settings.workload == "aggregate"
    points: list[FrontPoint] = []
    for target in epsilons:
        try:
            result = plan_countermeasures(
                num_sources=settings.num_sources,
                num_targets=settings.num_targets,
                epsilon=target,
                delta=settings.delta,
                grouping_sets=settings.num_clusters if aggregate else None,
                iterations=None if aggregate else settings.num_clusters,
                max_extra_consents=0,
                min_utility=utility,
            )
        except DpcommError:
            continue  # nothing meets this ε within the limits
        configuration = result.configuration
        sizes = configuration.batch_sizes
        points.append(
            FrontPoint(
                target_epsilon=target,
                epsilon=result.epsilon,
                network_load_messages=result.network_load_messages,
                max_channels_per_node=result.max_channels_per_node,
                utility=result.utility,
                mechanism="local" if configuration.mechanism == "local" else "scrambler",
                sampling_rate=configuration.sampling_rate,
                batch_size=None if sizes is None else max(sizes),
                num_dummies=configuration.num_dummies,
                description=configuration.describe(),
            )
        )
    points.sort(key=lambda p: (p.epsilon, p.network_load_messages))
    front: list[FrontPoint] = []
    for point in points:
        if all(point.network_load_messages < kept.network_load_messages for kept in front):
            front.append(point)
    return tuple(front)


# ------------------------------------------------------------------- commands and snippets
def account_arguments(settings: ExplorerSettings) -> list[str]:
    """The ``dpcomm account`` command that prints one round's and the composed ε (G > 1).

    Its ``--rounds`` composition accounts the smallest balanced batch
    (`ExplorerSettings.mechanism_of_one_round`) G times.
    """
    mechanism = settings.mechanism_of_one_round
    arguments = ["dpcomm", "account", settings.mechanism, "--targets", str(settings.num_targets)]
    arguments += ["--sampling", repr(settings.sampling_rate)]
    if isinstance(mechanism, ScramblerMechanism):
        arguments += ["--batch", str(mechanism.batch_size)]
    arguments += ["--dummies", str(settings.num_dummies), "--delta", repr(settings.delta)]
    if settings.num_clusters > 1:
        arguments += ["--rounds", str(settings.num_clusters)]
    return arguments


def run_arguments(settings: ExplorerSettings, *, seed: int = 1) -> list[str] | None:
    """The ``dpcomm run`` command that runs ``settings`` (None: no embedded data fits it).

    Aggregate: G grouping sets of the synthetic table's columns over S synthetic rows (G at
    most 15); K-means: the first S of the embedded digits (S at most 4,000), K = T.
    """
    options: dict[str, Any] = {
        "num_targets": settings.num_targets,
        "delta": settings.delta,
        "seed": seed,
    }
    if settings.workload == "aggregate":
        sql = synthetic_sql(settings.num_clusters)
        if sql is None:
            return None
        return run_command(
            "aggregate",
            settings.countermeasure,
            synthetic=settings.num_sources,
            sql=sql,
            **options,
        )
    if settings.num_sources > EMBEDDED_DIGITS:
        return None
    return run_command(
        "kmeans",
        settings.countermeasure,
        sources=settings.num_sources,
        iterations=settings.num_clusters,
        **options,
    )


def command_lines(settings: ExplorerSettings) -> str:
    """The ``dpcomm account`` and ``dpcomm run`` commands of ``settings``, one per line."""
    lines = [shlex.join(account_arguments(settings))]
    run = run_arguments(settings)
    if run is not None:
        lines.append(shlex.join(run))
    return "\n".join(lines)


def python_snippet(settings: ExplorerSettings, *, seed: int = 1) -> str:
    """Python that accounts and runs ``settings`` with the front door (what the page shows)."""
    mechanism = settings.mechanism_of_one_round
    if isinstance(mechanism, ScramblerMechanism):
        accounted = (
            f"dpcomm.ScramblerMechanism(num_targets={settings.num_targets}, "
            f"sampling_rate={settings.sampling_rate!r}, batch_size={mechanism.batch_size}, "
            f"num_dummies={settings.num_dummies})"
        )
        countermeasure = (
            f"dpcomm.Scramblers(sampling_rate={settings.sampling_rate!r}, "
            f"batch_size={settings.batch_size}, num_dummies={settings.num_dummies})"
        )
    else:
        accounted = (
            f"dpcomm.LocalRandomizer(num_targets={settings.num_targets}, "
            f"sampling_rate={settings.sampling_rate!r}, num_dummies={settings.num_dummies})"
        )
        countermeasure = (
            f"dpcomm.LocalFlooding(sampling_rate={settings.sampling_rate!r}, "
            f"num_dummies={settings.num_dummies})"
        )
    rounds = f", rounds={settings.num_clusters}" if settings.num_clusters > 1 else ""
    lines = [
        "import dpcomm",
        "from dpcomm import datasets",
        "",
        f"report = dpcomm.account({accounted}, delta={settings.delta!r}{rounds})",
        "print(report.guarantee.epsilon, report.lower_bound)",
        "",
        f"countermeasure = {countermeasure}",
    ]
    sql = synthetic_sql(settings.num_clusters) if settings.workload == "aggregate" else None
    if sql is not None:
        lines += [
            f"table = datasets.synthetic(rows={settings.num_sources}, seed=0)",
            "run = dpcomm.run_sql(",
            f"    {sql!r},",
            "    table,",
            "    countermeasure=countermeasure,",
            f"    num_targets={settings.num_targets},",
            f"    delta={settings.delta!r},",
            f"    seed={seed},",
            ")",
            "print(run.report.privacy.epsilon, run.result)",
        ]
    elif settings.workload == "kmeans" and settings.num_sources <= EMBEDDED_DIGITS:
        lines += [
            "digits = datasets.mnist5k()",
            "run = dpcomm.kmeans(",
            f"    digits.points[:{settings.num_sources}],",
            f"    k={settings.num_targets},",
            f"    iterations={settings.num_clusters},",
            "    countermeasure=countermeasure,",
            f"    delta={settings.delta!r},",
            f"    seed={seed},",
            ")",
            "print(run.report.privacy.epsilon, run.centroids.shape)",
        ]
    return "\n".join(lines) + "\n"
