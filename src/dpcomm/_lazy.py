"""Lazy package exports (PEP 562): a package's names are imported when first used.

A package ``__init__`` re-exports what a user needs, but importing a submodule (say
``dpcomm.accounting._validation`` in a network worker) must not import every sibling (the
accountant pulls in scipy). Each ``__init__`` lists its exports by module and installs the
``__getattr__`` and ``__dir__`` returned by :func:`attach`; type checkers read the same names
from imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def attach(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` exporting ``exports`` (module -> names)."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:  # noqa: N807
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(where)

    return __getattr__, __dir__
