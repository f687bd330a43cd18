"""Aggregate (SQL GROUP BY over grouping sets) as a decentralized execution plan (Section 2.1).

Each grouping set is one vertical partition (one sub-query q = (G_q, V_q, F_q)); its grouping
domain is split among T compute nodes by a public, data-independent function of the key
([`dpcomm.queries.groupby.partition_keys`][]). Every source holds one row and sends, for each
grouping set, the values it needs to the compute node of its key: one data-dependent message
per grouping set, so a source is split into G logical simple nodes. The compute nodes
aggregate the real tuples they receive and send their part of the result to the result node.
An empty grouping set (the grand total of ROLLUP/CUBE) has a single compute node: its
communication does not depend on the data.

[`AggregateProgram`][] supplies the hooks of [`dpcomm.protocol.roles.ProgramHooks`][]:
every engine runs it through the same role steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from dpcomm.data.partitioned import InMemoryRows, RowSource, row_range
from dpcomm.data.table import Table, value_kind
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.builders import aggregate_plan
from dpcomm.plan.countermeasures import Countermeasures
from dpcomm.plan.model import ExecutionPlan
from dpcomm.protocol.roles import TargetStep
from dpcomm.queries.aggregate_wire import (
    TEXT_FIELD_OVERHEAD,
    AggregateCodec,
    AggregateOutput,
    OutputOverflowError,
)
from dpcomm.queries.codec import MAX_STRING_BYTES, ColumnSpec
from dpcomm.queries.groupby import (
    GroupPartials,
    check_sums_fit,
    empty_partials,
    evaluate,
    finalize_partials,
    group_ids,
    grouping_set_partials,
    key_order,
    merge_partials,
    partition_keys,
)
from dpcomm.queries.program import IntArray, Row, register_program, spec_header
from dpcomm.queries.query import BoundAggregate, SqlDerivation
from dpcomm.validation import MAX_COUNT, check_int

__all__ = [
    "DEFAULT_NUM_TARGETS",
    "DEFAULT_TEXT_BYTES",
    "AggregateOutput",
    "AggregateProgram",
    "AggregateRows",
    "AggregateState",
    "OutputOverflowError",
    "grouping_set_label",
]

#: Bytes of one value in a message, for the plan's message sizes (every value travels as 8).
VALUE_BYTES = 8
#: Default T, the compute nodes (targets) of every grouping set (Table 1 of the paper).
DEFAULT_NUM_TARGETS = 20
#: Default public bound on the UTF-8 bytes of one text value (``max_text_bytes``).
DEFAULT_TEXT_BYTES = 255
#: Largest accepted bound on the groups of one output (``max_groups``).
MAX_OUTPUT_GROUPS = 10_000_000


def _public_width(spec: ColumnSpec, text_bytes: int) -> ColumnSpec:
    """``spec`` with a text field ``text_bytes`` wide (public), if every value fits."""
    if value_kind(spec.sql_type) != "text":
        return spec
    longest = spec.width - TEXT_FIELD_OVERHEAD
    if longest > text_bytes:
        raise InvalidParameterError(
            f"column {spec.name}",
            f"text values of at most {text_bytes:,} bytes of UTF-8 (raise max_text_bytes)",
            f"a value of {longest:,} bytes",
        )
    return replace(spec, width=TEXT_FIELD_OVERHEAD + text_bytes)


def _bounds(bounds: object) -> dict[str, tuple[float, float]]:
    """``bounds`` checked: each column's finite (lo, hi) with lo <= hi."""
    if bounds is None:
        return {}
    if not isinstance(bounds, Mapping):
        raise InvalidParameterError("bounds", "a mapping from column to (lo, hi)", bounds)
    checked: dict[str, tuple[float, float]] = {}
    for name, pair in bounds.items():
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError, OverflowError):
            raise InvalidParameterError(
                f"bounds[{name!r}]", "a pair (lo, hi) of numbers", pair
            ) from None
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise InvalidParameterError(f"bounds[{name!r}]", "finite lo <= hi", pair)
        checked[str(name)] = (low, high)
    return checked


def check_bounds_read(bounds: object, bound: BoundAggregate) -> None:
    """Refuse a bound on a column no SUM, AVG or quantile reads (it would be ignored)."""
    if not isinstance(bounds, Mapping):
        return
    columns = {column for _, column, _, _ in bound.clamps}
    columns |= {quantile[1] for quantile in bound.quantiles}
    clamped = {column.lower() for column in columns}
    for name in bounds:
        if str(name).lower() not in clamped:
            read = ", ".join(sorted(columns)) or "none"
            raise InvalidParameterError(
                "bounds", f"bounds of the columns a SUM, AVG or quantile reads ({read})", name
            )


