"""Lazy package exports (PEP 562): a package's names are imported when first used.

A package ``__init__`` re-exports what a user needs, but importing a submodule (say
``dpcomm.plan.countermeasures`` in a network worker) must not import every sibling (plan-level
privacy pulls in the accountant, hence scipy). Each ``__init__`` lists its exports once, as
``from module import name as name`` lines under ``if TYPE_CHECKING:`` (what type checkers
read), and installs the ``__getattr__`` and ``__dir__`` of `attach`, which reads those
same lines from the package's source on first use.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def exports_of(source: str) -> dict[str, str]:
    """Name -> module of the ``from module import name`` lines under ``if TYPE_CHECKING:``."""
    where: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    where[alias.asname or alias.name] = statement.module
    return where


def attach(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``__init__`` is ``init_file``."""
    where: dict[str, str] = {}

    def exports() -> dict[str, str]:
        if not where:
            where.update(exports_of(Path(init_file).read_text(encoding="utf-8")))
        return where

    def __getattr__(name: str) -> Any:  # noqa: N807
        module = exports().get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(exports())

    return __getattr__, __dir__
