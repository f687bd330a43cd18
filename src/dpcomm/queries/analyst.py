"""Analyst SQL: WHERE, derived keys and measures, HAVING, ORDER BY, LIMIT, GROUPING(), variances.

The decentralized execution of the paper (Section 2.1) runs an Aggregate query whose grouping
keys and aggregated values are columns of a source's row. An analyst's query is rewritten into
three parts, each run where the paper's model allows it:

1. **A row projection**, a deterministic function of one row that DuckDB evaluates (never
   re-implemented): every derived grouping key (``FLOOR(age / 10)``, ``date_trunc``, ``CASE``,
   string functions, casts), every derived aggregate argument (``SUM(m1 * 2)``), the squares a
   variance needs, and the WHERE condition as a boolean column. A source's derived row depends
   on its own row only.
2. **The core Aggregate query** over the derived columns, run by the decentralized plan as
   before. The WHERE column travels inside the sealed payload: a row that fails the filter is
   routed and sent exactly as if it passed (its key chooses its compute node), and the compute
   node leaves it out. The traffic is therefore the same function of the keys as without the
   WHERE, and the reported (ε, δ) holds unchanged (``docs/accounting.md``).
3. **Post-processing at the result node**, by DuckDB over the union of the compute nodes'
   outputs: expressions over aggregates (a variance from its mergeable sums), GROUPING(),
   HAVING, ORDER BY, LIMIT and OFFSET, DuckDB's output names and types. It reads only the
   released result: it changes no privacy number.

[`rewrite`][] returns ``None`` for a query already in the core class (nothing to rewrite).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import sqlglot
from sqlglot import exp

from dpcomm.data.table import Table, value_kind
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.functions import ALLOWED_FUNCTIONS
from dpcomm.queries.query import (
    EVERY_KEY,
    ROWID_COLUMN,
    PostProcessing,
    UnsupportedQueryError,
)

#: Prefix of every column dpcomm adds (derived keys, measures, the filter, hidden aggregates).
HIDDEN_PREFIX = "__dpcomm_"
#: The derived boolean column of the WHERE condition.
FILTER_COLUMN = f"{HIDDEN_PREFIX}where"
#: The table name the result rows take in post-processing.
RESULT_TABLE = f"{HIDDEN_PREFIX}result"
#: Hidden column of the result rows' canonical order (grouping set, then key).
ORDER_COLUMN = f"{HIDDEN_PREFIX}order"
#: Hidden column of the result rows' grouping set (its index), selected last by the post SQL.
SET_COLUMN = f"{HIDDEN_PREFIX}set"

_ORDER_ADVICE = (
    "FIRST(), LAST() and ANY_VALUE() of a value that varies within a group depend on the "
    "order rows reach a compute node, which no node knows; use MIN() or MAX()"
)
#: Aggregates refused, with why and what to do instead.
_REFUSED: dict[type, str] = {
    exp.Median: "MEDIAN() has no mergeable partial state: compute nodes would have to ship "
    "every value; use AVG(), or GROUP BY a binned column (FLOOR(x / w)) and read the "
    "median off the counts, or release it with noise (release= and bounds=)",
    exp.PercentileCont: "quantiles have no mergeable partial state; GROUP BY a binned column "
    "and read the quantile off the counts, or release QUANTILE_CONT(x, q) with noise "
    "(release= and bounds=)",
    exp.PercentileDisc: "quantiles have no mergeable partial state; GROUP BY a binned column "
    "and read the quantile off the counts",
    exp.Quantile: "quantiles have no mergeable partial state; GROUP BY a binned column and "
    "read the quantile off the counts, or release it with noise (release= and bounds=)",
    exp.Mode: "MODE() has no mergeable partial state; GROUP BY the column and take the "
    "largest COUNT(*)",
    exp.GroupConcat: "STRING_AGG() of a value that varies within a group, without ORDER BY "
    "that value, joins the values in the order rows reach a compute node, which no node "
    "knows; write STRING_AGG(x, sep ORDER BY x), or GROUP BY the column",
    exp.ArrayAgg: "LIST()/ARRAY_AGG() of a value that varies within a group keeps the order "
    "rows reach a compute node, which no node knows; write STRING_AGG(x, sep ORDER BY x), or "
    "GROUP BY the column",
    exp.First: _ORDER_ADVICE,
    exp.Last: _ORDER_ADVICE,
    exp.AnyValue: _ORDER_ADVICE,
    exp.ArgMin: "ARG_MIN()/MIN_BY() breaks ties by the order rows reach a compute node, which "
    "no node knows; use MIN() of the value",
    exp.ArgMax: "ARG_MAX()/MAX_BY() breaks ties by the order rows reach a compute node, which "
    "no node knows; use MAX() of the value",
}
#: How the user writes a refused aggregate that sqlglot prints under another name.
_REFUSED_NAMES: dict[type, str] = {
    exp.GroupConcat: "STRING_AGG()", exp.ArrayAgg: "LIST()/ARRAY_AGG()", exp.Median: "MEDIAN()",
    exp.Mode: "MODE()", exp.Quantile: "QUANTILE()",
}  # fmt: skip
#: Aggregates whose value does not depend on the order of the rows when their argument is
#: constant within each group (`_Rewriter.constant_in_group`).
_ORDER_FREE_WHEN_CONSTANT = (exp.First, exp.Last, exp.AnyValue, exp.GroupConcat)
#: Candidates of a released quantile: a grid of this many points over the column's bounds,
#: both included (`dpcomm.release.quantile.candidate_grid`); each value is snapped to the
#: nearest one on the source's row and counted in its bin.
QUANTILE_CANDIDATES = 33
_QUANTILES = (exp.Median, exp.PercentileCont, exp.Quantile)
_DISTINCT_ADVICE = (
    "distinct values cannot be merged from per-node partials without shipping the values; "
    "GROUP BY the column and count the groups instead"
)


@dataclass(frozen=True)
class Rewritten:
    """An analyst query as a row projection, a core Aggregate query and a post-processing.

    Attributes:
        projection: ``SELECT <derived columns> FROM "<table>"``: DuckDB evaluates it on rows.
        core: the Aggregate query over the projection's columns (core class only).
        filter_column: the WHERE column of the projection, or None without WHERE.
        post: the result node's post-processing.
        key_labels: each key column of the core query and the key as the user wrote it
            (``floor((age / 10))``), to label grouping sets.
        clamps: under a noisy release, each clamped measure column: the column it reads and
            its (lo, hi).
        aggregate_labels: each hidden aggregate column and the user's aggregate it serves
            (``AVG(body_mass_g)``), to name it in reports.
        column_labels: each derived column and the user's SQL it holds (a key's alias), to
            name it in messages.
        key_aliases: each key column selected under another name and that name (the output
            ``AS r`` of ``GROUP BY round(z)``).
        centres: each clamped measure column that is centred: the midpoint c of its bounds,
            subtracted on the source's row (`centred_columns`).
        value_uses: per aggregate the user wrote (each published value's), the hidden
            columns its value reads and their coefficients in its error variance
            (`dpcomm.release.mechanisms.published_error_costs`): a COUNT or plain SUM reads
            its column (1); a centred SUM the centred sum (1) and the COUNT (c²); an AVG the
            sum (1) and the COUNT ((hi − lo)²/12, the spread of an average within its
            bounds, over the count squared).
        quantiles: under a noisy release, each released quantile (`_Rewriter.quantile`): the
            hidden column that carries it, the column read, its (lo, hi), α, and the hidden
            COUNT of each candidate's bin.
    """

    projection: str
    core: str
    filter_column: str | None
    post: PostProcessing
    key_labels: dict[str, str]
    clamps: dict[str, tuple[str, float, float]]
    aggregate_labels: dict[str, str]
    column_labels: dict[str, str]
    key_aliases: dict[str, str]
    centres: dict[str, float] = field(default_factory=dict)
    value_uses: tuple[tuple[tuple[str, float], ...], ...] = ()
    quantiles: tuple[tuple[str, str, float, float, float, tuple[str, ...]], ...] = ()


def _sql(node: Any) -> str:
    """``node`` as DuckDB SQL."""
    return str(node.sql(dialect="duckdb"))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def clamped_sql(column: str, low: float, high: float, centre: float = 0.0) -> str:
    """DuckDB SQL of ``column`` clamped to [``low``, ``high``] on each row, as DOUBLE.

    What bounds a noisy SUM's or AVG's sensitivity (`dpcomm.release.mechanisms`). A NULL
    stays NULL (DuckDB's GREATEST and LEAST would skip it). A non-zero ``centre`` is
    subtracted after clamping: the value then lies in [low − centre, high − centre].
    """
    shift = f" - {centre!r}" if centre else ""
    return (
        f"CASE WHEN {_quoted(column)} IS NOT NULL THEN CAST(LEAST(GREATEST("
        f"CAST({_quoted(column)} AS DOUBLE), {low!r}), {high!r}){shift} AS DOUBLE) END"
    )


def _bare_column(node: exp.Expression | None) -> str | None:
    """The lower-case name of a plain column argument (parentheses removed), else None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return node.name.lower()
    return None


def centred_columns(
    select: exp.Select, bounds: Mapping[str, tuple[float, float]]
) -> frozenset[str]:
    """The bounded columns whose SUM and AVG a release centres (lower-case names).

    A column whose count of non-NULL values the release publishes anyway: read by an
    AVG, or by both a SUM and a COUNT. Its values are clamped to [lo, hi] and shifted by
    c = (lo + hi)/2 on the source's row; the released centred sum gets the sensitivity of
    values in [−(hi − lo)/2, (hi − lo)/2], and SUM = centred sum + c × COUNT, AVG =
    c + centred sum / COUNT, the COUNT being the same released one. A lone SUM is not
    centred: its published value would need a COUNT released for it, whose noise times |c|
    costs more than the centring saves (docs/accounting.md, "Centred sums").
    """
    reads: dict[str, set[type]] = {}
    for node in select.find_all(exp.Avg, exp.Sum, exp.Count):
        name = _bare_column(node.this)
        if name is not None:
            reads.setdefault(name, set()).add(type(node))
    bounded = {str(k).lower() for k in bounds}
    return frozenset(
        name
        for name, kinds in reads.items()
        if name in bounded and (exp.Avg in kinds or {exp.Sum, exp.Count} <= kinds)
    )


def _normal(node: exp.Expression, qualifiers: frozenset[str]) -> str:
    """A key expression's text, columns unqualified and lower-case (to match repeats)."""
    copy = node.copy()
    for column in copy.find_all(exp.Column):
        if column.table and column.table.lower() in qualifiers:
            column.set("table", None)
        column.set("this", exp.to_identifier(column.name.lower()))
    while isinstance(copy, exp.Paren):
        copy = copy.this
    return _sql(copy)


class _Rewriter:
    """Builds the three parts of one query (see the module docstring)."""

    def __init__(
        self,
        select: exp.Select,
        table: Table,
        qualifiers: frozenset[str],
        typer: Callable[[str], str],
        bounds: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.select = select
        self.table = table
        self.typer = typer
        #: Under a noisy release, each bounded column's (lo, hi); None without a release.
        self.bounds = bounds
        #: Derived measure column -> the column it reads and the (lo, hi) it is clamped to.
        self.clamps: dict[str, tuple[str, float, float]] = {}
        #: Centred measure column -> the midpoint c subtracted (`centred_columns`).
        self.centres: dict[str, float] = {}
        self.centred = frozenset() if bounds is None else centred_columns(select, bounds)
        self.qualifiers = qualifiers
        self.columns = {c.name.lower(): c.name for c in table.columns}
        for name in self.columns:
            if name.startswith(HIDDEN_PREFIX):
                raise InvalidParameterError(
                    f"column {self.columns[name]}",
                    f"a name that does not start with {HIDDEN_PREFIX} (dpcomm's own columns)",
                    self.columns[name],
                )
        #: Derived column name -> its SQL over the table (projection order).
        self.derived: dict[str, str] = {}
        #: Normalized key expression -> derived (or plain) column name.
        self.keys: dict[str, str] = {}
        self.key_labels: dict[str, str] = {}
        #: Measure SQL -> derived column.
        self.measures: dict[str, str] = {}
        #: Core aggregate SQL -> hidden result column.
        self.aggregates: dict[str, str] = {}
        self.groupings: list[tuple[str, ...]] = []
        #: Hidden aggregate column -> the user's aggregate it serves (for reports).
        self.hidden_labels: dict[str, str] = {}
        self.current_label: str | None = None
        #: The FILTER (WHERE ...) condition of the aggregate being rewritten, or None.
        self.condition: exp.Expression | None = None
        #: What each aggregate call's value reads (`Rewritten.value_uses`), in order.
        self.uses: dict[tuple[tuple[str, float], ...], None] = {}
        #: Released quantiles (`Rewritten.quantiles`), by carrier column.
        self.quantiles: dict[str, tuple[str, float, float, float, tuple[str, ...]]] = {}

    # ---------------------------------------------------------------- projection

    def column_of(self, node: exp.Column, where: str) -> str:
        if node.args.get("db") or node.args.get("catalog"):
            raise UnsupportedQueryError("a qualified column name", _sql(node))
        if node.table and node.table.lower() not in self.qualifiers:
            raise UnsupportedQueryError("a column of another table", f"{_sql(node)} {where}")
        name = self.columns.get(node.name.lower())
        if name is None and node.name.lower() == "rowid":
            return ROWID_COLUMN  # DuckDB's row position: the row's position in the table
        if name is None:
            raise InvalidParameterError(
                f"column {node.name} ({where})",
                f"a column of the table: {', '.join(self.table.column_names)}",
                node.name,
            )
        return name

    def check_row_expression(self, node: exp.Expression, where: str) -> None:
        """Refuse what is not a deterministic function of one row."""
        for inner in node.walk():
            if isinstance(inner, exp.Subquery | exp.Select | exp.Exists):
                raise UnsupportedQueryError("subquery", f"{where}: {_sql(node)[:80]}")
            if isinstance(inner, exp.Window):
                raise UnsupportedQueryError(
                    "window function", f"{_sql(inner)[:80]}: a source sees only its own row"
                )
            if isinstance(inner, exp.AggFunc):
                raise UnsupportedQueryError(f"aggregate {where}", _sql(inner)[:80])
            if isinstance(inner, exp.Rand):
                raise UnsupportedQueryError(
                    "a random function",
                    f"{_sql(inner)}: a source's derived row must be "
                    "a deterministic function of its row",
                )
            if isinstance(inner, exp.CurrentDate | exp.CurrentTimestamp | exp.CurrentTime):
                raise UnsupportedQueryError(
                    "the current date or time", f"{_sql(inner)}: not the same on every node"
                )
            if isinstance(inner, exp.Column):
                self.column_of(inner, where)
        check_functions(node)

    def derive(self, prefix: str, node: exp.Expression, where: str) -> str:
        """The column holding ``node``'s value for each row (a plain column is itself)."""
        bare = node
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if isinstance(bare, exp.Column) and isinstance(bare.this, exp.Identifier):
            name = self.column_of(bare, where)
            if name != ROWID_COLUMN:
                return name
        self.check_row_expression(bare, where)
        text = _sql(bare.copy().transform(self.rowid_read))
        for name, sql in self.derived.items():
            if sql == text and name.startswith(f"{HIDDEN_PREFIX}{prefix}"):
                return name
        name = f"{HIDDEN_PREFIX}{prefix}{len(self.derived)}"
        self.derived[name] = text
        return name

    def rowid_read(self, node: exp.Expression) -> exp.Expression:
        """DuckDB's ``rowid`` as the column the projection reads it from (`ROWID_COLUMN`)."""
        if (
            isinstance(node, exp.Column)
            and isinstance(node.this, exp.Identifier)
            and node.name.lower() == "rowid"
            and "rowid" not in self.columns
        ):
            return exp.column(ROWID_COLUMN, quoted=True)
        return node

    # ---------------------------------------------------------------- grouping keys

    def referenced(self, node: exp.Expression) -> tuple[exp.Expression, str | None]:
        """A GROUP BY position or select-list alias as the expression it names, and the alias.

        As DuckDB: ``GROUP BY 2`` is the second select item, ``GROUP BY crs`` the item
        ``AS crs`` unless the table has a column ``crs`` (the column wins).
        """
        items = list(self.select.expressions)
        bare = node
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if not isinstance(bare, exp.Literal | exp.Column):
            return node, None
        node = bare
        if isinstance(node, exp.Literal) and not node.is_string:
            position = int(node.name) if node.name.isdigit() else 0
            if not 1 <= position <= len(items):
                raise InvalidParameterError("GROUP BY position", f"1..{len(items)}", node.name)
            item = items[position - 1]
            if isinstance(item, exp.Alias):
                return item.this, item.alias
            return item, None
        if (
            isinstance(node, exp.Column)
            and isinstance(node.this, exp.Identifier)
            and not node.table
            and node.name.lower() not in self.columns
        ):
            for item in items:
                if isinstance(item, exp.Alias) and item.alias.lower() == node.name.lower():
                    return item.this, item.alias
        return node, None

    def key(self, node: exp.Expression) -> exp.Column:
        node, alias = self.referenced(node)
        if isinstance(node, exp.AggFunc):
            raise UnsupportedQueryError("aggregate in GROUP BY", _sql(node))
        if isinstance(node, exp.Literal | exp.Null | exp.Boolean):
            raise UnsupportedQueryError("constant in GROUP BY", _sql(node))
        normal = _normal(node, self.qualifiers)
        if normal not in self.keys:
            name = self.derive("k", node, "in GROUP BY")
            self.keys[normal] = name
            bare = node
            while isinstance(bare, exp.Paren):
                bare = bare.this
            label = alias or _sql(bare)
            self.key_labels[name] = name if name in self.table.column_names else label
        return exp.column(self.keys[normal], quoted=True)

    def rewrite_group(self, group: exp.Group) -> exp.Group:
        """GROUP BY with every leaf key replaced by its derived column."""

        def leaf(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.GroupingSets | exp.Rollup | exp.Cube):
                return node.__class__(expressions=[leaf(e) for e in node.expressions])
            if isinstance(node, exp.Tuple):
                return exp.Tuple(expressions=[leaf(e) for e in node.expressions])
            if isinstance(node, exp.Paren) and isinstance(node.this, exp.Tuple):
                return leaf(node.this)
            return self.key(node)

        if group.args.get("all"):
            raise UnsupportedQueryError("GROUP BY ALL", "list the grouping columns")
        for key, value in group.args.items():
            if key not in ("expressions", "all") and value:
                raise UnsupportedQueryError(f"GROUP BY {key.upper()}", _sql(group))
        if not group.expressions:
            raise UnsupportedQueryError("an empty GROUP BY")
        return exp.Group(expressions=[leaf(e) for e in group.expressions])

    # ---------------------------------------------------------------- aggregates

    def hidden(self, core_sql: str) -> exp.Column:
        if core_sql not in self.aggregates:
            name = f"{HIDDEN_PREFIX}a{len(self.aggregates)}"
            self.aggregates[core_sql] = name
            self.hidden_labels[name] = self.current_label or core_sql
        return exp.column(self.aggregates[core_sql], quoted=True)

    def read(self, *columns: tuple[exp.Column, float]) -> exp.Column:
        """Record that one aggregate's value reads ``columns`` (hidden, with coefficients)."""
        self.uses[tuple((column.name, coefficient) for column, coefficient in columns)] = None
        return columns[0][0]

    def measure(self, argument: exp.Expression, function: str) -> str:
        if argument.find(exp.Column) is None and self.type_of(argument) == '"NULL"':
            argument = exp.cast(argument.copy(), "INTEGER")  # a NULL of no type: no value
        if self.condition is not None:
            argument = exp.Case(ifs=[exp.If(this=self.condition.copy(), true=argument.copy())])
        return _quoted(self.derive("m", argument, f"inside {function.upper()}()"))

    def filtered(self, node: exp.Filter) -> exp.Expression:
        """``agg FILTER (WHERE c)``: the aggregate of ``CASE WHEN c THEN x END``.

        The condition is evaluated on each source's row like a WHERE, and only changes a
        value the row carries (NULL when the condition fails): every row is sent as without
        the FILTER, so the traffic does not depend on it.
        """
        where = node.expression
        condition = where.this if isinstance(where, exp.Where) else where
        self.check_row_expression(condition, "in FILTER")
        inner = node.this
        if isinstance(inner, exp.Anonymous) and inner.name.lower() in _EXACT_SUMS:
            inner = _EXACT_SUMS[inner.name.lower()](inner)
        if not isinstance(inner, exp.AggFunc):
            raise UnsupportedQueryError("FILTER on a non-aggregate", _sql(node)[:80])
        self.condition = exp.Paren(this=condition.copy())
        self.current_label = _sql(node)
        try:
            return self.aggregate(inner)
        finally:
            self.condition = None
            self.current_label = None

    def aggregate(self, node: Any) -> exp.Expression:
        """The post-processing expression of one aggregate call over hidden core columns."""
        text = _sql(node)[:80]
        if self.bounds is not None and isinstance(node, _QUANTILES):
            return self.quantile(node)
        # exact values, never under a noisy release (which publishes only noisy aggregates)
        if self.bounds is None and isinstance(node, _ORDER_FREE_WHEN_CONSTANT):
            constant = self.constant_in_group(node)
            if constant is not None:
                return constant
        if (
            self.bounds is None
            and isinstance(node, exp.GroupConcat)
            and isinstance(node.this, exp.Order)
        ):
            ordered = self.ordered_string_agg(node)
            if ordered is not None:
                return ordered
        if type(node) in _REFUSED:
            construct = _REFUSED_NAMES.get(type(node), text)
            raise UnsupportedQueryError(construct, _REFUSED[type(node)])
        argument = node.this
        if isinstance(argument, exp.Distinct):
            raise UnsupportedQueryError("DISTINCT inside an aggregate", _DISTINCT_ADVICE)
        if isinstance(argument, exp.Order):
            # every aggregate answered here is order-insensitive (DuckDB ignores the order)
            self.check_row_expression(argument, "in an aggregate's ORDER BY")
            argument = argument.this
        extra = [k for k, v in node.args.items() if k not in ("this", "big_int") and v]
        if extra:
            raise UnsupportedQueryError("extra arguments of an aggregate", text)
        if isinstance(node, exp.Count):
            if argument is None or isinstance(argument, exp.Star):
                if self.condition is not None:
                    counted = self.measure(exp.Literal.number(1), "count")
                    return self.read((self.hidden(f"COUNT({counted})"), 1.0))
                return self.read((self.hidden("COUNT(*)"), 1.0))
            if self.bounds is not None and _bare_column(argument) in self.centred:
                return self.read((self.hidden(f"COUNT({self.bounded_measure(argument)[0]})"), 1.0))
            if value_kind(self.type_of(argument)) is None:  # a LIST, INTERVAL, ...: its NULLs
                argument = _parsed(f"CASE WHEN ({_sql(argument)}) IS NOT NULL THEN TRUE END")
            return self.read((self.hidden(f"COUNT({self.measure(argument, 'count')})"), 1.0))
        if argument is None:
            raise UnsupportedQueryError("an aggregate without argument", text)
        if isinstance(node, exp.CountIf):
            condition = exp.Case(ifs=[exp.If(this=argument.copy(), true=exp.true())])
            return self.read((self.hidden(f"COUNT({self.measure(condition, 'count_if')})"), 1.0))
        if self.bounds is not None:
            return self.released(node, argument)
        simple: dict[type, str] = {
            exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX",
        }  # fmt: skip
        if type(node) in simple:
            function = simple[type(node)]
            kind = self.type_of(argument)
            if function == "AVG" and kind in _TEMPORAL_AVERAGES:
                return self.temporal_average(argument)
            if function == "AVG" and kind == "INTERVAL":
                return self.interval_average(argument)
            if function in ("MIN", "MAX") and value_kind(kind) is None:
                return self.keyed_extreme(argument, function)
            if function in ("SUM", "AVG") and self.is_boolean(argument):
                argument = exp.cast(argument.copy(), "INTEGER")
            return self.hidden(f"{function}({self.measure(argument, function)})")
        if isinstance(node, exp.LogicalAnd | exp.LogicalOr):
            as_int = exp.cast(argument.copy(), "INTEGER")
            function = "MIN" if isinstance(node, exp.LogicalAnd) else "MAX"
            inner = self.hidden(f"{function}({self.measure(as_int, function)})")
            return exp.cast(inner, "BOOLEAN")
        if isinstance(node, exp.Variance | exp.VariancePop | exp.Stddev | exp.StddevSamp
                      | exp.StddevPop):  # fmt: skip
            return self.variance(node, argument)
        name = node.sql_name() if hasattr(node, "sql_name") else type(node).__name__
        raise UnsupportedQueryError(
            f"aggregate function {name.lower()}()",
            "supported: COUNT, COUNT_IF, SUM, AVG, MIN, MAX, BOOL_AND, BOOL_OR, VAR_SAMP, "
            "VAR_POP, STDDEV_SAMP, STDDEV_POP, STRING_AGG(x, sep ORDER BY x)",
        )

    def released(self, node: Any, argument: exp.Expression) -> exp.Expression:
        """SUM or AVG under a noisy release: of a bounded column, clamped on the source's row.

        AVG becomes SUM / COUNT of the clamped values (both released with noise; NULL when
        the noisy count is not positive). A centred column's (`centred_columns`) SUM is
        the centred sum + c × COUNT and its AVG c + centred sum / COUNT.
        """
        if not isinstance(node, exp.Sum | exp.Avg):
            raise UnsupportedQueryError(
                f"{_sql(node)[:60]} under a noisy release",
                "a release adds noise to COUNT, COUNT_IF, SUM and AVG of bounded columns",
            )
        if _bare_column(argument) is None:
            raise UnsupportedQueryError(
                f"{_sql(node)[:60]} under a noisy release", "SUM and AVG of a column with bounds"
            )
        name, centre, width = self.bounded_measure(argument)
        total_column = self.hidden(f"SUM({name})")
        if isinstance(node, exp.Sum) and not centre:
            return self.read((total_column, 1.0))
        total = _sql(total_column)
        count_column = self.hidden(f"COUNT({name})")
        count = _sql(count_column)
        if isinstance(node, exp.Sum):
            self.read((total_column, 1.0), (count_column, centre**2))
            text = f"{total} + {centre!r} * {count}"
        else:
            self.read((total_column, 1.0), (count_column, width**2 / 12.0))
            shift = f"{centre!r} + " if centre else ""
            text = f"CASE WHEN {count} > 0 THEN {shift}{total} / {count} END"
        return cast(exp.Expression, sqlglot.parse_one(text, read="duckdb"))

    def quantile(self, node: Any) -> exp.Expression:
        """MEDIAN(x), QUANTILE_CONT(x, q), QUANTILE(x, q) under a noisy release.

        Each source clamps x to its bounds [lo, hi] and snaps it to the nearest of the
        `QUANTILE_CANDIDATES` grid points; the core query counts each grid point's values
        (one hidden COUNT per candidate: mergeable) and carries a hidden column, NULL in the
        exact result, in which the release draws the quantile from those counts
        (`dpcomm.release.quantile`). The counts themselves are never published.
        """
        text = _sql(node)[:60]
        argument = node.this
        if isinstance(node.parent, exp.WithinGroup):
            raise UnsupportedQueryError(
                "PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x) under a noisy release",
                "write QUANTILE_CONT(x, q)",
            )
        if _bare_column(argument) is None:
            raise UnsupportedQueryError(
                f"{text} under a noisy release", "MEDIAN and QUANTILE_CONT of a column with bounds"
            )
        alpha = 0.5
        if not isinstance(node, exp.Median):
            given = node.args.get("expression") or node.args.get("quantile")
            number = _literal_number(given)
            if number is None or not 0.0 <= number <= 1.0:
                raise InvalidParameterError(
                    f"quantile of {text}", "one number in [0, 1] (0.5: the median)", _sql(given)
                )
            alpha = number
        bare = argument
        while isinstance(bare, exp.Paren):
            bare = bare.this
        column = self.column_of(cast(exp.Column, bare), "inside MEDIAN()")
        found = next(
            (v for k, v in (self.bounds or {}).items() if k.lower() == column.lower()), None
        )
        if found is None:
            raise InvalidParameterError(
                "bounds",
                f"a (lo, hi) for column {column}, whose quantile a noisy release draws over a "
                f"grid of its bounds (e.g. bounds={{{column!r}: (0, 100)}}, "
                f"--bounds {column}=0:100)",
                dict(self.bounds or {}),
            )
        low, high = float(found[0]), float(found[1])
        if not low < high:
            raise InvalidParameterError(f"bounds[{column!r}]", "lo < hi for a quantile", found)
        step = (high - low) / (QUANTILE_CANDIDATES - 1)
        clamped = clamped_sql(column, low, high)
        snapped = f"CAST(ROUND(({clamped} - {low!r}) / {step!r}) AS INTEGER)"
        bins = []
        for index in range(QUANTILE_CANDIDATES):
            counted = cast(
                exp.Expression,
                sqlglot.parse_one(f"CASE WHEN {snapped} = {index} THEN 1 END", read="duckdb"),
            )
            bins.append(self.hidden(f"COUNT({self.measure(counted, 'median')})").name)
        slot = cast(
            exp.Expression,
            sqlglot.parse_one(
                f"CASE WHEN FALSE THEN CAST({_quoted(column)} AS DOUBLE) * {alpha!r} END",
                read="duckdb",
            ),
        )
        carrier = self.hidden(f"MIN({self.measure(slot, 'median')})")
        self.quantiles[carrier.name] = (column, low, high, alpha, tuple(bins))
        return self.read((carrier, 1.0))

    def bounded_measure(self, argument: exp.Expression) -> tuple[str, float, float]:
        """The clamped (and, for a centred column, centred) measure of a bounded column.

        Its quoted name, the centre c subtracted on the source's row (0: not centred) and
        the bounds' width hi − lo.
        """
        bare = argument
        while isinstance(bare, exp.Paren):
            bare = bare.this
        column = self.column_of(cast(exp.Column, bare), "inside SUM()")
        bounds = self.bounds or {}
        found = next((v for k, v in bounds.items() if k.lower() == column.lower()), None)
        if found is None:
            raise InvalidParameterError(
                "bounds",
                f"a (lo, hi) for column {column}, whose values a noisy SUM or AVG reads "
                f"(e.g. bounds={{{column!r}: (0, 100)}}, --bounds {column}=0:100)",
                dict(bounds),
            )
        low, high = float(found[0]), float(found[1])
        centre = (low + high) / 2.0 if column.lower() in self.centred else 0.0
        clamped: exp.Expression = sqlglot.parse_one(  # type: ignore[assignment]
            clamped_sql(column, low, high, centre), read="duckdb"
        )
        if self.condition is not None:  # FILTER (WHERE c): NULL where c fails, as measure()
            clamped = exp.Case(ifs=[exp.If(this=self.condition.copy(), true=clamped)])
        name = self.derive("m", clamped, "inside SUM()")
        self.clamps[name] = (column, low, high)
        if centre:
            self.centres[name] = centre
        return _quoted(name), centre, high - low

    def temporal_average(self, argument: exp.Expression) -> exp.Expression:
        """AVG of a DATE, TIME or TIMESTAMP: DuckDB's mean of its ticks, rounded half up.

        Each source carries its value's ticks since the epoch (microseconds, nanoseconds for
        a DATE, whose mean DuckDB gives as TIMESTAMP_NS); the compute nodes sum them exactly
        (HUGEINT) and count them, and the result node divides as DuckDB does (quotient
        truncated, plus one when the remainder exceeds half the count).
        """
        kind = self.type_of(argument)
        ticks, make = _TEMPORAL_AVERAGES[kind]
        value = cast(exp.Expression, sqlglot.parse_one(ticks.format(_sql(argument)), read="duckdb"))
        count = _sql(self.hidden(f"COUNT({self.measure(value, 'avg')})"))
        total = _sql(self.hidden(f"SUM({self.measure(value, 'avg')})"))
        mean = (
            f"CAST({total} // {count} + CASE WHEN {total} % {count} > {count} // 2 THEN 1 "
            "ELSE 0 END AS BIGINT)"
        )
        parsed = sqlglot.parse_one(
            f"CASE WHEN {count} > 0 THEN {make.format(mean)} END", read="duckdb"
        )
        return cast(exp.Expression, parsed)

    def constant_in_group(self, node: Any) -> exp.Expression | None:
        """FIRST, LAST, ANY_VALUE or STRING_AGG of a value constant within each group, or None.

        A value is constant within a group when it reads no column but the query's grouping
        columns (GROUP BY without GROUPING SETS, ROLLUP or CUBE): the constants of
        ``FIRST(1)`` and ``STRING_AGG('hello', ',')``, the key of ``STRING_AGG(DISTINCT
        g::VARCHAR ORDER BY g::VARCHAR DESC) ... GROUP BY g``. The order rows reach a compute
        node then changes nothing: FIRST, LAST and ANY_VALUE are the MIN of the value;
        STRING_AGG(DISTINCT v) is v, and STRING_AGG(v, sep) over n non-NULL values v repeated
        n times, separated by sep (DuckDB's answer whatever its ORDER BY). None when the
        value varies within a group (the aggregate is refused).
        """
        argument, distinct = node.this, False
        if isinstance(argument, exp.Order):
            self.check_row_expression(argument, "in an aggregate's ORDER BY")
            argument = argument.this
        if isinstance(argument, exp.Distinct) and len(argument.expressions) == 1:
            argument, distinct = argument.expressions[0], True
        separator = node.args.get("separator") or exp.Literal.string(",")
        extra = [k for k, v in node.args.items() if k not in ("this", "separator") and v]
        if argument is None or extra or not self.constant_within_groups(argument, separator):
            return None
        if not isinstance(node, exp.GroupConcat):
            return self.aggregate(exp.Min(this=argument.copy()))
        value = exp.cast(argument.copy(), "VARCHAR")
        first = _sql(self.aggregate(exp.Min(this=value)))
        if distinct:
            return _parsed(first)
        count = _sql(self.hidden(f"COUNT({self.measure(value, 'string_agg')})"))
        return _parsed(
            f"CASE WHEN {count} > 0 THEN repeat({first} || {_sql(separator)}, {count} - 1) "
            f"|| {first} END"
        )

    def ordered_string_agg(self, node: exp.GroupConcat) -> exp.Expression | None:
        """STRING_AGG(x ORDER BY x) (also DISTINCT, DESC): None if ordered by anything else.

        Its order is fixed by the query: each compute node collects its groups' non-NULL
        values of x (the core query's LIST, kept in a canonical order, so merging is
        deterministic), and the result node sorts them as DuckDB's ORDER BY would
        (``list_sort``; ``list_distinct`` first for DISTINCT) and joins them, each cast to
        VARCHAR, with the separator: DuckDB's answer exactly. NULL for a group without a
        non-NULL value (and for a NULL separator).
        """
        order = node.this
        argument, distinct = order.this, False
        if isinstance(argument, exp.Distinct) and len(argument.expressions) == 1:
            argument, distinct = argument.expressions[0], True
        terms = list(order.expressions)
        separator = node.args.get("separator") or exp.Literal.string(",")
        extra = [k for k, v in node.args.items() if k not in ("this", "separator") and v]
        if (
            len(terms) != 1
            or extra
            or separator.find(exp.Column) is not None
            or _normal(terms[0].this, self.qualifiers) != _normal(argument, self.qualifiers)
        ):
            return None
        values = _sql(self.hidden(f"ARRAY_AGG({self.measure(argument, 'string_agg')})"))
        if distinct:
            values = f"list_distinct({values})"
        direction = "DESC" if terms[0].args.get("desc") else "ASC"
        joined = f"array_to_string(list_sort({values}, '{direction}'), {_sql(separator)})"
        return _parsed(f"CASE WHEN {_sql(separator)} IS NOT NULL THEN {joined} END")

    def constant_within_groups(self, *nodes: exp.Expression) -> bool:
        """Whether ``nodes`` read nothing but the keys of every grouping set (or no column).

        A key is a GROUP BY column or expression (``i % 2`` in ``FIRST(i % 2) ... GROUP BY
        i % 2``), without GROUPING SETS, ROLLUP or CUBE (whose sets leave keys out).
        """
        if all(node.find(exp.Column) is None for node in nodes):
            return True
        group = self.select.args.get("group")
        if not isinstance(group, exp.Group) or group.find(exp.GroupingSets, exp.Rollup, exp.Cube):
            return False

        def key_as_constant(inner: exp.Expression) -> exp.Expression:
            if _normal(inner, self.qualifiers) in self.keys:
                return exp.Null()
            return inner

        return all(
            node.copy().transform(key_as_constant).find(exp.Column) is None for node in nodes
        )

    def interval_average(self, argument: exp.Expression) -> exp.Expression:
        """AVG of an INTERVAL: DuckDB's mean of its months, days and microseconds.

        Each source carries its value's three fields as integers; the compute nodes sum each
        exactly and count them; the result node divides as DuckDB does: each field's quotient
        truncated, a month's remainder carried to days (30 a month), a day's to microseconds.
        """
        fields = [
            "datepart('year', {0}) * 12 + datepart('month', {0})",
            "datepart('day', {0})",
            "datepart('hour', {0}) * 3600000000 + datepart('minute', {0}) * 60000000 "
            "+ datepart('microseconds', {0})",
        ]
        text = _sql(argument)
        values = [_parsed(f.format(f"({text})")) for f in fields]
        count, months, days, micros = (
            _sql(self.hidden(f"{function}({self.measure(value, 'avg')})"))
            for function, value in [("COUNT", values[0]), *(("SUM", v) for v in values)]
        )
        carried = f"({days} % {count} + ({months} % {count} * 30) % {count})"
        mean = (
            f"to_months(CAST({months} // {count} AS INTEGER)) + to_days(CAST({days} // {count} "
            f"+ ({months} % {count} * 30) // {count} AS INTEGER)) + to_microseconds(CAST("
            f"{micros} // {count} + ({micros} % {count} + {carried} * 86400000000) // {count} "
            "AS BIGINT))"
        )
        return _parsed(f"CASE WHEN {count} > 0 THEN {mean} END")

    def keyed_extreme(self, argument: exp.Expression, function: str) -> exp.Expression:
        """MIN or MAX of a value of a type no source carries (LIST, STRUCT, INTERVAL, ...).

        Each source carries the value as text behind DuckDB's sort key of it in hexadecimal
        (``create_sort_key``: its bytes order as DuckDB orders the values, NULLs last, as
        MIN and MAX do; hexadecimal digits keep that order, and the space after them sorts
        below any digit): the compute nodes take the MIN or MAX of that text, and the result
        node reads the value back from the text after the key (DuckDB's text of a value
        casts back to it).
        """
        text = _sql(argument)
        keyed = _parsed(
            f"hex(create_sort_key(({text}), 'ASC NULLS LAST')) || ' ' || CAST(({text}) AS VARCHAR)"
        )
        extreme = _sql(self.hidden(f"{function}({self.measure(keyed, function)})"))
        return _parsed(f"substr({extreme}, strpos({extreme}, ' ') + 1)")

    def is_boolean(self, argument: exp.Expression) -> bool:
        return self.type_of(argument) == "BOOLEAN"

    def type_of(self, argument: exp.Expression) -> str:
        """DuckDB's type of a per-row expression over the table."""
        return self.typer(_sql(argument))

    def variance(self, node: exp.Expression, argument: exp.Expression) -> exp.Expression:
        """VAR/STDDEV from COUNT, SUM and SUM of squares (exact sums, rounded once each).

        Integer arguments are summed exactly as HUGEINT (x² too) and the variance formed from
        exact integers (n·Σx² − (Σx)²) before one division; others in DOUBLE.
        """
        kind = self.type_of(argument)
        integer = kind in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                           "UINTEGER", "UBIGINT", "HUGEINT")  # fmt: skip
        target = "HUGEINT" if integer else "DOUBLE"
        value = exp.cast(argument.copy(), target)
        square = exp.Mul(this=exp.cast(argument.copy(), target), expression=value.copy())
        count = self.hidden(f"COUNT({self.measure(value, 'var')})")
        total = self.hidden(f"SUM({self.measure(value, 'var')})")
        squares = self.hidden(f"SUM({self.measure(square, 'var')})")
        c, s, q = (_sql(x) for x in (count, total, squares))
        if integer:
            spread = f"CAST({c} * {q} - {s} * {s} AS DOUBLE) / {c}"
        else:
            spread = f"({q} - {s} * {s} / {c})"
        population = isinstance(node, exp.VariancePop | exp.StddevPop)
        divisor = c if population else f"({c} - 1)"
        floor = 0 if population else 1
        variance = f"GREATEST({spread}, 0) / {divisor}"
        if isinstance(node, exp.Stddev | exp.StddevSamp | exp.StddevPop):
            variance = f"SQRT({variance})"
        parsed = sqlglot.parse_one(f"CASE WHEN {c} > {floor} THEN {variance} END", read="duckdb")
        return cast(exp.Expression, parsed)

    # ---------------------------------------------------------------- outputs

    def lift(self, node: exp.Expression, where: str) -> exp.Expression:
        """``node`` over the core result's columns (aggregates and keys replaced)."""

        def replace(inner: exp.Expression) -> exp.Expression:
            if isinstance(inner, exp.Grouping | exp.GroupingId):
                # GROUPING_ID is DuckDB's other name of GROUPING; GROUPING() reads every key
                if [e.name for e in inner.expressions] == [EVERY_KEY]:
                    columns = tuple(dict.fromkeys(self.keys.values()))
                else:
                    columns = tuple(self.key(e).name for e in inner.expressions)
                self.groupings.append(columns)
                return exp.column(f"{HIDDEN_PREFIX}g{len(self.groupings) - 1}", quoted=True)
            if isinstance(inner, exp.Window):
                raise UnsupportedQueryError(
                    "window function", f"{_sql(inner)[:80]}: not supported over the result"
                )
            if isinstance(inner, exp.Subquery | exp.Select | exp.Exists):
                raise UnsupportedQueryError("subquery", f"{where}: {_sql(inner)[:80]}")
            if isinstance(inner, exp.Filter):
                return self.filtered(inner)
            if isinstance(inner, exp.Anonymous) and inner.name.lower() in _EXACT_SUMS:
                return self.lift(_EXACT_SUMS[inner.name.lower()](inner), where)
            if isinstance(inner, exp.AggFunc):
                self.current_label = _sql(inner)
                try:
                    return self.aggregate(inner)
                finally:
                    self.current_label = None
            if isinstance(inner, exp.Anonymous) and inner.name.lower() in AGGREGATE_NAMES:
                raise UnsupportedQueryError(f"aggregate function {inner.name.lower()}()",
                                            _sql(inner)[:80])  # fmt: skip
            if isinstance(inner, exp.Star):
                raise UnsupportedQueryError("SELECT *", where)
            normal = _normal(inner, self.qualifiers)
            if normal in self.keys:
                return exp.column(self.keys[normal], quoted=True)
            if isinstance(inner, exp.Column) and isinstance(inner.this, exp.Identifier):
                name = self.column_of(inner, where)
                raise UnsupportedQueryError(
                    "a selected column outside every grouping set",
                    f"column {name} must appear in the GROUP BY clause or be used in an "
                    "aggregate function",
                )
            return inner

        return node.copy().transform(replace)


def _parsed(sql: str) -> exp.Expression:
    """DuckDB SQL text as an expression."""
    return cast(exp.Expression, sqlglot.parse_one(sql, read="duckdb"))


def _exact_sum(function: type[exp.Sum | exp.Avg]) -> Callable[[exp.Anonymous], exp.Expression]:
    def rewritten(node: exp.Anonymous) -> exp.Expression:
        if len(node.expressions) != 1:
            raise UnsupportedQueryError(f"{node.name}() with {len(node.expressions)} arguments")
        return function(this=exp.cast(node.expressions[0].copy(), "DOUBLE"))

    return rewritten


#: DuckDB's compensated (Kahan) sums and mean: dpcomm's SUM and AVG of doubles are already
#: the exact sum rounded once, at least as accurate.
_EXACT_SUMS: dict[str, Callable[[exp.Anonymous], exp.Expression]] = {
    "fsum": _exact_sum(exp.Sum), "sumkahan": _exact_sum(exp.Sum),
    "kahan_sum": _exact_sum(exp.Sum), "favg": _exact_sum(exp.Avg),
}  # fmt: skip

#: AVG's argument type, the ticks a source carries and how the result node makes the mean.
_TEMPORAL_AVERAGES: dict[str, tuple[str, str]] = {
    "DATE": ("epoch_ns(CAST({} AS TIMESTAMP_NS))", "make_timestamp_ns({})"),
    "TIMESTAMP": ("epoch_us({})", "make_timestamp({})"),
    "TIMESTAMP_S": ("epoch_us(CAST({} AS TIMESTAMP))", "make_timestamp({})"),
    "TIMESTAMP_MS": ("epoch_us(CAST({} AS TIMESTAMP))", "make_timestamp({})"),
    "TIMESTAMP WITH TIME ZONE": ("epoch_us({})", "to_timestamp(0) + to_microseconds({})"),
    "TIME": ("epoch_us(DATE '1970-01-01' + {})", "CAST(make_timestamp({}) AS TIME)"),
    # DuckDB's mean of TIMETZ values is that of their times in UTC, within [0, 24 h)
    "TIME WITH TIME ZONE": (
        "(epoch_us(CAST({0} AS TIME)) - CAST(datepart('timezone', {0}) AS BIGINT) * 1000000 "
        "+ 86400000000) % 86400000000",
        "CAST(CAST(make_timestamp({}) AS TIME) AS TIME WITH TIME ZONE)",
    ),
}

#: Function names sqlglot may leave anonymous but that DuckDB treats as aggregates.
AGGREGATE_NAMES = frozenset({
    "approx_count_distinct", "approx_quantile", "arg_max", "arg_min", "argmax", "argmin",
    "entropy", "favg", "fsum", "histogram", "kurtosis", "mad", "product", "skewness",
    "reservoir_quantile", "sem", "bit_and", "bit_or", "bit_xor", "corr", "covar_pop",
    "covar_samp", "regr_slope", "string_agg", "list", "arbitrary", "max_by", "min_by",
    "sumkahan", "kahan_sum",
})  # fmt: skip


def global_group(select: exp.Select) -> exp.Group:
    """The query's GROUP BY; without one, an aggregate query's empty grouping set ``()``.

    ``SELECT COUNT(*), SUM(x) FROM t`` is DuckDB's global aggregate: one row over all rows,
    exactly ``GROUP BY ()`` (one compute node, a single potential target).
    """
    group = select.args.get("group")
    if isinstance(group, exp.Group):
        return group
    if not any(_is_aggregate(node) for item in select.expressions for node in item.walk()):
        raise UnsupportedQueryError(
            "a query without aggregate or GROUP BY",
            "an Aggregate query computes COUNT, SUM, AVG, ... per group or over all rows",
        )
    return exp.Group(expressions=[exp.Tuple()])


def _is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.AggFunc | exp.Grouping | exp.GroupingId):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in AGGREGATE_NAMES


def _select_list(select: exp.Select, rewriter: _Rewriter) -> list[exp.Expression]:
    """The select list's expressions over the core result (no ``*``)."""
    finals = []
    for item in select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star) or (
            isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
        ):
            raise UnsupportedQueryError("SELECT *", _sql(node))
        finals.append(rewriter.lift(node, "in the select list"))
    return finals


