"""Layer 2: the execution model of Section 2, countermeasures, costs, privacy (Theorem 2).

Names are imported on first use (plan-level privacy needs the accountant, the rest does not).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.plan.costs import (
        balanced_batch_sizes,
        batch_size_counts,
        delivery_probability,
        num_scramblers,
        sources_needed,
    )
    from dpcomm.plan.countermeasures import (
        Countermeasure,
        LocalFlooding,
        NoCountermeasure,
        Scramblers,
        make_countermeasure,
    )
    from dpcomm.plan.model import (
        Cluster,
        ExecutionPlan,
        Flow,
        LogicalGroup,
        NodeGroup,
    )
    from dpcomm.plan.privacy import (
        ClusterGuarantee,
        MechanismPart,
        PlanGuarantee,
        account_cluster,
        account_plan,
    )
    from dpcomm.plan.transform import (
        RoutedFlow,
        TransformedPlan,
        resolve_countermeasures,
        transform,
        with_countermeasure_nodes,
    )

__getattr__, __dir__ = attach(
    __name__,
    {
        "dpcomm.plan.countermeasures": (
            "Countermeasure",
            "LocalFlooding",
            "NoCountermeasure",
            "Scramblers",
            "make_countermeasure",
        ),
        "dpcomm.plan.model": (
            "Cluster",
            "ExecutionPlan",
            "Flow",
            "LogicalGroup",
            "NodeGroup",
        ),
        "dpcomm.plan.costs": (
            "balanced_batch_sizes",
            "batch_size_counts",
            "delivery_probability",
            "num_scramblers",
            "sources_needed",
        ),
        "dpcomm.plan.transform": (
            "RoutedFlow",
            "TransformedPlan",
            "resolve_countermeasures",
            "transform",
            "with_countermeasure_nodes",
        ),
        "dpcomm.plan.privacy": (
            "ClusterGuarantee",
            "MechanismPart",
            "PlanGuarantee",
            "account_cluster",
            "account_plan",
        ),
    },
)

__all__ = [
    "Cluster",
    "ClusterGuarantee",
    "Countermeasure",
    "ExecutionPlan",
    "Flow",
    "LocalFlooding",
    "LogicalGroup",
    "MechanismPart",
    "NoCountermeasure",
    "NodeGroup",
    "PlanGuarantee",
    "RoutedFlow",
    "Scramblers",
    "TransformedPlan",
    "account_cluster",
    "account_plan",
    "balanced_batch_sizes",
    "batch_size_counts",
    "delivery_probability",
    "make_countermeasure",
    "num_scramblers",
    "resolve_countermeasures",
    "sources_needed",
    "transform",
    "with_countermeasure_nodes",
]
