"""The execution plans of the paper's two use cases (Sections 2.1 and 5.1), from their sizes.

The query programs (`dpcomm.queries`) build their plans here, and so does the planner,
which only knows the sizes: one builder, so that what is planned is what runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup
from dpcomm.validation import check_int


def aggregate_compute_group(flow: str) -> str:
    """Name of the compute nodes of the grouping set sent on ``flow``."""
    return f"compute{flow}"


def aggregate_result_flow(flow: str) -> str:
    """Name of the flow from the compute nodes of ``flow`` to the result node."""
    return f"{flow} result"


def aggregate_plan(
    *,
    num_sources: int,
    flows: Sequence[str],
    num_targets: Sequence[int],
    message_bytes: int = 8,
) -> ExecutionPlan:
    """The Aggregate plan (Example 1): sources, C compute nodes per grouping set, a result node.

    Every source sends, for grouping set g, one data-dependent message (order g + 1) to the
    compute node of its key; every compute node sends its part of the result to the result
    node (a fixed, data-independent flow).

    Args:
        num_sources: S, one source per row (0 for a table without rows: the compute nodes
            still send their outputs, the empty grouping set's row over no rows).
        flows: one flow name per grouping set.
        num_targets: T, the compute nodes of each grouping set (1 for the empty set).
        message_bytes: payload of a message.
    """
    sources = check_int("num_sources", num_sources, minimum=0)
    if len(flows) != len(num_targets) or not flows:
        raise InvalidParameterError(
            "num_targets", f"one count per grouping set ({len(flows)})", len(num_targets)
        )
    groups = [NodeGroup("sources", "source", sources, holds_data=True)]
    plan_flows = []
    for index, (name, count) in enumerate(zip(flows, num_targets, strict=True)):
        compute = aggregate_compute_group(name)
        groups.append(NodeGroup(compute, "compute", check_int("compute nodes", count, minimum=1)))
        plan_flows.append(
            Flow(name, "sources", compute, "data", index + 1, message_bytes=message_bytes)
        )
        plan_flows.append(
            Flow(
                aggregate_result_flow(name), compute, "result", "fixed", message_bytes=message_bytes
            )
        )
    groups.append(NodeGroup("result", "result", 1))
    return ExecutionPlan(tuple(groups), tuple(plan_flows))


def kmeans_flow(iteration: int) -> str:
    """Name of the data-dependent flow of K-means iteration ``iteration`` (1-based)."""
    return f"iteration {iteration}"


def kmeans_centroids_flow(iteration: int) -> str:
    """Name of the broadcast of the centroids computed in ``iteration`` to the sources."""
    return f"centroids {iteration}"


def kmeans_plan(
    *, num_sources: int, num_centroids: int, num_iterations: int, message_bytes: int = 8
) -> ExecutionPlan:
    """The K-means plan (Section 5.1), iterations unrolled onto logical groups (Remark 1).

    In iteration i every source (logical group ``sources@i``) sends its point to the compute
    node of its nearest centroid (``compute@i``, K nodes hosted by the same K physical compute
    nodes in every iteration); the new centroids are broadcast back to the sources of the next
    iteration, and after the last one sent to the result node.
    """
    sources = check_int("num_sources", num_sources, minimum=1)
    centroids = check_int("num_centroids K", num_centroids, minimum=1)
    iterations = check_int("num_iterations I", num_iterations, minimum=1)
    groups = [
        NodeGroup("sources", "source", sources, holds_data=True),
        NodeGroup("compute", "compute", centroids),
        NodeGroup("result", "result", 1),
    ]
    flows = []
    for iteration in range(1, iterations + 1):
        groups.append(NodeGroup(f"sources@{iteration}", "source", sources, physical="sources"))
        groups.append(NodeGroup(f"compute@{iteration}", "compute", centroids, physical="compute"))
        flows.append(
            Flow(
                kmeans_flow(iteration),
                f"sources@{iteration}",
                f"compute@{iteration}",
                "data",
                depends_on_state=True,
                message_bytes=message_bytes,
            )
        )
        if iteration < iterations:
            flows.append(
                Flow(
                    kmeans_centroids_flow(iteration),
                    f"compute@{iteration}",
                    f"sources@{iteration + 1}",
                    "broadcast",
                    message_bytes=message_bytes,
                )
            )
        else:
            flows.append(
                Flow(
                    "result", f"compute@{iteration}", "result", "fixed", message_bytes=message_bytes
                )
            )
    return ExecutionPlan(tuple(groups), tuple(flows))