def grouping_set_label(columns: tuple[str, ...]) -> str:
    """``(A, B)`` for a grouping set, ``()`` for the empty one."""
    return "(" + ", ".join(columns) + ")"


class NoisyRelease(Protocol):
    """What a program asks of its noisy release ([`dpcomm.release.noise.Release`][]).

    The release is bound to a compiled program by the release package
    ([`dpcomm.release.noise.noisy_program`][]); the program, its engines and its nodes only
    call these hooks, so no query or engine module depends on how noise is drawn.
    """

    @property
    def mechanism(self) -> Any:
        """Laplace or Gaussian, with the release's budget (ε2, δ2)."""
        ...

    @property
    def noises(self) -> tuple[Any, ...]:
        """The noise of every released aggregate (`dpcomm.release.mechanisms.AggregateNoise`)."""
        ...

    @property
    def quantiles(self) -> tuple[Any, ...]:
        """Each released quantile's mechanism (`dpcomm.release.quantile.QuantileNoise`)."""
        ...

    @property
    def charged(self) -> tuple[Any, ...]:
        """Every released aggregate's (ε_i, δ_i): the noises and the quantiles."""
        ...

    @property
    def domains(self) -> tuple[tuple[str, tuple[object, ...]], ...]:
        """Key columns with their public values."""
        ...

    @property
    def selection(self) -> Any:
        """The DP key selection of grouping sets without a domain (None: none)."""
        ...

    @property
    def shared_blanket(self) -> bool:
        """Whether the sensitivities cover scramblers with sampling."""
        ...

    @property
    def epsilon(self) -> float:
        """ε2."""
        ...

    @property
    def delta(self) -> float:
        """δ2."""
        ...

    def check_for(self, countermeasures: Countermeasures) -> None:
        """Refuse countermeasures the noise was not calibrated for."""
        ...

    def to_spec(self) -> dict[str, Any]:
        """The public description a node binds again (it names its ``module``)."""
        ...

    def released_rows(
        self, bound: BoundAggregate, rows_by_set: Sequence[Sequence[Row]]
    ) -> list[list[Row]]:
        """Each grouping set's released rows, their aggregates noisy."""
        ...

    def published_rows(
        self, bound: BoundAggregate, raw: Sequence[Sequence[Row]]
    ) -> list[list[Row]]:
        """The rows published from the released ones (post-processing: counts ≥ 0, ...)."""
        ...

    def published(self, program: AggregateProgram, state: AggregateState) -> dict[str, Any]:
        """What a deployment's result node publishes: the released rows and the release."""
        ...


def _release_from_spec(
    bound: BoundAggregate, spec: Mapping[str, Any], *, num_targets: int
) -> NoisyRelease:
    """The release a spec describes, bound again by the release package.

    As for programs (`dpcomm.queries.program.program_from_spec`), the module a spec names
    must be the one that binds it (`dpcomm.release.noise`): a config imports nothing else.
    """
    import importlib

    module = spec.get("module", "dpcomm.release.noise")
    if module != "dpcomm.release.noise":  # a config never makes a node import another module
        raise InvalidParameterError("release module", "dpcomm.release.noise", module)
    binder = importlib.import_module(module)
    release: NoisyRelease = binder.release_from_spec(bound, spec, num_targets=num_targets)
    return release


@dataclass(frozen=True)
class AggregateState:
    """The compute nodes' outputs merged so far, by (flow, compute node)."""

    outputs: tuple[tuple[tuple[str, int], AggregateOutput], ...] = ()

    def as_dict(self) -> dict[tuple[str, int], AggregateOutput]:
        """The outputs by (flow, compute node)."""
        return dict(self.outputs)