def _order_items(order: exp.Expression, rewriter: _Rewriter, output_names: list[str]) -> list[str]:
    """ORDER BY's terms over the result: a position, an output's name, or an expression."""
    order_items: list[str] = []
    for ordered in _order_all(order, output_names):
        inner = ordered.this
        term: exp.Expression
        if isinstance(inner, exp.Literal) and not inner.is_string:
            position = int(inner.name)
            if not 1 <= position <= len(output_names):
                raise InvalidParameterError(
                    "ORDER BY position", f"1..{len(output_names)}", position
                )
            term = exp.column(output_names[position - 1], quoted=True)
        elif (
            isinstance(inner, exp.Column)
            and not inner.table
            and inner.name.lower() in {n.lower() for n in output_names}
            and _normal(inner, rewriter.qualifiers) not in rewriter.keys
        ):
            name = next(n for n in output_names if n.lower() == inner.name.lower())
            term = exp.column(name, quoted=True)
        else:
            term = rewriter.lift(inner, "in ORDER BY")
        item = ordered.copy()
        item.set("this", term)
        order_items.append(_sql(item))
    return order_items


def _order_all(order: exp.Expression, output_names: list[str]) -> list[exp.Ordered]:
    """ORDER BY's terms, ``ORDER BY ALL`` spelled out: every output, left to right."""
    terms = list(order.expressions)
    if len(terms) == 1 and isinstance(terms[0].this, exp.Var) and terms[0].name.upper() == "ALL":
        spelled = []
        for position in range(1, len(output_names) + 1):
            item = terms[0].copy()
            item.set("this", exp.Literal.number(position))
            spelled.append(item)
        return spelled
    return terms


