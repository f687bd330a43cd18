"""Layer 2: the execution model of Section 2, countermeasures, costs, privacy (Theorem 2).

Names are imported on first use (plan-level privacy needs the accountant, the rest does not).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.plan.codec import (
        countermeasure_arguments as countermeasure_arguments,
    )
    from dpcomm.plan.codec import (
        countermeasure_from_arguments as countermeasure_from_arguments,
    )
    from dpcomm.plan.codec import (
        countermeasure_from_dict as countermeasure_from_dict,
    )
    from dpcomm.plan.codec import (
        countermeasure_to_dict as countermeasure_to_dict,
    )
    from dpcomm.plan.codec import (
        run_command as run_command,
    )
    from dpcomm.plan.costs import (
        balanced_batch_sizes as balanced_batch_sizes,
    )
    from dpcomm.plan.costs import (
        batch_size_counts as batch_size_counts,
    )
    from dpcomm.plan.costs import (
        delivery_probability as delivery_probability,
    )
    from dpcomm.plan.costs import (
        num_scramblers as num_scramblers,
    )
    from dpcomm.plan.costs import (
        sources_needed as sources_needed,
    )
    from dpcomm.plan.countermeasures import (
        Countermeasure as Countermeasure,
    )
    from dpcomm.plan.countermeasures import (
        LocalFlooding as LocalFlooding,
    )
    from dpcomm.plan.countermeasures import (
        NoCountermeasure as NoCountermeasure,
    )
    from dpcomm.plan.countermeasures import (
        Scramblers as Scramblers,
    )
    from dpcomm.plan.model import (
        Cluster as Cluster,
    )
    from dpcomm.plan.model import (
        ExecutionPlan as ExecutionPlan,
    )
    from dpcomm.plan.model import (
        Flow as Flow,
    )
    from dpcomm.plan.model import (
        LogicalGroup as LogicalGroup,
    )
    from dpcomm.plan.model import (
        NodeGroup as NodeGroup,
    )
    from dpcomm.plan.privacy import (
        ClusterGuarantee as ClusterGuarantee,
    )
    from dpcomm.plan.privacy import (
        MechanismPart as MechanismPart,
    )
    from dpcomm.plan.privacy import (
        PlanGuarantee as PlanGuarantee,
    )
    from dpcomm.plan.privacy import (
        account_cluster as account_cluster,
    )
    from dpcomm.plan.privacy import (
        account_plan as account_plan,
    )
    from dpcomm.plan.transform import (
        RoutedFlow as RoutedFlow,
    )
    from dpcomm.plan.transform import (
        TransformedPlan as TransformedPlan,
    )
    from dpcomm.plan.transform import (
        resolve_countermeasures as resolve_countermeasures,
    )
    from dpcomm.plan.transform import (
        transform as transform,
    )
    from dpcomm.plan.transform import (
        with_countermeasure_nodes as with_countermeasure_nodes,
    )

# The function ``transform`` is bound eagerly: its module has the same name, and importing the
# module (which any user of the plan does) would otherwise leave the module in its place.
from dpcomm.plan.transform import transform as transform

__getattr__, __dir__ = attach(__name__, __file__)
