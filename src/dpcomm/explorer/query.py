"""The explorer's query panel: a query run with a countermeasure, beside DuckDB's exact answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpcomm.api import run_sql
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.explore import ExplorerSettings
from dpcomm.pipeline.utility import AggregateUtility


@dataclass(frozen=True, eq=False)
class QueryComparison:
    """A query run with the countermeasure beside DuckDB's exact answer.

    Attributes:
        result: the run's result joined with the exact one on the grouping columns: every
            aggregate column of the run and, beside it, ``<column> (exact)``.
        epsilon: the run's ε (its report).
        delta: its δ.
        tuples_used: real tuples used by the run (per grouping set, the smallest).
        num_sources: the table's rows.
    """

    result: Any
    epsilon: float
    delta: float
    tuples_used: int
    num_sources: int


def _table_name(sql: str) -> str:
    """The table the query reads (the first in its FROM)."""
    import sqlglot
    from sqlglot import expressions

    try:
        parsed = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError as error:
        raise InvalidParameterError("sql", "an Aggregate query (SQL)", sql) from error
    table = parsed.find(expressions.Table)
    if table is None:
        raise InvalidParameterError("sql", "a query reading one table (FROM name)", sql)
    return str(table.name)


def query_against_exact(
    sql: str, data: Any, settings: ExplorerSettings, *, seed: int = 1
) -> QueryComparison:
    """Run ``sql`` over ``data`` (a DataFrame) with ``settings``' countermeasure, and exactly.

    The run is `dpcomm.run_sql` in the memory engine (T and δ of ``settings``); the exact
    result is DuckDB's over the same DataFrame (registered under the query's table name).
    """
    from dpcomm.queries.sql import scratch_connection

    run = run_sql(
        sql,
        data,
        countermeasure=settings.countermeasure,
        num_targets=settings.num_targets,
        delta=settings.delta,
        seed=seed,
    )
    with scratch_connection() as connection:  # no files, no extensions, bounded
        connection.register(_table_name(sql), data)
        exact = connection.sql(sql).df()
    private = run.result
    grouping = _grouping_columns(run)
    keys = [c for c in private.columns if c in exact.columns and c in grouping]
    values = [c for c in private.columns if c in exact.columns and c not in grouping]
    others = [c for c in private.columns if c not in exact.columns]  # e.g. grouping_set
    renamed = exact[keys + values].rename(columns={c: f"{c} (exact)" for c in values})
    if keys:  # pandas matches a NULL key (another grouping set's column) with a NULL key
        merged = private.merge(renamed, on=keys, how="outer")
        order = [*others, *keys]
        merged = merged.sort_values(order, na_position="last", kind="stable")
    else:
        merged = private.join(renamed, how="outer")
    ordered = keys + [name for c in values for name in (c, f"{c} (exact)")] + others
    merged = merged[ordered]
    utility = run.report.utility
    if not isinstance(utility, AggregateUtility):  # no release here: measured utility
        raise TypeError(f"expected an AggregateUtility, got {type(utility).__name__}")
    return QueryComparison(
        result=merged.reset_index(drop=True),
        epsilon=run.report.privacy.epsilon,
        delta=run.report.privacy.delta,
        tuples_used=min(utility.tuples_used.values()) if utility.tuples_used else 0,
        num_sources=utility.sources,
    )


def _grouping_columns(run: Any) -> set[str]:
    """Every column some grouping set of the run's query groups by."""
    return {column for grouping_set in run.program.query.grouping_sets for column in grouping_set}