def _projection_sql(rewriter: _Rewriter, table: Table, key_columns: list[str]) -> str:
    """The projection: the keys, the derived columns and the columns the aggregates read."""
    projection_items = [f"{_quoted(c)}" for c in key_columns if c in table.column_names]
    projection_items += [f"{sql} AS {_quoted(name)}" for name, sql in rewriter.derived.items()]
    measured = {name.strip('"') for text in rewriter.aggregates for name in _inner_columns(text)}
    projection_items += [
        _quoted(c) for c in sorted(measured) if c in table.column_names and c not in key_columns
    ]
    if not projection_items:  # no key and no column read (SELECT 1 ... GROUP BY ())
        projection_items = [f"TRUE AS {_quoted(HIDDEN_PREFIX + 'row')}"]
    return f"SELECT {', '.join(dict.fromkeys(projection_items))} FROM {_quoted(table.name)}"


def _core_sql(
    rewriter: _Rewriter,
    table: Table,
    key_columns: list[str],
    core_group: exp.Group,
    *,
    count_rows: bool,
) -> str:
    """The core query: the keys and the aggregates, grouped (a hidden COUNT(*) if needed)."""
    counted = any(text.startswith("COUNT(") for text in rewriter.aggregates)
    if not rewriter.aggregates or (count_rows and not counted):
        rewriter.current_label = None
        rewriter.hidden("COUNT(*)")  # a core query needs an aggregate (or a count); hidden
    core_items = [_quoted(c) for c in key_columns] + [
        f"{text} AS {_quoted(name)}" for text, name in rewriter.aggregates.items()
    ]
    return (
        f"SELECT {', '.join(core_items)} FROM {_quoted(table.name)} "
        f"GROUP BY {_sql(core_group)[len('GROUP BY ') :]}"
    )


