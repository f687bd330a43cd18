"""Aggregate (SQL GROUP BY over grouping sets) as a decentralized execution plan (Section 2.1).

Each grouping set is one vertical partition (one sub-query q = (G_q, V_q, F_q)); its grouping
domain is split among C compute nodes by a public, data-independent function of the key
(:func:`dpcomm.queries.groupby.partition_keys`). Every source holds one row and sends, for each
grouping set, the values it needs to the compute node of its key: one data-dependent message
per grouping set, so a source is split into G logical simple nodes. The compute nodes
aggregate the real tuples they receive and send their part of the result to the result node.
An empty grouping set (the grand total of ROLLUP/CUBE) has a single compute node: its
communication does not depend on the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from dpcomm.accounting._validation import check_int
from dpcomm.data.table import Table
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup
from dpcomm.queries.groupby import evaluate, group_ids, partition_keys
from dpcomm.queries.program import BoolArray, IntArray
from dpcomm.queries.sql import BoundAggregate, bind_sql

#: Bytes of one value in a message (every value travels as 8 bytes).
VALUE_BYTES = 8
#: Default number C of compute nodes per grouping set (Table 1 of the paper).
DEFAULT_COMPUTE_NODES = 20


def grouping_set_label(columns: tuple[str, ...]) -> str:
    """``(A, B)`` for a grouping set, ``()`` for the empty one."""
    return "(" + ", ".join(columns) + ")"


@dataclass(frozen=True)
class AggregateState:
    """Which tuples reached their compute node, per grouping set flow (None before the run)."""

    delivered: tuple[tuple[str, BoolArray], ...] = ()


@dataclass(frozen=True, eq=False)
class AggregateProgram:
    """An Aggregate query bound to a table, compiled to a plan.

    Attributes:
        query: the bound query.
        table: the sources' rows (one per source node).
        num_compute_nodes: C, compute nodes per non-empty grouping set.
    """

    query: BoundAggregate
    table: Table
    num_compute_nodes: int = DEFAULT_COMPUTE_NODES

    def __post_init__(self) -> None:
        check_int("compute_nodes", self.num_compute_nodes, minimum=1)
        if self.table.num_rows == 0:
            raise InvalidParameterError("data", "a table with at least one row", "an empty table")
        self.query.check_table(self.table)

    @classmethod
    def from_sql(
        cls, sql: str, table: Table, *, num_compute_nodes: int = DEFAULT_COMPUTE_NODES
    ) -> AggregateProgram:
        """Parse ``sql``, bind it to ``table`` (renamed to the FROM table) and compile it."""
        bound = bind_sql(sql, table)
        return cls(bound, table.renamed(bound.table_name), num_compute_nodes)

    @property
    def name(self) -> str:
        """Short description for reports."""
        sets = ", ".join(grouping_set_label(s) for s in self.query.grouping_sets)
        return f"Aggregate over grouping sets {sets}, C={self.num_compute_nodes}"

    @cached_property
    def flow_names(self) -> tuple[str, ...]:
        """One flow per grouping set, labelled by its columns (numbered if repeated)."""
        labels = [grouping_set_label(s) for s in self.query.grouping_sets]
        names = []
        for index, label in enumerate(labels):
            names.append(label if labels.count(label) == 1 else f"{label}#{index + 1}")
        return tuple(names)

    def compute_nodes_of(self, index: int) -> int:
        """Number of compute nodes of grouping set ``index`` (1 for the empty set)."""
        return self.num_compute_nodes if self.query.grouping_sets[index] else 1

    @cached_property
    def message_bytes(self) -> int:
        """Payload of a source message: the grouping values and the aggregated columns."""
        measured = {o.column.lower() for o in self.query.outputs if o.column and o.function}
        widest = max(len(s) for s in self.query.grouping_sets)
        return VALUE_BYTES * max(1, widest + len(measured))

    @cached_property
    def plan(self) -> ExecutionPlan:
        """Sources, one group of compute nodes per grouping set, and the result node."""
        groups = [NodeGroup("sources", "source", self.table.num_rows, holds_data=True)]
        flows = []
        for index, name in enumerate(self.flow_names):
            compute = f"compute{name}"
            groups.append(NodeGroup(compute, "compute", self.compute_nodes_of(index)))
            flows.append(
                Flow(name, "sources", compute, "data", index + 1, message_bytes=self.message_bytes)
            )
            flows.append(
                Flow(f"{name} result", compute, "result", "fixed", message_bytes=self.message_bytes)
            )
        groups.append(NodeGroup("result", "result", 1))
        return ExecutionPlan(tuple(groups), tuple(flows))

    @cached_property
    def _targets(self) -> dict[str, IntArray]:
        everything = np.ones(self.table.num_rows, dtype=bool)
        targets = {}
        for index, name in enumerate(self.flow_names):
            columns = self.query.grouping_sets[index]
            if not columns:
                targets[name] = np.zeros(self.table.num_rows, dtype=np.int64)
                continue
            ids, keys = group_ids(self.table, columns, everything)
            nodes = partition_keys(keys, self.compute_nodes_of(index))
            targets[name] = np.asarray(nodes, dtype=np.int64)[ids]
        return targets

    @property
    def num_stages(self) -> int:
        """A single stage: every grouping set is sent at once."""
        return 1

    def stage_flows(self, stage: int) -> tuple[str, ...]:
        """Every grouping set's flow."""
        return self.flow_names

    def initial_state(self) -> AggregateState:
        """Nothing delivered yet."""
        return AggregateState()

    def true_targets(self, state: AggregateState, flow: str) -> IntArray:
        """Compute node of each source's key for the grouping set of ``flow``."""
        return self._targets[flow]

    def compute(
        self, state: AggregateState, stage: int, delivered: Mapping[str, BoolArray]
    ) -> AggregateState:
        """Record what each grouping set's compute nodes received."""
        return AggregateState(tuple((name, delivered[name]) for name in self.flow_names))

    def masks(self, state: AggregateState) -> list[BoolArray]:
        """The delivered mask of every grouping set, in order."""
        recorded = dict(state.delivered)
        return [recorded[name] for name in self.flow_names]

    def result(self, state: AggregateState) -> list[dict[str, Any]]:
        """The union of the compute nodes' results (one row per group per grouping set)."""
        return evaluate(self.query, self.table, self.masks(state))

    def nonprivate_result(self) -> list[dict[str, Any]]:
        """The result over every tuple (what DuckDB returns for the SQL on the whole table)."""
        everything = np.ones(self.table.num_rows, dtype=bool)
        return evaluate(self.query, self.table, [everything] * self.query.num_grouping_sets)
