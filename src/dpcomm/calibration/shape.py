"""What a calibration is made for: the shape of a plan, read from the plan a query compiles to.

The planner needs S (sources), T (targets per cluster) and G data-dependent clusters (the
non-empty grouping sets of an Aggregate query, or the I iterations of K-means). A user who
counts them by hand can get them wrong: ``ROLLUP(species, sex)`` has three grouping sets, but
the empty one, ``()``, has a single compute node, so every source sends it one message to the
same node whatever its data (ε = 0, Section 2.4): only two clusters compose. `PlanShape`
reads the shape from the `dpcomm.plan.ExecutionPlan` that the query compiles to (the
plan the engines run and the accountant accounts), so a calibration is made for exactly that
plan, and a run on another table or query can be compared with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpcomm.calibration.request import Workload
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.model import ExecutionPlan


@dataclass(frozen=True, kw_only=True)
class PlanShape:
    """The shape of a plan as the planner sees it.

    Attributes:
        workload: ``"aggregate"`` or ``"kmeans"``.
        num_sources: the plan's source nodes (the rows of the table, S_t).
        num_targets: T, the targets of every data-dependent cluster.
        clusters: the names of the data-dependent clusters of more than one target, in plan
            order (the non-empty grouping sets, or the iterations): G (or I) = their number.
        free_clusters: the names of the clusters of one target (the empty grouping set ``()``):
            their traffic is independent of the data (ε = 0), costed but not composed.
    """

    workload: Workload
    num_sources: int
    num_targets: int
    clusters: tuple[str, ...]
    free_clusters: tuple[str, ...] = ()

    @classmethod
    def of_plan(cls, plan: ExecutionPlan, *, workload: Workload) -> PlanShape:
        """The shape of ``plan`` (a query's compiled plan, `AggregateProgram.plan`).

        Raises [`InvalidParameterError`][] when the data-dependent clusters
        do not all have the same T (the planner searches one T).
        """
        dependent = [c for c in plan.clusters if c.data_dependent and c.num_targets > 1]
        free = [c.name for c in plan.clusters if c.data_dependent and c.num_targets == 1]
        targets = sorted({c.num_targets for c in dependent})
        if len(targets) > 1:
            raise InvalidParameterError(
                "num_targets", "the same T for every data-dependent cluster", targets
            )
        senders = max((g.count for g in plan.data_holders), default=0)
        return cls(
            workload=workload,
            num_sources=senders,
            num_targets=targets[0] if targets else 1,
            clusters=tuple(c.name for c in dependent),
            free_clusters=tuple(free),
        )

    @property
    def num_clusters(self) -> int:
        """G (grouping sets) or I (iterations): the data-dependent clusters that compose."""
        return len(self.clusters)

    def describe(self) -> str:
        """One line: the sources, the composed clusters (named), the free ones.

        ``"344 sources, 2 data-dependent grouping sets of T = 20 ((species), (species, sex));
        () is free (one compute node)"``
        """
        noun = "grouping set" if self.workload == "aggregate" else "iteration"
        plural = "" if self.num_clusters == 1 else "s"
        text = (
            f"{self.num_sources:,} sources, {self.num_clusters} data-dependent {noun}{plural} "
            f"of T = {self.num_targets}"
        )
        if self.workload == "aggregate" and self.clusters:
            text += f" ({', '.join(self.clusters)})"
        if self.free_clusters:
            verb = "is" if len(self.free_clusters) == 1 else "are"
            text += f"; {', '.join(self.free_clusters)} {verb} free (one compute node)"
        return text

    def same_accounting(self, other: PlanShape) -> bool:
        """True when a countermeasure gets the same ε on both plans.

        The guarantee depends on S (the balanced batches), T and the number of composed
        clusters and the workload, not on the clusters' names nor on the free clusters.
        """
        return (
            self.workload == other.workload
            and self.num_sources == other.num_sources
            and self.num_targets == other.num_targets
            and self.num_clusters == other.num_clusters
        )