def _post_sql(
    finals: list[exp.Expression],
    output_names: list[str],
    output_types: list[str],
    *,
    having_sql: str | None,
    order_items: list[str],
    limit: int | None,
    offset: int | None,
) -> str:
    """The post-processing over the core result: cast outputs, HAVING, ORDER BY, LIMIT."""
    post_items = [
        f"CAST({_sql(final)} AS {sql_type}) AS {_quoted(name)}"
        for final, name, sql_type in zip(finals, output_names, output_types, strict=True)
    ]
    post_items.append(_quoted(SET_COLUMN))
    post_sql = f"SELECT {', '.join(post_items)} FROM {_quoted(RESULT_TABLE)}"
    if having_sql is not None:
        post_sql += f" WHERE {having_sql}"
    post_sql += f" ORDER BY {', '.join([*order_items, _quoted(ORDER_COLUMN)])}"
    if limit is not None:
        post_sql += f" LIMIT {limit}"
    if offset is not None:
        post_sql += f" OFFSET {offset}"
    return post_sql


#: DuckDB functions whose value is not a function of their arguments: random draws and
#: identifiers, sequences and side effects, the clock, and probes of the session (its settings,
#: its query text, its user or database). DuckDB's own VOLATILE functions are all here
#: (a unit test checks it against ``duckdb_functions()``).
UNSTABLE_FUNCTIONS = frozenset(
    {
        *("random", "rand", "setseed", "uuid", "uuidv4", "uuidv7", "gen_random_uuid"),
        *("nextval", "currval", "setval", "write_log", "sleep_ms", "error", "stats"),
        *("vector_type", "now", "today", "transaction_timestamp", "get_current_time"),
        *("get_current_timestamp", "current_date", "current_time", "current_timestamp"),
        *("current_localtime", "current_localtimestamp", "localtime", "localtimestamp"),
        *("current_setting", "current_query", "current_query_id", "current_connection_id"),
        *("current_transaction_id", "txid_current", "current_database", "current_catalog"),
        *("current_schema", "current_schemas", "current_user", "current_role", "user"),
        *("session_user", "getvariable", "in_search_path", "version", "platform", "age"),
    }
)
_FUNCTION_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _duckdb_function_name(node: exp.Func) -> str:
    """The lower-case name DuckDB calls ``node``'s function by (``RANDOM`` for sqlglot's Rand).

    A node DuckDB writes without a call (``CASE``, ``[1, 2]``, ``{'a': 1}``,
    ``CURRENT_DATE``) is named by its sqlglot class (``case``, ``array``, ``struct``).
    """
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    match = _FUNCTION_NAME.match(node.sql(dialect="duckdb"))
    return match.group(1).lower() if match else type(node).__name__.lower()