@register_program("aggregate")
@dataclass(frozen=True, eq=False)
class AggregateProgram:
    """An Aggregate query compiled to a plan, with the sources' rows (or none on a node).

    Attributes:
        query: the bound query.
        table: the sources' rows, one per source node; None where a node holds no data.
        num_targets: T, the targets (compute nodes) of every non-empty grouping set (the
            empty set has one), at most `dpcomm.validation.MAX_COUNT` (10^6).
        columns: how each column of the query travels (from the table's schema).
        num_sources: S (the table's rows when the table is given).
        max_groups: the public bound on the groups of one compute node's output (None: S,
            which no table can exceed); every output is padded to this many groups.
        max_text_bytes: the public bound on the UTF-8 bytes of a text value; every text
            field of a payload is this wide, whatever the table's longest value (a width
            taken from the data would tell neighbouring tables apart by the frame size).
        source: where the rows are read by ranges when the program holds no table (Parquet
            files, synthetic rows read by the Dask engine's workers).
        release: the noisy release of the result ([`dpcomm.release.noise`][]), or None
            for the exact result over the delivered tuples.
        derivation: what an analyst query's SQL was derived from (the user's SQL, the schema,
            the bounds): a node rebuilt from a config derives it again ([`check_config`][]).
    """

    query: BoundAggregate
    table: Table | None
    num_targets: int = DEFAULT_NUM_TARGETS
    columns: tuple[ColumnSpec, ...] = ()
    num_sources: int = 0
    max_groups: int | None = None
    max_text_bytes: int = DEFAULT_TEXT_BYTES
    source: RowSource | None = field(default=None, repr=False)
    release: NoisyRelease | None = field(default=None, repr=False)
    derivation: SqlDerivation | None = field(default=None, repr=False)
    _routes: dict[str, IntArray] = field(default_factory=dict, repr=False)
    _released: dict[int, tuple[AggregateState, list[list[Row]], list[list[Row]]]] = field(
        default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        check_int("num_targets", self.num_targets, minimum=1, maximum=MAX_COUNT)
        check_int("max_text_bytes", self.max_text_bytes, minimum=1, maximum=MAX_STRING_BYTES)
        if self.table is not None:
            self.query.check_table(self.table)
            object.__setattr__(self, "num_sources", self.table.num_rows)
            if not self.columns:
                needed = {c.lower() for c in self.query.grouping_columns} | {
                    o.column.lower() for o in self.query.outputs if o.column
                }
                if self.query.filter_column is not None:
                    needed.add(self.query.filter_column.lower())
                check_int(
                    "max_text_bytes", self.max_text_bytes, minimum=1, maximum=MAX_STRING_BYTES
                )
                specs = tuple(
                    _public_width(ColumnSpec.of(c), self.max_text_bytes)
                    for c in self.table.columns
                    if c.name.lower() in needed
                )
                object.__setattr__(self, "columns", specs)
        check_int("num_sources", self.num_sources, minimum=0)
        if self.max_groups is not None:
            check_int("max_groups", self.max_groups, minimum=1, maximum=MAX_OUTPUT_GROUPS)

    @classmethod
    def from_sql(
        cls,
        sql: str,
        data: Table | RowSource,
        *,
        num_targets: int = DEFAULT_NUM_TARGETS,
        max_groups: int | None = None,
        max_text_bytes: int = DEFAULT_TEXT_BYTES,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        count_rows: bool = False,
    ) -> AggregateProgram:
        """Parse ``sql``, bind it to ``data`` (renamed to the FROM table) and compile it.

        ``bounds`` clamp the columns a SUM or AVG reads, on each source's row, and
        ``count_rows`` adds a COUNT(*) to the outputs when the query has no COUNT: what a
        noisy release needs ([`dpcomm.release.noise.noisy_program`][] compiles a query
        with its release).

        ``data`` is a `dpcomm.data.table.Table` the program holds, or a
        [`RowSource`][] (Parquet files, synthetic rows) whose rows
        are not read here: the query is bound to its schema, S is its number of rows, and an
        engine reads the rows partition by partition, checking each ([`rows`][]).
        """
        from dpcomm.queries.sql import bind_sql, derivation_of, project

        table = data if isinstance(data, Table) else data.schema()
        checked = None if bounds is None else _bounds(bounds)
        bound = bind_sql(sql, table, bounds=checked, count_rows=count_rows)
        if bounds is not None:
            check_bounds_read(bounds, bound)
        program = cls(
            bound,
            project(bound, table.renamed(bound.table_name)),
            num_targets,
            max_groups=max_groups,
            max_text_bytes=max_text_bytes,
            derivation=derivation_of(sql, table, bounds=checked, count_rows=count_rows),
        )
        if isinstance(data, Table):
            return program
        return replace(program, table=None, num_sources=int(data.num_rows), source=data)

    # ------------------------------------------------------------------ public description

    def to_spec(self) -> dict[str, Any]:
        """The public description, JSON-ready (a node rebuilds the program from it)."""
        return {
            **spec_header("aggregate", AggregateProgram),
            "query": self.query.to_dict(),
            "num_targets": self.num_targets,
            "columns": [c.to_dict() for c in self.columns],
            "num_sources": self.num_sources,
            "max_groups": self.max_groups,
            "max_text_bytes": self.max_text_bytes,
            "release": None if self.release is None else self.release.to_spec(),
            "derivation": None if self.derivation is None else self.derivation.to_dict(),
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> AggregateProgram:
        """Inverse of [`to_spec`][] (without rows; a release is bound again)."""
        bound = BoundAggregate.from_dict(spec["query"])
        release = spec.get("release")
        derivation = spec.get("derivation")
        return cls(
            bound,
            None,
            int(spec["num_targets"]),
            tuple(ColumnSpec.from_dict(c) for c in spec["columns"]),
            int(spec["num_sources"]),
            None if spec.get("max_groups") is None else int(spec["max_groups"]),
            int(spec.get("max_text_bytes", DEFAULT_TEXT_BYTES)),
            release=None
            if release is None
            else _release_from_spec(bound, release, num_targets=int(spec["num_targets"])),
            derivation=None if derivation is None else SqlDerivation.from_dict(derivation),
        )

    def check_config(self) -> None:
        """Refuse derived SQL that is not what the user's SQL derives (a node's config is data).

        The row projection and the post-processing are derived again from the user's SQL and
        the schema through the checks of ``run`` (`dpcomm.queries.sql.check_derived`).
        """
        from dpcomm.queries.sql import check_derived

        check_derived(self.query, self.derivation)

    @property
    def name(self) -> str:
        """Short description for reports."""
        sets = ", ".join(grouping_set_label(s) for s in self.query.grouping_sets)
        return f"Aggregate over grouping sets {sets}, T={self.num_targets}"

    @cached_property
    def flow_names(self) -> tuple[str, ...]:
        """One flow per grouping set, labelled by its columns (numbered if repeated)."""
        labels = [grouping_set_label(s) for s in self.query.grouping_sets]
        names = []
        for index, label in enumerate(labels):
            names.append(label if labels.count(label) == 1 else f"{label}#{index + 1}")
        return tuple(names)

    def set_index(self, flow: str) -> int:
        """The grouping set sent on ``flow``."""
        try:
            return self.flow_names.index(flow)
        except ValueError:
            raise InvalidParameterError(
                "flow", f"one of {', '.join(self.flow_names)}", flow
            ) from None

    def targets_of(self, index: int) -> int:
        """T of grouping set ``index``: its compute nodes (1 for the empty set)."""
        return self.num_targets if self.query.grouping_sets[index] else 1

    @cached_property
    def message_bytes(self) -> int:
        """Payload of a source message: the grouping values and the aggregated columns."""
        widest = max(
            len(self.query.carried_columns(i)) for i in range(self.query.num_grouping_sets)
        )
        return VALUE_BYTES * max(1, widest)

    @cached_property
    def plan(self) -> ExecutionPlan:
        """Sources, one group of compute nodes per grouping set, and the result node."""
        return aggregate_plan(
            num_sources=self.num_sources,
            flows=self.flow_names,
            num_targets=[self.targets_of(i) for i in range(len(self.flow_names))],
            message_bytes=self.message_bytes,
        )

    @property
    def stages(self) -> tuple[tuple[str, ...], ...]:
        """A single stage: every grouping set is sent at once."""
        return (self.flow_names,)

    def initial_state(self) -> AggregateState:
        """Nothing merged yet."""
        return AggregateState()

    # ------------------------------------------------------------------ hooks

    def route(self, state: AggregateState, flow: str, rows: Table) -> IntArray:
        """The compute node of each row's key for the grouping set of ``flow``.

        The partition of keys is public and computed by each source from its own row
        ([`dpcomm.queries.groupby.partition_keys`][]).
        """
        if rows is self.table and flow in self._routes:
            return self._routes[flow]
        index = self.set_index(flow)
        columns = self.query.grouping_sets[index]
        if not columns:
            targets = np.zeros(rows.num_rows, dtype=np.int64)
        else:
            ids, keys = group_ids(rows, columns, np.ones(rows.num_rows, dtype=bool))
            nodes = partition_keys(keys, self.targets_of(index))
            targets = np.asarray(nodes, dtype=np.int64)[ids]
        if rows is self.table:
            self._routes[flow] = targets
        return targets

    def carried(self, flow: str, rows: Table) -> Table:
        """The grouping set's columns and the aggregated columns of ``rows``."""
        return rows.select(self.query.carried_columns(self.set_index(flow)))

    def target_partials(
        self, step: TargetStep, tuples: Table, tuple_targets: IntArray
    ) -> dict[int, GroupPartials]:
        """Each compute node's mergeable partials over some of its real tuples.

        Every group lies on one compute node (its key's, the target of any of its tuples),
        so one group-by over the tuples of all the ``targets``, split by node, gives each
        node's own partials. A node's partials are a
        [`GroupPartials`][] (picklable).
        """
        index = self.set_index(step.flow)
        selected = np.ones(tuples.num_rows, dtype=bool)
        partials = grouping_set_partials(self.query, tuples, index, selected)
        owners = np.asarray(tuple_targets, dtype=np.int64)
        representatives = partials.representatives
        # The empty grouping set's group over no tuples (representative −1) is node 0's.
        group_owners = np.zeros(partials.num_groups, dtype=np.int64)
        real = representatives >= 0
        group_owners[real] = owners[representatives[real]]
        return partials.split(group_owners, [int(t) for t in step.targets])

    def combine_partials(
        self, step: TargetStep, partials: Sequence[Mapping[int, Any]]
    ) -> dict[int, AggregateOutput]:
        """Each compute node's output from its partials over disjoint sets of its tuples.

        Equal to [`target_outputs`][dpcomm.protocol.roles.target_outputs] over the union of the
        sets, whatever the split and the order of ``partials``
        ([`merge_partials`][]).
        """
        index = self.set_index(step.flow)
        outputs: dict[int, AggregateOutput] = {}
        for target in step.targets:
            node = int(target)
            parts = [part[node] for part in partials if node in part]
            if parts:
                merged = merge_partials(parts)
            else:
                merged = empty_partials(self.query, index)
                if node != 0:
                    merged = merged.take([])
            rows, keys = finalize_partials(self.query, merged)
            outputs[node] = AggregateOutput(tuple(keys), tuple(rows))
        return outputs

    def merge(
        self,
        state: AggregateState,
        stage: int,
        outputs: Mapping[tuple[str, int], AggregateOutput],
    ) -> AggregateState:
        """The state with these compute nodes' outputs (replacing any earlier ones)."""
        merged = state.as_dict()
        merged.update(outputs)
        return AggregateState(tuple(sorted(merged.items(), key=lambda item: item[0])))

    def core_result(self, state: AggregateState) -> list[list[Row]]:
        """Each grouping set's rows as the compute nodes computed them, in key order.

        The order is [`dpcomm.queries.groupby.evaluate`][]'s (NULLs last), whichever node
        computed which group. A SUM beyond its SQL type (DECIMAL(38, s), HUGEINT) is refused as
        DuckDB refuses it ([`dpcomm.queries.groupby.check_sums_fit`][]). Under a noisy
        release, the released rows: the noise is drawn once per final state (the same rows
        for the result and the report).
        """
        if self.release is None:
            return self._exact_result(state)
        return self._drawn(state)[2]

    def raw_core_result(self, state: AggregateState) -> list[list[Row]]:
        """[`core_result`][] before the release's post-processing: the noisy values as drawn.

        Unbiased (a count may be negative); what sums over many cells should read. Without a
        release, the exact rows.
        """
        if self.release is None:
            return self._exact_result(state)
        return self._drawn(state)[1]

    def raw_result(self, state: AggregateState) -> list[Row]:
        """[`result`][] of the raw released values ([`raw_core_result`][])."""
        from dpcomm.queries.postprocess import finish

        return finish(self.query, self.raw_core_result(state))

    def _drawn(
        self, state: AggregateState
    ) -> tuple[AggregateState, list[list[Row]], list[list[Row]]]:
        """(state, raw released rows, published rows): the noise drawn once per state."""
        if self.release is None:
            raise InvalidParameterError("program", "a program with a noisy release", None)
        cached = self._released.get(id(state))
        if cached is not None and cached[0] is state:
            return cached
        raw = self.release.released_rows(self.query, self._exact_result(state))
        drawn = (state, raw, self.release.published_rows(self.query, raw))
        self._released[id(state)] = drawn
        return drawn

    def check_countermeasures(self, countermeasures: Countermeasures) -> None:
        """Refuse traffic a noisy release was not calibrated for (none without a release)."""
        if self.release is not None:
            self.release.check_for(countermeasures)

    def published(self, state: AggregateState) -> dict[str, Any] | None:
        """Under a noisy release, its rows and guarantee (noise drawn here); else None."""
        return None if self.release is None else self.release.published(self, state)

    def without_release(self) -> AggregateProgram:
        """The same program releasing its exact result (the non-private baseline's)."""
        return self if self.release is None else replace(self, release=None, _released={})

    def _exact_result(self, state: AggregateState) -> list[list[Row]]:
        merged = state.as_dict()
        per_set: list[list[Row]] = []
        for flow in self.flow_names:
            pairs = [
                pair
                for (name, _), output in merged.items()
                if name == flow
                for pair in zip(output.keys, output.rows, strict=True)
            ]
            pairs.sort(key=lambda pair: key_order(pair[0]))
            per_set.append([dict(row) for _, row in pairs])
        check_sums_fit(self.query, [row for rows in per_set for row in rows])
        return per_set

    def result(self, state: AggregateState) -> list[Row]:
        """The final result: [`core_result`][] post-processed.

        [`dpcomm.queries.postprocess.finish`][] adds the grouping-set column and runs an
        analyst query's expressions, HAVING, ORDER BY and LIMIT in DuckDB.
        """
        from dpcomm.queries.postprocess import finish

        return finish(self.query, self.core_result(state))

    # ------------------------------------------------------------------ driver side

    @property
    def rows(self) -> AggregateRows | None:
        """The sources' rows: the table, or the row source read by ranges (None on a node)."""
        if self.table is not None:
            return AggregateRows(InMemoryRows(self.table), self.query, self.columns, None)
        if self.source is not None:
            return AggregateRows(
                self.source, self.query, self.columns, self.max_text_bytes, raw=True
            )
        return None

    @cached_property
    def codec(self) -> AggregateCodec:
        """How the tuples, outputs and sources' rows travel."""
        return AggregateCodec(
            self.query,
            self.columns,
            self.flow_names,
            self.num_sources,
            self.max_groups,
            released=self.release is not None,
        )

    def source_rows(self) -> Table:
        """The sources' rows (only where the program holds them: a table, read whole)."""
        if self.table is None:
            raise InvalidParameterError("table", "a program with the sources' rows", None)
        return self.table

    def nonprivate_result(self) -> list[Row]:
        """The result over every tuple (what DuckDB returns for the SQL on the whole table)."""
        table = self.source_rows()
        everything = np.ones(table.num_rows, dtype=bool)
        return evaluate(self.query, table, [everything] * self.query.num_grouping_sets)


@dataclass(frozen=True, eq=False)
class AggregateRows:
    """The sources' rows of an Aggregate program, read by ranges (what engines call ``rows``).

    Attributes:
        source: where the rows are (a table in memory, Parquet files, synthetic rows).
        query: the bound query (its schema checks every range read).
        columns: the columns the query reads, as they travel.
        max_text_bytes: the public bound on a text value, checked on every range read (None:
            the whole table was checked when the program was built).
        raw: whether ``source`` holds the raw rows, which an analyst query's row projection
            turns into the rows it reads (a program's own table is projected already).
    """

    source: RowSource
    query: BoundAggregate
    columns: tuple[ColumnSpec, ...]
    max_text_bytes: int | None
    raw: bool = False

    @property
    def num_rows(self) -> int:
        """S."""
        return int(self.source.num_rows)

    def part(self, start: int, stop: int) -> AggregateRows:
        """Rows [start, stop) as rows of their own, small to ship (a partition's)."""
        return replace(self, source=row_range(self.source, start, stop))

    def read(self, start: int, stop: int) -> Table:
        """Rows [start, stop) of the columns the query reads, checked against the program.

        What the program checks of a whole table: the bound schema, and text values of at
        most ``max_text_bytes`` bytes (InvalidParameterError otherwise).
        """
        if self.raw and self.query.projection is not None:
            from dpcomm.queries.sql import project

            rows = project(self.query, self.source.read(start, stop), first_row=start)
            names = [c.name for c in self.columns]
            rows = rows.select(names)
        else:
            names = [c.name for c in self.columns]
            rows = self.source.read(start, stop, names)
        if self.max_text_bytes is not None:
            needed = {name.lower() for name in names}
            self.query.check_table(rows, columns=needed)
            for column in rows.columns:
                if column.name.lower() in needed:
                    _public_width(ColumnSpec.of(column), self.max_text_bytes)
        return rows
