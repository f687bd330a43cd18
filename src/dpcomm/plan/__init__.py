"""Layer 2: the execution model of Section 2, countermeasures, costs, privacy (Theorem 2).

Names are imported on first use (plan-level privacy needs the accountant, the rest does not).
"""

import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.plan.codec import (
        countermeasure_arguments as countermeasure_arguments,
        countermeasure_from_arguments as countermeasure_from_arguments,
        countermeasure_from_dict as countermeasure_from_dict,
        countermeasure_to_dict as countermeasure_to_dict,
        run_command as run_command,
    )
    from dpcomm.plan.costs import (
        balanced_batch_sizes as balanced_batch_sizes,
        batch_size_counts as batch_size_counts,
        delivery_probability as delivery_probability,
        num_scramblers as num_scramblers,
        sources_needed as sources_needed,
    )
    from dpcomm.plan.countermeasures import (
        Countermeasure as Countermeasure,
        LocalFlooding as LocalFlooding,
        NoCountermeasure as NoCountermeasure,
        Scramblers as Scramblers,
    )
    from dpcomm.plan.model import (
        Cluster as Cluster,
        ExecutionPlan as ExecutionPlan,
        Flow as Flow,
        LogicalGroup as LogicalGroup,
        NodeGroup as NodeGroup,
    )
    from dpcomm.plan.privacy import (
        ClusterGuarantee as ClusterGuarantee,
        MechanismPart as MechanismPart,
        PlanGuarantee as PlanGuarantee,
        account_cluster as account_cluster,
        account_plan as account_plan,
    )
    from dpcomm.plan.transform import (
        RoutedFlow as RoutedFlow,
        TransformedPlan as TransformedPlan,
        resolve_countermeasures as resolve_countermeasures,
        transform as transform,
        with_countermeasure_nodes as with_countermeasure_nodes,
    )


class _Plan(ModuleType):
    """The package, whose ``transform`` stays the function once its module is imported.

    The function's module has the same name: importing ``dpcomm.plan.transform`` binds the
    module to the package's ``transform``, which would hide the function. The property keeps
    the function there, imported on first use like every other name (a countermeasure's user,
    such as ``dpcomm account``, imports neither the plan model nor its transform).
    """

    @property
    def transform(self) -> Callable[..., Any]:
        from dpcomm.plan.transform import transform

        return transform

    @transform.setter
    def transform(self, _module: object) -> None:
        """The import system binding the module ``dpcomm.plan.transform``: the function stays."""


sys.modules[__name__].__class__ = _Plan
__getattr__, __dir__ = attach(__name__, __file__)
