"""A small reader of DuckDB's sqllogictest files (what tests/data/duckdb_sqllogictest uses).

The format (https://duckdb.org/docs/dev/sqllogictest/intro): records separated by blank
lines; ``statement ok`` / ``statement error`` then the SQL (an error's expected message after
``----``); ``query <types> [sort mode] [label]`` then the SQL, ``----`` and the expected rows
(tab-separated); ``foreach <var> <values...>`` ... ``endloop`` repeats its records with
``{var}`` / ``${var}`` replaced; ``require <extension>``; ``#`` comments. Only this subset is
read; any other command raises ``ValueError`` naming it, so a new file fails loudly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Record:
    """One statement or query of a file.

    Attributes:
        kind: ``"statement ok"``, ``"statement error"`` or ``"query"``.
        sql: the SQL text, loop variables substituted.
        types: a query's column types (``"IIR"``), empty for a statement.
        expected: the expected rows as written (tab-separated lines), or an error's message.
        line: the record's first line in the file (1-based).
    """

    kind: str
    sql: str
    types: str
    expected: tuple[str, ...]
    line: int


_COMMANDS_IGNORED = frozenset({"mode", "load", "restart", "reconnect", "sleep", "set"})


def parse(text: str) -> tuple[list[Record], list[str]]:
    """The records of a file (loops unrolled) and the extensions it requires."""
    lines = text.splitlines()
    records: list[Record] = []
    requires: list[str] = []
    _parse_block(lines, 0, len(lines), {}, records, requires)
    return records, requires


def read(path: Path) -> tuple[list[Record], list[str]]:
    """`parse` of the file at ``path``."""
    return parse(path.read_text(encoding="utf-8"))


def _substitute(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = text.replace("${" + name + "}", value).replace("{" + name + "}", value)
    return text


def _loop_end(lines: Sequence[str], start: int, stop: int) -> int:
    """The index of the ``endloop`` closing the loop opened at ``start``."""
    depth = 0
    for index in range(start, stop):
        word = lines[index].split(maxsplit=1)[0] if lines[index].strip() else ""
        if word in ("foreach", "loop"):
            depth += 1
        elif word == "endloop":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"line {start + 1}: a loop without endloop")


def _loop_values(words: list[str]) -> list[str]:
    if words[0] == "loop":
        return [str(value) for value in range(int(words[2]), int(words[3]))]
    return [value.strip("'") for value in words[2:]]


def _parse_block(
    lines: Sequence[str],
    start: int,
    stop: int,
    variables: dict[str, str],
    records: list[Record],
    requires: list[str],
) -> None:
    index = start
    while index < stop:
        line = lines[index]
        if not line.strip() or line.lstrip().startswith("#"):
            index += 1
            continue
        words = line.split()
        command = words[0]
        if command in ("foreach", "loop"):
            end = _loop_end(lines, index, stop)
            for value in _loop_values(words):
                inner = {**variables, words[1]: value}
                _parse_block(lines, index + 1, end, inner, records, requires)
            index = end + 1
        elif command == "require":
            requires.append(words[1])
            index += 1
        elif command in ("statement", "query"):
            index = _record(lines, index, stop, words, variables, records)
        elif command in _COMMANDS_IGNORED:
            index += 1
        else:
            raise ValueError(f"line {index + 1}: unknown sqllogictest command {command!r}")


def _record(
    lines: Sequence[str],
    index: int,
    stop: int,
    words: list[str],
    variables: dict[str, str],
    records: list[Record],
) -> int:
    """Read one record starting at ``index``; the index after it."""
    first = index
    body: list[str] = []
    index += 1
    while index < stop and lines[index].strip() and lines[index].strip() != "----":
        body.append(lines[index])
        index += 1
    expected: list[str] = []
    if index < stop and lines[index].strip() == "----":
        index += 1
        while index < stop and lines[index].strip():
            expected.append(lines[index])
            index += 1
    sql = _substitute("\n".join(body), variables)
    if words[0] == "statement":
        kind, types = f"statement {words[1]}", ""
    else:
        kind, types = "query", words[1]
    records.append(Record(kind, sql, types, tuple(expected), first + 1))
    return index


def files(root: Path) -> Iterator[Path]:
    """The ``.test`` files under ``root``, sorted."""
    yield from sorted(root.rglob("*.test"))