#: DuckDB functions that build a value whose size is one of their arguments (a list of
#: ``range(n)`` elements, a string of ``repeat(s, n)`` copies): each size must be a literal of
#: most `MAX_BUILT_SIZE` (their product over the query), or one query could fill every
#: node's memory.
SIZED_FUNCTIONS = frozenset(
    {"range", "generate_series", "repeat", "lpad", "rpad", "list_resize", "array_resize"}
)
#: The largest size a `SIZED_FUNCTIONS` call may be given.
MAX_BUILT_SIZE = 10_000


def _check_size_arguments(node: exp.Func, name: str, built: float) -> float:
    """The largest size ``node`` is given (refused past `MAX_BUILT_SIZE`).

    Each size must be a number literal, and the product of the sizes of the query's sized
    calls (``built`` so far) at most `MAX_BUILT_SIZE`.
    """
    if isinstance(node, exp.GenerateSeries):
        sizes = [node.args.get(key) for key in ("start", "end", "step")]
    elif isinstance(node, exp.Anonymous):
        sizes = list(node.expressions[1:2])
    else:
        sizes = [node.args.get("times"), node.args.get("expression")]
    largest = 1.0
    for size in sizes:
        if size is None:
            continue
        bare = size.this if isinstance(size, exp.Neg) else size
        value = float(bare.name) if isinstance(bare, exp.Literal) and not bare.is_string else None
        if value is None or abs(value) * built > MAX_BUILT_SIZE:
            raise UnsupportedQueryError(
                f"{name}() with the size {_sql(size)[:40]}",
                f"{_sql(node)[:80]}: sizes must be number literals whose product over the "
                f"query is at most {MAX_BUILT_SIZE:,} (a larger one could fill every node's "
                "memory)",
            )
        largest = max(largest, abs(value))
    return largest


