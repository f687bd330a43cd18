"""A run as one job, prepared once: the plan, the one guarantee, the charge.

A [`Job`][] is what a run is asked to do (program, countermeasures, δ, target ε, budget,
engine, seed). [`prepare`][] turns it, before anything runs, into a [`Prepared`][]: the
transformed plan and the plan's guarantee (`dpcomm.engine.run.prepare`, which every engine
also uses), the [`Guarantee`][] of the whole mechanism (traffic, noisy release, their
composition, a deployment's worst case) and the budget's charge. The target check, a
calibration's check and the budget read that one guarantee; the engines execute the
prepared plan and the report reads the guarantee from it, so nothing computes it twice and
nothing can disagree with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from dpcomm.engine.engines import Engine
from dpcomm.engine.run import Prepared as PreparedPlan, prepare as prepare_plan
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasures, shares_blanket
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.queries.program import QueryProgram
from dpcomm.release.compose import ReleaseComposition, compose_release

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.budget.ledger import Charge
    from dpcomm.pipeline.charge import ChargedGuarantee
    from dpcomm.plan.model import ExecutionPlan
    from dpcomm.queries.aggregate import AggregateProgram
    from dpcomm.queries.kmeans import KMeansProgram
    from dpcomm.release.mechanisms import ReleaseMechanism

Workload = Literal["aggregate", "kmeans"]


@dataclass(frozen=True)
class ReleaseSpec:
    """A noisy release as asked for, validated once.

    Attributes:
        mechanism: ``dpcomm.Laplace(ε2)`` or ``dpcomm.Gaussian(ε2, δ2)``.
        bounds: each column a SUM or AVG reads, clamped to (lo, hi) on each source's row.
        keys: public key domains of grouping columns (every key released, absent ones too).
        key_selection_delta: δ_sel of the DP key selection of grouping sets without a
            domain (None: every grouping set needs one).
        consistent_totals: publish totals consistent across grouping sets
            (`dpcomm.release.postprocess`).
    """

    mechanism: ReleaseMechanism
    bounds: Mapping[str, tuple[float, float]] | None = None
    keys: Mapping[str, Sequence[Any]] | None = None
    key_selection_delta: float | None = None
    consistent_totals: bool = False

    def __post_init__(self) -> None:
        from dpcomm.release.mechanisms import Gaussian, Laplace, check_key_selection_delta

        if not isinstance(self.mechanism, Laplace | Gaussian):
            raise InvalidParameterError(
                "release", "dpcomm.Laplace(epsilon) or dpcomm.Gaussian(epsilon, delta)", None
            )
        if self.key_selection_delta is not None:
            check_key_selection_delta(self.key_selection_delta)
        if not isinstance(self.consistent_totals, bool):
            raise InvalidParameterError(
                "consistent_totals", "True or False", self.consistent_totals
            )

    @staticmethod
    def of(
        release: object,
        *,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Sequence[Any]] | None = None,
        key_selection_delta: float | None = None,
        consistent_totals: bool = False,
    ) -> ReleaseSpec | None:
        """The release asked for, or None; bounds, keys, δ_sel or totals without one refused."""
        from dpcomm.release.mechanisms import Gaussian, Laplace

        if release is None:
            if (
                bounds is not None
                or keys is not None
                or key_selection_delta is not None
                or consistent_totals is not False
            ):
                raise InvalidParameterError(
                    "release",
                    "Laplace(...) or Gaussian(...) when bounds, keys, key_selection_delta or "
                    "consistent_totals are given",
                    None,
                )
            return None
        if not isinstance(release, Laplace | Gaussian):
            raise InvalidParameterError(
                "release",
                "None, dpcomm.Laplace(epsilon) or dpcomm.Gaussian(epsilon, delta)",
                release,
            )
        return ReleaseSpec(release, bounds, keys, key_selection_delta, consistent_totals)

    def bind(
        self, program: AggregateProgram, countermeasure: Countermeasures | None
    ) -> AggregateProgram:
        """``program``, compiled with this release's ``bounds``, with the release bound.

        The second step of `compile_aggregate` (`dpcomm.release.noise.with_release`), for
        whoever keeps a compiled query and binds releases to it again; the sensitivities
        are those of ``countermeasure``.
        """
        from dpcomm.release.noise import with_release

        return with_release(
            program,
            self.mechanism,
            self.keys,
            key_selection_delta=self.key_selection_delta,
            countermeasure=countermeasure,
            consistent_totals=self.consistent_totals,
        )


def compile_aggregate(
    sql: str,
    data: Any,
    *,
    release: ReleaseSpec | None,
    countermeasure: Countermeasures | None,
    **shape: Any,
) -> AggregateProgram:
    """``sql`` compiled over ``data`` with ``shape`` (T, public bounds), its release bound.

    The release's sensitivities are those of ``countermeasure``
    ([`dpcomm.release.noise.noisy_program`][]).
    """
    from dpcomm.release.noise import noisy_program

    if release is None:
        return noisy_program(sql, data, release=None, **shape)
    return noisy_program(
        sql,
        data,
        release=release.mechanism,
        bounds=release.bounds,
        keys=release.keys,
        key_selection_delta=release.key_selection_delta,
        consistent_totals=release.consistent_totals,
        countermeasure=countermeasure,
        **shape,
    )


def with_kmeans_release(
    program: KMeansProgram,
    release: object,
    bounds: object,
    countermeasure: Countermeasures,
    columns: Sequence[str] | None,
) -> KMeansProgram:
    """``program`` with its noisy release bound (None: exact centroids, no bounds allowed).

    ``bounds``: one (lo, hi) per coordinate; ``columns`` name them in the release's report.
    The sensitivities are those of ``countermeasure``'s joint view
    (`dpcomm.release.kmeans.bind_kmeans_release`), as `compile_aggregate` binds a query's.
    """
    from dpcomm.release.kmeans import bind_kmeans_release
    from dpcomm.release.mechanisms import Gaussian, Laplace

    if release is None:
        if bounds is not None:
            raise InvalidParameterError(
                "release", "Laplace(...) or Gaussian(...) with bounds", None
            )
        return program
    if not isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError(
            "release", "None, dpcomm.Laplace(epsilon) or dpcomm.Gaussian(epsilon, delta)", release
        )
    if bounds is None:
        raise InvalidParameterError(
            "bounds", f"{program.dimension} public (lo, hi) pairs, one per column", None
        )
    bound = bind_kmeans_release(
        release,
        bounds,
        dimension=program.dimension,
        num_iterations=program.num_iterations,
        shared_blanket=shares_blanket(countermeasure),
        columns=columns,
    )
    return replace(program, release=bound)


#: Engines a budget can charge before they run: each reports a guarantee known beforehand
#: (a deployment's at worst: `dpcomm.pipeline.charge.deployment_privacy`).
BUDGET_ENGINES = ("memory", "dask", "network")


def check_budget(budget: object, engine: Engine) -> Budget | None:
    """``budget``: None or a `dpcomm.budget.Budget`, on an engine it can charge."""
    if budget is None:
        return None
    from dpcomm.budget.budget import Budget

    if not isinstance(budget, Budget):
        raise InvalidParameterError("budget", "None or a dpcomm.Budget(...)", budget)
    if engine.name not in BUDGET_ENGINES:
        raise InvalidParameterError(
            "engine", "'memory', 'dask' or 'network' with a budget", engine.name
        )
    return budget


class PlanCheck(Protocol):
    """What a calibration checks of the plan a run is given (`dpcomm.Calibration`)."""

    def check_plan(self, plan: ExecutionPlan, *, workload: Workload, delta: float) -> None:
        """Refuse a plan the calibration's countermeasure misses its target on."""
        ...


