"""Layer 2: the execution model of Section 2 and plan-level privacy (Theorem 2)."""

from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
    make_countermeasure,
)
from dpcomm.plan.model import Cluster, ExecutionPlan, Flow, LogicalGroup, NodeGroup
from dpcomm.plan.privacy import (
    ClusterGuarantee,
    MechanismPart,
    PlanGuarantee,
    account_cluster,
    account_plan,
    scrambler_batch_sizes,
)
from dpcomm.plan.transform import with_countermeasure_nodes

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
    "Scramblers",
    "account_cluster",
    "account_plan",
    "make_countermeasure",
    "scrambler_batch_sizes",
    "with_countermeasure_nodes",
]
