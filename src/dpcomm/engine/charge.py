"""What a privacy budget charges for a run, before the run: at least what the run reports.

A `dpcomm.budget.Budget` is charged before anything runs, so the charge must be known
beforehand and bound what the run then reports (`guarantee_to_charge`). In memory and on
Dask a run reports its plan's guarantee. A deployed round reports the guarantee of its batches
as they ran (`dpcomm.engine.network.deploy.actual_batch_sizes`): a source late or absent
leaves its scrambler with fewer sources, and a weaker guarantee, known only after the round;
`deployment_privacy` bounds every such outcome. On several hosts the coordinator charges
(`charge_round`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, Countermeasures
from dpcomm.plan.model import ExecutionPlan
from dpcomm.plan.privacy import PlanGuarantee, account_plan, compose_release
from dpcomm.queries.program import QueryProgram

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.budget.ledger import Charge
    from dpcomm.engine.network.spec import RoundSpec


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


@dataclass(frozen=True)
class ChargedGuarantee:
    """What a budget charges for a run before it runs (at least what the run then reports).

    Attributes:
        epsilon: ε: the traffic's, or traffic and noisy release composed.
        delta: δ: the plan's, or the composed δ1 + δ2.
        method: how it was obtained (the plan guarantee's method, and what it covers).
    """

    epsilon: float
    delta: float
    method: str


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
    round can report whatever nodes are late (`deployment_privacy`). Under a noisy
    release, the traffic's and the release's composed as the report composes them
    (`dpcomm.plan.privacy.compose_release`).
    """
    from dpcomm.queries.aggregate import AggregateProgram

    if deployed:
        privacy = deployment_privacy(program.plan, countermeasures, delta=delta)
        covers = "; scramblers at every batch size a deployment can run"
    else:
        privacy = account_plan(program.plan, countermeasures, delta=delta)
        covers = ""
    guarantee = privacy.guarantee
    epsilon, spent, method = guarantee.epsilon, guarantee.delta, guarantee.method
    if isinstance(program, AggregateProgram) and program.release is not None:
        # Traffic and noisy release read the same rows: the run spends both, composed.
        both = compose_release(privacy, program.release.noises)
        epsilon, spent = both.epsilon, both.delta
        method = f"{method} + {program.release.mechanism.name} release"
    return ChargedGuarantee(epsilon, spent, method + covers)


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
    charged = guarantee_to_charge(program, chosen, delta=delta, deployed=True)
    query = getattr(getattr(program, "query", None), "sql", None) or program.name
    return budget.charge(
        epsilon=charged.epsilon,
        delta=charged.delta,
        kind=str(spec.program.get("kind", "round")),
        query=f"{query} (round {spec.round_id})",
        method=charged.method,
    )


__all__ = ["ChargedGuarantee", "charge_round", "deployment_privacy", "guarantee_to_charge"]