@dataclass(frozen=True, eq=False)
class Job:
    """One run, as asked for: what runs, how it is protected, what it may spend.

    Attributes:
        program: the compiled query (Aggregate, with its release if any, or K-means).
        countermeasures: one countermeasure, or one per cluster.
        delta: the whole plan's δ.
        engine: the engine that executes it.
        kind: ``aggregate`` or ``kmeans`` (a ledger's record).
        query: the query as the analyst wrote it (a ledger's record).
        seed: the run's seed (None: fresh entropy).
        progress: show a progress bar.
        target_epsilon: refuse, before anything runs, a guarantee above it.
        budget: charged the guarantee before anything runs.
        calibration: a calibration whose countermeasure runs (its plan is checked).
        estimate: ``delivered`` or ``unbiased`` (an Aggregate's result).
    """

    program: QueryProgram
    countermeasures: Countermeasures
    delta: float
    engine: Engine
    kind: Workload
    query: str
    seed: int | None = None
    progress: bool = False
    target_epsilon: float | None = None
    budget: Budget | None = None
    calibration: PlanCheck | None = None
    estimate: str = "delivered"


@dataclass(frozen=True)
class Guarantee:
    """The guarantee of a whole run, computed once before it runs.

    Attributes:
        traffic: the plan's guarantee at δ (Theorem 2 and beyond): what an observer of the
            traffic learns, as the engine's run reports it.
        release: the traffic and the noisy release composed (None without a release): what
            an observer of both learns.
        deployment: for a deployed round, the weakest guarantee its batches can report
            whatever nodes are late (`dpcomm.pipeline.charge.deployment_privacy`), computed
            only where a budget is charged for it; None otherwise.
        noises: the release's noises and quantiles (`dpcomm.release.noise.Release.charged`;
            empty without a release).
    """

    traffic: PlanGuarantee
    release: ReleaseComposition | None = None
    deployment: PlanGuarantee | None = None
    noises: tuple[Any, ...] = ()

    @property
    def epsilon(self) -> float:
        """The ε reported against an observer of everything (traffic and release)."""
        return self.traffic.guarantee.epsilon if self.release is None else self.release.epsilon

    @property
    def delta(self) -> float:
        """The δ of `epsilon`."""
        return self.traffic.guarantee.delta if self.release is None else self.release.delta

    def check_target(self, target_epsilon: float | None) -> None:
        """Refuse, before anything runs, a guarantee whose ε exceeds ``target_epsilon``.

        The traffic's own ε is checked by `dpcomm.engine.run.prepare`; here the ε against an
        observer of traffic and release: an [`InvalidParameterError`][] naming
        ``target_epsilon``.
        """
        if target_epsilon is None or self.release is None or self.epsilon <= target_epsilon:
            return
        raise InvalidParameterError(
            "target_epsilon",
            f"at least the ε = {self.epsilon:.6g} at δ = {self.delta:g} of traffic and release "
            "together (nothing ran)",
            target_epsilon,
        )

    def check_reported(self, charged: ChargedGuarantee | None, reported: PlanGuarantee) -> None:
        """Check that a run reported no more than what its budget was charged for.

        ``reported`` is the run's traffic guarantee (a deployment's, for the batches as they
        ran); with a release, it is composed with the release again only if it differs.
        """
        if charged is None:
            return
        epsilon, delta = reported.guarantee.epsilon, reported.guarantee.delta
        if self.release is not None:
            both = self.release if reported is self.traffic else self.composed_with(reported)
            epsilon, delta = both.epsilon, both.delta
        if epsilon > charged.reported_epsilon or delta > charged.reported_delta:
            raise DpcommError(
                f"the run reports ε = {epsilon:.6g}, δ = {delta:.3g}, more than the "
                f"ε = {charged.reported_epsilon:.6g}, δ = {charged.reported_delta:.3g} "
                "accounted when its budget was charged before it ran"
            )

    def composed_with(self, traffic: PlanGuarantee) -> ReleaseComposition:
        """The release composed with another traffic guarantee (a round's actual batches)."""
        if self.release is None:
            raise InvalidParameterError("release", "a run with a noisy release", None)
        if traffic is self.traffic:
            return self.release
        return compose_release(traffic, self.noises)


