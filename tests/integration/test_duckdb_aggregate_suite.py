"""DuckDB's own sqllogictest files for aggregates and grouping sets, through `dpcomm.run_sql`.

The files (tests/data/duckdb_sqllogictest, pinned copies: origin, commit and licence in its
README) are replayed into DuckDB, statement by statement. Every single-table aggregate query
DuckDB accepts (one SELECT over one base table of the file, with an aggregate function or a
GROUP BY) also runs through ``dpcomm.run_sql`` on that table as it stands at that point of the
file, with no countermeasure and with scramblers at σ = 0 (both deliver every tuple, so the
result is exact), in the memory engine. The reference is DuckDB itself on the same table, with
its default settings (the files' ``SET``/``PRAGMA`` statements change only DuckDB's own plans
and its NULL order, which dpcomm does not take).

Each query is *answered* (same column names, DuckDB's types, the same rows: in order when the
query has ORDER BY, as a multiset otherwise; doubles within 1e-9 relative, since dpcomm's float
SUM and AVG are the exact sum rounded once), or *refused* with dpcomm's refusal error
(`dpcomm.errors.InvalidParameterError`) for a construct on the documented list of what a
per-row evaluation cannot answer (`REFUSABLE`, docs/execution.md). Any other outcome fails:
a wrong answer, a crash (any other exception), a refusal of anything else.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from tests.conftest import ordered_output
from tests.integration import _sqllogictest

import dpcomm
from dpcomm.data.table import table_from_relation
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.query import GROUPING_SET_COLUMN

SUITE = Path(__file__).resolve().parents[1] / "data" / "duckdb_sqllogictest"

#: What dpcomm may refuse: each documented construct (docs/execution.md, "What stays
#: refused") and a pattern its one-line message matches.
REFUSABLE: dict[str, str] = {
    "DISTINCT aggregate": r"DISTINCT inside an aggregate|\(DISTINCT",
    "STRING_AGG/LIST of a value that varies within a group, not ordered by it": (
        r"STRING_AGG\(\)|LIST\(\)|ARRAY_AGG"
    ),
    "an aggregate without a mergeable partial state": r"no mergeable partial state|"
    r"unsupported aggregate function|aggregate function \w+\(\)",
    "FIRST/LAST/ANY_VALUE of a varying value, ARG_MIN/ARG_MAX (no order a node knows)": (
        r"depend on the order rows reach|breaks ties by the order rows reach"
    ),
    "subquery": r"unsupported in an Aggregate query: subquery",
    "join": r"JOIN|multiple tables in FROM",
    "window function": r"window function",
    "a key or a SUM of a type no source can carry (INTERVAL, LIST, ...)": (
        r"expected a type dpcomm can carry"
    ),
    "a non-deterministic function (random() in HAVING)": r"non-deterministic or session function",
}


@dataclass(frozen=True)
class Case:
    """One query of a file: where it is, its SQL and the table it reads."""

    file: str
    line: int
    sql: str
    table: str
    expected: tuple[str, ...]


@dataclass
class Outcome:
    """The counts of a replay, and every failure as one line."""

    answered: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)


@cache
def _aggregate_names() -> frozenset[str]:
    connection = duckdb.connect()
    rows = connection.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'"
    ).fetchall()
    return frozenset(name.lower() for (name,) in rows)


def _has_aggregate(node: Any) -> bool:
    if isinstance(node, dict):
        if node.get("class") == "FUNCTION" and node.get("function_name", "").lower() in (
            _aggregate_names() | {"grouping", "grouping_id"}
        ):
            return True
        return any(_has_aggregate(value) for key, value in node.items() if key != "subquery")
    if isinstance(node, list):
        return any(_has_aggregate(value) for value in node)
    return False


def single_table_aggregate(connection: Any, sql: str) -> str | None:
    """The table a single-table aggregate query reads (DuckDB's parser), or None."""
    try:
        (text,) = connection.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    except duckdb.Error:
        return None
    tree = json.loads(text)
    if tree.get("error") or len(tree["statements"]) != 1:
        return None
    node = tree["statements"][0]["node"]
    if node.get("type") != "SELECT_NODE" or node["from_table"].get("type") != "BASE_TABLE":
        return None
    grouped = bool(node.get("group_expressions")) or bool(node.get("group_sets"))
    if not grouped and not _has_aggregate(
        [node.get("select_list"), node.get("having"), node.get("modifiers")]
    ):
        return None
    return str(node["from_table"]["table_name"])


def cases(path: Path, connection: Any) -> Iterator[Case]:
    """Replay ``path`` into ``connection``; yield each query dpcomm runs, as it comes."""
    records, _ = _sqllogictest.read(path)  # requires json, longdouble: DuckDB has both here
    for record in records:
        head = record.sql.lstrip().split(maxsplit=1)[0].upper() if record.sql.strip() else ""
        if head in ("SET", "PRAGMA", "RESET"):
            continue  # DuckDB's plans and NULL order: the reference keeps its defaults
        table = single_table_aggregate(connection, record.sql)
        if table is not None and record.kind != "statement error":
            try:
                connection.execute(record.sql).fetchall()
            except duckdb.Error:
                continue  # DuckDB does not accept it (here): not counted
            yield Case(path.name, record.line, record.sql, table, record.expected)
            continue
        with contextlib.suppress(duckdb.Error):
            connection.execute(record.sql)


def _normal(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _same(x: Any, y: Any) -> bool:
    x, y = _normal(x), _normal(y)
    if x is None or y is None:
        return x is None and y is None
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) or x == y
    return bool(x == y)


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, type(v).__name__, str(_normal(v))) for v in row)