def check_functions(node: exp.Expression) -> None:
    """Refuse a function that is not on the allow-list, or not deterministic (one line).

    A source's derived row and the result node's post-processing must give the same value on
    every node and in every run, and read nothing but their rows: every scalar function must
    be in `dpcomm.queries.functions.ALLOWED_FUNCTIONS` (DuckDB's deterministic scalar
    functions an analyst needs); `UNSTABLE_FUNCTIONS` (random draws, the clock, the session's
    settings and query text) are refused as such. Aggregates are the rewrite's to check;
    AND/OR are operators. Sizes of `SIZED_FUNCTIONS` are bounded (`MAX_BUILT_SIZE`).

    Raises:
        UnsupportedQueryError: ``node`` calls such a function (named in the message).
    """
    built = 1.0
    for inner in node.walk():
        if not isinstance(inner, exp.Func) or isinstance(inner, exp.Connector):
            continue
        name = _duckdb_function_name(inner)
        if name in SIZED_FUNCTIONS:
            built *= _check_size_arguments(inner, name, built)
        if name in UNSTABLE_FUNCTIONS or type(inner).__name__.startswith("Current"):
            raise UnsupportedQueryError(
                f"the non-deterministic or session function {name}()",
                f"{_sql(inner)[:80]}: its value differs between nodes and runs; a query must be "
                "a deterministic function of its rows",
            )
        if name not in ALLOWED_FUNCTIONS and not _is_aggregate(cast(exp.Expression, inner)):
            raise UnsupportedQueryError(
                f"the function {name}()",
                f"{_sql(inner)[:80]}: {name}() is not on the allow-list of deterministic "
                "scalar functions a node evaluates (docs/execution.md lists them)",
            )


