"""What a privacy budget charges for a run, before the run: at least what the run reports.

A `dpcomm.budget.Budget` is charged before anything runs, so the charge must be known
beforehand and bound what the run then reports (`guarantee_to_charge`). In memory and on
Dask a run reports its plan's guarantee. A deployed round reports the guarantee of its batches
as they ran (`dpcomm.engine.network.deploy.actual_batch_sizes`): a source late or absent
leaves its scrambler with fewer sources, and a weaker guarantee, known only after the round;
`deployment_privacy` bounds every such outcome. On several hosts the coordinator charges
(`charge_round`).

The δ charged is the δ the guarantee uses, not the run's ``delta`` argument: local flooding
is pure ε-DP (Theorem 1, R_σ^d), so a plan whose every data-dependent cluster has local
flooding is charged its pure guarantee, at δ = 0 for the traffic (`pure_traffic`); with
a Laplace release, or none, the run is charged δ = 0, and with a Gaussian release or a DP key
selection only their δ2 and δ_sel. The run still reports its guarantee at its δ, whose ε can
be a little smaller (the exact δ(ε) of R_σ^d trades a δ for a smaller ε): both are valid for
the same mechanism, and the ledger keeps the one that spends no δ. Scramblers' guarantees at
δ > 0 are charged as reported, δ included; a run at ``delta=0`` is charged δ = 0 for its
traffic whatever its countermeasure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.codec import countermeasure_to_dict
from dpcomm.plan.countermeasures import Countermeasure, Countermeasures, LocalFlooding
from dpcomm.plan.model import ExecutionPlan
from dpcomm.plan.privacy import PlanGuarantee, account_plan
from dpcomm.queries.program import QueryProgram

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.budget.ledger import Charge
    from dpcomm.engine.network.spec import RoundSpec
    from dpcomm.pipeline.job import Guarantee, Job
    from dpcomm.release.compose import ReleaseComposition


def deployment_privacy(
    plan: ExecutionPlan,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float,
) -> PlanGuarantee:
    """The weakest guarantee a deployed round of ``plan`` can report, known before it runs.

    A round accounts its scramblers' batches as they ran: late, absent or lost sources leave
    a scrambler with m < n of them, any m from 1 to its planned batch. Here every scrambled
    flow is accounted at every such m that can run (a capped scrambler of m sources with
    d > (T − 1)·m stops before sending), so that no round reports more: a cluster's guarantee
    is the worst of its batch sizes', and the PLD composition takes its smallest batch, whose
    dominating pair dominates the larger batches' (`dpcomm.plan.account_plan`). Without
    scramblers late sources change nothing, and this is the plan's guarantee.
    """
    from dpcomm.plan.transform import transform

    transformed = transform(plan, countermeasures)
    if not transformed.batches:
        return account_plan(plan, countermeasures, delta=delta)
    sizes: dict[str, dict[int, int]] = {}
    for flow, planned in transformed.batches.items():
        capped = getattr(transformed.countermeasures[flow], "capped", False)
        runnable: dict[int, int] = {}
        for size in range(1, max(planned) + 1):
            if capped:
                try:
                    account_plan(
                        plan,
                        countermeasures,
                        delta=delta,
                        batch_sizes={flow: {size: 1}},
                        compose_pld=False,
                    )
                except InvalidParameterError:
                    continue  # too small to run: it sends nothing
            runnable[size] = 1
        sizes[flow] = runnable
    return account_plan(plan, countermeasures, delta=delta, batch_sizes=sizes)


def pure_traffic(
    plan: ExecutionPlan, countermeasures: Countermeasure | Mapping[str, Countermeasure]
) -> PlanGuarantee | None:
    """The plan's pure guarantee (at δ = 0) when its traffic is pure by Theorem 1, else None.

    Pure by Theorem 1: every data-dependent cluster of more than one target has local
    flooding (R_σ^d is ε0-DP); the others are (0, 0). None when some cluster has scramblers
    or no countermeasure, or when the pure ε is infinite.
    """
    from dpcomm.plan.transform import resolve_countermeasures

    chosen = resolve_countermeasures(plan, countermeasures)
    if not all(
        isinstance(chosen[c.name], LocalFlooding)
        for c in plan.clusters
        if c.data_dependent and c.num_targets > 1
    ):
        return None
    privacy = account_plan(plan, countermeasures, delta=0.0)
    return privacy if math.isfinite(privacy.guarantee.epsilon) else None


@dataclass(frozen=True)
class ChargedGuarantee:
    """What a budget charges for a run before it runs, and what the run may then report.

    Attributes:
        epsilon: ε charged: the traffic's, or traffic and noisy release composed.
        delta: δ charged: the δ the guarantee uses (0 for pure traffic without a release or
            with a Laplace one; δ2 and δ_sel of a release).
        method: how it was obtained (the plan guarantee's method, and what it covers).
        reported_epsilon: the ε the run reports at its δ (at most ``epsilon``).
        reported_delta: the δ the run reports (its ``delta``, and its release's).
    """

    epsilon: float
    delta: float
    method: str
    reported_epsilon: float = math.nan
    reported_delta: float = math.nan

    def __post_init__(self) -> None:
        if math.isnan(self.reported_epsilon):
            object.__setattr__(self, "reported_epsilon", self.epsilon)
        if math.isnan(self.reported_delta):
            object.__setattr__(self, "reported_delta", self.delta)


def guarantee_to_charge(
    program: QueryProgram,
    countermeasures: Countermeasures,
    *,
    delta: float,
    deployed: bool = False,
) -> ChargedGuarantee:
    """The (ε, δ) a budget charges for a run of ``program``, known before it runs.

    The plan's guarantee at ``delta``, by the call the engines make
    (`dpcomm.plan.account_plan`); for a deployed round (``deployed``), the weakest its
    round can report whatever nodes are late (`deployment_privacy`); then `charged_guarantee`.
    """
    if deployed:
        privacy = deployment_privacy(program.plan, countermeasures, delta=delta)
    else:
        privacy = account_plan(program.plan, countermeasures, delta=delta)
    return charged_guarantee(program, countermeasures, privacy, delta=delta, deployed=deployed)


def charged_guarantee(
    program: QueryProgram,
    countermeasures: Countermeasures,
    privacy: PlanGuarantee,
    *,
    delta: float,
    deployed: bool = False,
    composed: ReleaseComposition | None = None,
) -> ChargedGuarantee:
    """What a budget charges for a run whose traffic guarantee at ``delta`` is ``privacy``.

    Under a noisy release, the traffic's and the release's composed as the report composes
    them (the release's ``composed_with``; ``composed`` when already known).
    Traffic that is pure by Theorem 1 (`pure_traffic`) is charged its pure guarantee
    instead (module doc): δ = 0 for it. ``reported_epsilon`` and ``reported_delta`` are the
    guarantee at ``delta``, which the run's report must not exceed.
    """
    covers = "; scramblers at every batch size a deployment can run" if deployed else ""
    pure = pure_traffic(program.plan, countermeasures) if delta > 0.0 else None
    release = getattr(program, "release", None)

    def spent(traffic: PlanGuarantee, known: ReleaseComposition | None) -> tuple[float, float, str]:
        guarantee = traffic.guarantee
        if release is None:
            return guarantee.epsilon, guarantee.delta, guarantee.method
        # Traffic and noisy release read the same rows: the run spends both, composed.
        both = known if known is not None else release.composed_with(traffic)
        return both.epsilon, both.delta, f"{guarantee.method} + {release.mechanism.name} release"

    reported = spent(privacy, composed)
    epsilon, charged_delta, method = reported if pure is None else spent(pure, None)
    if pure is not None:
        method += "; pure traffic (Theorem 1) charged at δ = 0"
    return ChargedGuarantee(
        epsilon,
        charged_delta,
        method + covers,
        reported_epsilon=reported[0],
        reported_delta=reported[1],
    )


def charge_guarantee(job: Job, guarantee: Guarantee) -> tuple[Guarantee, ChargedGuarantee, Charge]:
    """Charge ``job``'s budget its prepared ``guarantee``, before it runs.

    In memory and on Dask the charge is the guarantee itself; a deployed round is charged
    its weakest (`deployment_privacy`), which the returned guarantee then holds.
    """
    budget = job.budget
    if budget is None:
        raise InvalidParameterError("budget", "a dpcomm.Budget(...) to charge", None)
    deployed = job.engine.name == "network"
    privacy, composed = guarantee.traffic, guarantee.release
    if deployed:
        privacy = deployment_privacy(job.program.plan, job.countermeasures, delta=job.delta)
        guarantee = replace(guarantee, deployment=privacy)
        composed = None if guarantee.release is None else guarantee.composed_with(privacy)
    charged = charged_guarantee(
        job.program,
        job.countermeasures,
        privacy,
        delta=job.delta,
        deployed=deployed,
        composed=composed,
    )
    charge = _record(
        budget,
        charged,
        job.program,
        job.countermeasures,
        kind=job.kind,
        engine=job.engine.name,
        query=job.query,
        seed=job.seed,
    )
    return guarantee, charged, charge


def _record(
    budget: Budget,
    charged: ChargedGuarantee,
    program: QueryProgram,
    countermeasures: Countermeasures,
    *,
    kind: str,
    engine: str,
    query: str | None,
    seed: int | None = None,
) -> Charge:
    """Charge ``budget`` ``charged``, recording the run (query, countermeasure, release, seed).

    A seed the ledger already charged is refused (`dpcomm.budget.Budget.charge`), and so is
    a K-means whose initial centroids are sources' own points: every node receives them as
    they are, so no charge covers them (`KMeansProgram.initialisation_caveat`).
    """
    if getattr(program, "initialisation_caveat", None) is not None:
        raise InvalidParameterError(
            "init_points",
            "public starting points for K-means charged to a budget (init_points=..., "
            "--init-data): centroids chosen among the sources' points are sent to every node "
            "as they are, and no charge covers them",
            "centroids chosen among the sources' points",
        )
    return budget.charge(
        epsilon=charged.epsilon,
        delta=charged.delta,
        kind=kind,
        query=query_record(program) if query is None else query,
        method=charged.method,
        countermeasure=countermeasure_record(countermeasures),
        release=release_record(program),
        engine=engine,
        seed=seed,
    )


def countermeasure_record(
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
) -> dict[str, Any]:
    """The countermeasure's dict form for a ledger (`dpcomm.plan.codec`, the one codec).

    One countermeasure for every cluster: its dict; one per flow: ``{flow: dict}``, or the one
    dict when they are all the same.
    """
    if isinstance(countermeasures, Mapping):
        forms = {name: countermeasure_to_dict(c) for name, c in countermeasures.items()}
        distinct = {repr(sorted(form.items())) for form in forms.values()}
        if len(distinct) == 1:
            return next(iter(forms.values()))
        return forms
    return countermeasure_to_dict(countermeasures)


def release_record(program: QueryProgram) -> dict[str, Any] | None:
    """The noisy release of ``program`` for a ledger, or None without one.

    Its mechanism with ε2 and δ2, the bounds of the columns its SUM and AVG read
    (``{column: [lo, hi]}``), the public key domains (``{column: [values as text]}``) and
    the δ_sel of its DP key selection (None without); K-means's, the bounds of every
    coordinate by its column's name.
    """
    release = getattr(program, "release", None)
    if release is None:
        return None
    spec = release.to_spec()
    query = getattr(program, "query", None)
    if query is None:  # K-means: its bounds per coordinate, no keys
        return {
            "mechanism": spec["mechanism"],
            "epsilon": spec["epsilon"],
            "delta": spec["delta"],
            "bounds": dict(zip(spec["columns"], spec["bounds"], strict=True)),
            "keys": None,
            "key_selection_delta": None,
        }
    return {
        "mechanism": spec["mechanism"],
        "epsilon": spec["epsilon"],
        "delta": spec["delta"],
        "bounds": {column: [low, high] for _, column, low, high in query.clamps},
        "keys": spec["keys"],
        "key_selection_delta": spec["key_selection_delta"],
    }


def query_record(program: QueryProgram) -> str:
    """The query as the analyst wrote it (its SQL text), else the program's name."""
    query = getattr(program, "query", None)
    return getattr(query, "user_sql", None) or getattr(query, "sql", None) or str(program.name)


def charge_run(
    budget: Budget,
    program: QueryProgram,
    countermeasures: Countermeasures,
    *,
    delta: float,
    kind: str,
    engine: str,
    query: str | None = None,
    deployed: bool = False,
    seed: int | None = None,
) -> tuple[ChargedGuarantee, Charge]:
    """Charge ``budget`` for a run of ``program`` before it runs, recording what it is.

    The charge is `guarantee_to_charge`'s, with the query as written (``query``, else
    `query_record`), the countermeasure (`countermeasure_record`), the release
    (`release_record`), the engine and the guarantee's method. Raises
    `dpcomm.budget.BudgetExceededError` beyond the budget, the ledger then unchanged.
    Returns the guarantee charged and the ledger's charge.
    """
    charged = guarantee_to_charge(program, countermeasures, delta=delta, deployed=deployed)
    charge = _record(
        budget,
        charged,
        program,
        countermeasures,
        kind=kind,
        engine=engine,
        query=query,
        seed=seed,
    )
    return charged, charge


def charge_round(budget: Budget, spec: RoundSpec, *, delta: float) -> Charge:
    """Charge ``budget`` for the deployed round ``spec`` describes, before it runs.

    On several hosts (``dpcomm deploy configs``, ``dpcomm node run``) the coordinator
    charges: every round goes through it once, and no node can send before it has registered
    them. The charge is `guarantee_to_charge` of the round's public program with its
    countermeasures, as deployed. Raises `dpcomm.budget.BudgetExceededError` beyond
    the budget, the ledger then unchanged.
    """
    program = spec.public_program
    chosen = {name: item.countermeasure() for name, item in spec.countermeasures.items()}
    _, charge = charge_run(
        budget,
        program,
        chosen,
        delta=delta,
        kind=str(spec.program.get("kind", "round")),
        engine="network (several hosts)",
        query=f"{query_record(program)} (round {spec.round_id})",
        deployed=True,
        seed=spec.seed,
    )
    return charge


__all__ = [
    "ChargedGuarantee",
    "charge_guarantee",
    "charge_round",
    "charge_run",
    "charged_guarantee",
    "countermeasure_record",
    "deployment_privacy",
    "guarantee_to_charge",
    "pure_traffic",
    "query_record",
    "release_record",
]