def difference(sql: str, run: Any, names: list[str], types: list[str], rows: list[Any]) -> str:
    """How dpcomm's run differs from DuckDB's answer, or "" when it does not."""
    got_names = [c for c in run.columns if c != GROUPING_SET_COLUMN]
    if got_names != names:
        return f"names {got_names} against DuckDB's {names}"
    query = run.program.query
    got_types = [
        str(t)
        for n, t in zip(query.result_names, query.result_types, strict=True)
        if n != GROUPING_SET_COLUMN
    ]
    if got_types != types:
        return f"types {got_types} against DuckDB's {types}"
    got = [tuple(row[n] for n in names) for row in run.rows]
    if len(got) != len(rows):
        return f"{len(got)} rows against DuckDB's {len(rows)}"
    if not ordered_output(sql):
        got, rows = sorted(got, key=_key), sorted(rows, key=_key)
    for index, (left, right) in enumerate(zip(got, rows, strict=True)):
        if not all(_same(x, y) for x, y in zip(left, right, strict=True)):
            return f"row {index}: {left} against DuckDB's {right}"
    return ""


def as_expected(run: Any, names: list[str], expected: tuple[str, ...]) -> bool:
    """Whether dpcomm's rows are the file's expected result (DuckDB's printed values).

    The files give DuckDB's exact answer: ``test_bigint_avg`` expects the mean of three
    HUGEINTs exactly (0 after subtracting it), which DuckDB computes only with a long double;
    dpcomm's mean is exact too, where a DuckDB build without one is off by 0.5.
    """
    tokens = [token for line in expected for token in line.split("\t")]
    values = [_normal(row[n]) for row in run.rows for n in names]
    if not tokens or len(tokens) != len(values):
        return False
    for token, value in zip(tokens, values, strict=True):
        if value is None:
            if token != "NULL":
                return False
        elif isinstance(value, float):
            if not math.isclose(value, float(token), rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif str(value) != token:
            return False
    return True


COUNTERMEASURES = (
    dpcomm.NoCountermeasure(),
    dpcomm.Scramblers(sampling_rate=0.0, batch_size=4, num_dummies=2),
)


def check(case: Case, connection: Any, outcome: Outcome) -> None:
    """Run ``case`` through dpcomm under each countermeasure; count its outcome."""
    cursor = connection.execute(case.sql)
    names = [d[0] for d in cursor.description]
    types = [str(d[1]) for d in cursor.description]
    rows = cursor.fetchall()
    where = f"{case.file}:{case.line}: {' '.join(case.sql.split())}"
    relation = table_from_relation(connection.table(case.table), case.table)  # read once
    for countermeasure in COUNTERMEASURES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = dpcomm.run_sql(
                    case.sql, relation, countermeasure=countermeasure, num_targets=3, seed=1
                )
        except InvalidParameterError as error:
            message = str(error)
            if not any(re.search(p, message) for p in REFUSABLE.values()):
                outcome.unlisted.append(f"{where}\n    -> {message}")
            outcome.refused.append(where)
            return
        except Exception as error:
            outcome.crashed.append(f"{where}\n    -> {type(error).__name__}: {error}")
            return
        wrong = difference(case.sql, run, names, types, rows)
        if wrong and as_expected(run, names, case.expected):
            wrong = ""  # DuckDB's own expected result, where this build of DuckDB differs
        if wrong:
            outcome.wrong.append(f"{where}\n    -> {type(countermeasure).__name__}: {wrong}")
            return
    outcome.answered.append(where)


def replay() -> Outcome:
    """Every file of the suite through DuckDB and dpcomm."""
    outcome = Outcome()
    for path in _sqllogictest.files(SUITE):
        connection = duckdb.connect()
        try:
            for case in cases(path, connection):
                check(case, connection, outcome)
        finally:
            connection.close()
    return outcome


@pytest.fixture(scope="module")
def outcome(made_once: Any) -> Outcome:
    """The replay, once in the session (its four tests may run on both test workers)."""
    replayed: Outcome = made_once("duckdb-aggregate-suite", lambda _directory: replay())
    return replayed


def test_no_wrong_answer(outcome: Outcome) -> None:
    assert not outcome.wrong, "\n".join(outcome.wrong)


def test_no_crash(outcome: Outcome) -> None:
    assert not outcome.crashed, "\n".join(outcome.crashed)


def test_every_refusal_is_documented(outcome: Outcome) -> None:
    assert not outcome.unlisted, "\n".join(outcome.unlisted)


#: The queries the files hold (single-table aggregate queries DuckDB accepts) and how many
#: dpcomm answers at least (73 before DuckDB's files were its bar; ``COUNT(*)`` over a table
#: without rows is answered too). The 18 others each use a refusable construct: STRING_AGG or
#: LIST of a value that varies within a group (11), DISTINCT aggregates (5, two of them over
#: a table without rows), random() in a HAVING (2).
QUERIES = 158
ANSWERED = 140


def test_answers_the_queries_a_per_row_evaluation_can(outcome: Outcome) -> None:
    total = len(outcome.answered) + len(outcome.refused) + len(outcome.wrong)
    total += len(outcome.crashed)
    assert total == QUERIES
    assert len(outcome.answered) >= ANSWERED, (
        f"{len(outcome.answered)} answered of {total}; refused:\n" + "\n".join(outcome.refused)
    )


if __name__ == "__main__":  # counts by hand: python -m tests.integration.test_duckdb_...
    result = replay()
    for kind in ("answered", "refused", "wrong", "crashed", "unlisted"):
        print(kind, len(getattr(result, kind)))
    for kind in ("wrong", "crashed", "unlisted"):
        for line in getattr(result, kind):
            print(kind.upper(), line)
    for line in result.refused:
        print("REFUSED", line)