@dataclass(frozen=True, eq=False)
class Prepared:
    """A job prepared: its plan, its one guarantee and its charge, each computed once.

    Attributes:
        job: the job.
        plan: the transformed plan and the traffic's guarantee, as every engine executes it.
        guarantee: the whole run's guarantee.
        charged: what the budget was charged (None without a budget).
        charge: the ledger's record of it (None without a budget).
    """

    job: Job
    plan: PreparedPlan
    guarantee: Guarantee
    charged: ChargedGuarantee | None = None
    charge: Charge | None = None


def _release_noises(program: QueryProgram) -> tuple[Any, ...] | None:
    release = getattr(program, "release", None)
    return None if release is None else tuple(release.charged)


def planned_guarantee(
    program: QueryProgram, countermeasures: Countermeasures, *, delta: float
) -> Guarantee:
    """The guarantee of ``program`` with every batch as planned, for whoever writes a round.

    What a deployment's configs are written for (the nodes run them later, without a driver):
    the plan's guarantee at ``delta`` and, with a noisy release, both composed.
    """
    from dpcomm.plan.privacy import account_plan

    traffic = account_plan(program.plan, countermeasures, delta=delta)
    noises = _release_noises(program)
    composed = None if noises is None else compose_release(traffic, noises)
    return Guarantee(traffic, composed, noises=noises or ())


def prepare(job: Job) -> Prepared:
    """Prepare ``job``: transform and account its plan, compose, check, charge (in that order).

    Nothing runs before the guarantee is known and checked: the traffic's ε against the
    target (`dpcomm.engine.run.prepare`, with its warnings), the composition with a noisy
    release (`dpcomm.release.compose.compose_release`) against the target, a calibration's
    plan, and the budget, charged last (a refused charge leaves the ledger as it was).
    """
    program = job.program
    if job.calibration is not None:
        job.calibration.check_plan(program.plan, workload=job.kind, delta=job.delta)
    planned = prepare_plan(
        program, job.countermeasures, delta=job.delta, target_epsilon=job.target_epsilon
    )
    if planned.privacy is None:  # a job is always accounted
        raise InvalidParameterError("delta", "the plan's δ (a run is accounted)", None)
    noises = _release_noises(program)
    composed = None if noises is None else compose_release(planned.privacy, noises)
    guarantee = Guarantee(planned.privacy, composed, noises=noises or ())
    guarantee.check_target(job.target_epsilon)
    if job.budget is None:
        return Prepared(job, planned, guarantee)
    from dpcomm.pipeline.charge import charge_guarantee

    guarantee, charged, charge = charge_guarantee(job, guarantee)
    return Prepared(job, planned, guarantee, charged, charge)


__all__ = [
    "BUDGET_ENGINES",
    "Guarantee",
    "Job",
    "PlanCheck",
    "Prepared",
    "ReleaseSpec",
    "check_budget",
    "compile_aggregate",
    "planned_guarantee",
    "prepare",
    "with_kmeans_release",
]