def rewrite(
    select: exp.Select,
    table: Table,
    qualifiers: frozenset[str],
    *,
    output_names: list[str],
    output_types: list[str],
    typer: Callable[[str], str],
    bounds: Mapping[str, tuple[float, float]] | None = None,
    count_rows: bool = False,
) -> Rewritten:
    """Split an analyst query into projection, core query and post-processing.

    ``output_names``/``output_types`` are DuckDB's for the whole query (the post-processing
    casts to them, so the result has DuckDB's names and types); ``typer`` gives DuckDB's type
    of a per-row SQL expression over the table. ``bounds`` (a noisy release) restricts the
    aggregates to COUNT, SUM and AVG, and clamps each SUM's and AVG's column to its bounds.
    ``count_rows`` makes sure the core query has a COUNT (a hidden COUNT(*) if it has none).
    """
    rewriter = _Rewriter(select, table, qualifiers, typer, bounds)
    core_group = rewriter.rewrite_group(global_group(select))
    finals = _select_list(select, rewriter)
    where = select.args.get("where")
    filter_column = None
    if where is not None:
        rewriter.check_row_expression(where.this, "in WHERE")
        condition = _sql(where.this.copy().transform(rewriter.rowid_read))
        rewriter.derived[FILTER_COLUMN] = f"COALESCE(CAST(({condition}) AS BOOLEAN), FALSE)"
        filter_column = FILTER_COLUMN
    check_functions(select)
    having = select.args.get("having")
    having_sql = None if having is None else _sql(rewriter.lift(having.this, "in HAVING"))
    order = select.args.get("order")
    order_items = [] if order is None else _order_items(order, rewriter, output_names)
    limit = _count_clause(select.args.get("limit"), "LIMIT")
    offset = _count_clause(select.args.get("offset"), "OFFSET")

    key_columns = list(dict.fromkeys(rewriter.keys.values()))
    projection = _projection_sql(rewriter, table, key_columns)
    core = _core_sql(rewriter, table, key_columns, core_group, count_rows=count_rows)
    post_sql = _post_sql(
        finals,
        output_names,
        output_types,
        having_sql=having_sql,
        order_items=order_items,
        limit=limit,
        offset=offset,
    )
    labels = {name: rewriter.key_labels[name] for name in key_columns}
    post = PostProcessing(
        sql=post_sql,
        names=tuple(output_names),
        types=tuple(output_types),
        groupings=tuple(rewriter.groupings),
        key_names=tuple(
            name
            for final, name in zip(finals, output_names, strict=True)
            if isinstance(final, exp.Column) and final.name in key_columns
        ),
    )
    return Rewritten(
        projection,
        core,
        filter_column,
        post,
        labels,
        dict(rewriter.clamps),
        dict(rewriter.hidden_labels),
        {**rewriter.derived, **rewriter.key_labels, **rewriter.hidden_labels},
        {
            final.name: name
            for final, name in zip(finals, output_names, strict=True)
            if isinstance(final, exp.Column) and final.name in key_columns
        },
        dict(rewriter.centres),
        tuple(rewriter.uses),
        tuple((carrier, *q) for carrier, q in rewriter.quantiles.items()),
    )


def _literal_number(node: exp.Expression | None) -> float | None:
    """The value of a numeric literal (parentheses and a sign allowed), else None."""
    while isinstance(node, exp.Paren):
        node = node.this
    sign = 1.0
    if isinstance(node, exp.Neg):
        sign, node = -1.0, node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return sign * float(node.this)
        except ValueError:
            return None
    return None


def _inner_columns(core_sql: str) -> list[str]:
    node = sqlglot.parse_one(core_sql, read="duckdb")
    return [c.name for c in node.find_all(exp.Column)]


def _count_clause(node: exp.Expression | None, what: str) -> int | None:
    if node is None:
        return None
    value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if isinstance(value, exp.Literal) and not value.is_string and value.name.isdigit():
        return int(value.name)
    text = _sql(value) if isinstance(value, exp.Expression) else str(value)
    raise UnsupportedQueryError(f"a {what} that is not a whole number", text)


__all__ = [
    "AGGREGATE_NAMES",
    "FILTER_COLUMN",
    "HIDDEN_PREFIX",
    "Rewritten",
    "global_group",
    "rewrite",
]
