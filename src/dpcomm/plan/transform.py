"""The plan with its countermeasure nodes: scramblers added between sources and targets.

Section 4: a data-dependent flow protected by scramblers becomes two flows: every source sends
its (sampled) message to the scrambler it is assigned to, independently of its data (a
``fixed`` flow), and every scrambler forwards its n messages plus d dummies, shuffled, to the
targets (a ``data`` flow of the new scrambler group). Local sampling and flooding change what
the sources send but add no node.
"""

from __future__ import annotations

from collections.abc import Mapping

from dpcomm.plan.countermeasures import Countermeasure, NoCountermeasure, Scramblers
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup
from dpcomm.plan.privacy import num_scramblers


def scrambler_group_name(flow: str) -> str:
    """Name of the group of scramblers of ``flow``."""
    return f"scramblers[{flow}]"


def to_scramblers_flow_name(flow: str) -> str:
    """Name of the sources -> scramblers flow that replaces ``flow``."""
    return f"{flow} (to scramblers)"


def scrambled_flow_name(flow: str) -> str:
    """Name of the scramblers -> targets flow that replaces ``flow``."""
    return f"{flow} (scrambled)"


def with_countermeasure_nodes(
    plan: ExecutionPlan, countermeasures: Mapping[str, Countermeasure]
) -> ExecutionPlan:
    """The plan with a group of scramblers for every flow protected by scramblers.

    Args:
        plan: the plan without countermeasure nodes.
        countermeasures: the countermeasure of every data-dependent flow, by flow name
            (flows not named keep their direct route).

    A flow with a single potential target keeps its direct route: its pattern is already
    data-independent.
    """
    groups = list(plan.groups)
    flows: list[Flow] = []
    for flow in plan.flows:
        chosen = countermeasures.get(flow.name, NoCountermeasure())
        targets = plan.group(flow.receiver).count
        if not (flow.data_dependent and isinstance(chosen, Scramblers) and targets > 1):
            flows.append(flow)
            continue
        senders = plan.group(flow.sender).count
        count = num_scramblers(senders, chosen.batch_size)
        group = scrambler_group_name(flow.name)
        groups.append(NodeGroup(group, "scrambler", count))
        flows.append(
            Flow(
                to_scramblers_flow_name(flow.name),
                flow.sender,
                group,
                "fixed",
                order=flow.order,
                message_bytes=flow.message_bytes,
            )
        )
        flows.append(
            Flow(
                scrambled_flow_name(flow.name),
                group,
                flow.receiver,
                "data",
                depends_on_state=flow.depends_on_state,
                message_bytes=flow.message_bytes,
                messages_per_sender=min(chosen.batch_size, senders) + chosen.num_dummies,
            )
        )
    return ExecutionPlan(tuple(groups), tuple(flows))
