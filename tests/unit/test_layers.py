"""A lower layer never imports a higher one (docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src" / "dpcomm"
#: Layer of every package; a module may import its own package and lower layers only
#: (``data`` is a leaf beside ``accounting``: neither imports the other).
LAYERS = {
    "errors": 0,
    "accounting": 1,
    "data": 1,
    "plan": 2,
    "protocol": 3,
    "queries": 4,
    "engine": 5,
    "experiments": 6,
    "cli": 7,
}


def imported_packages(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "dpcomm" and len(parts) > 1:
                yield parts[1]


MODULES = sorted(p for p in SOURCE.rglob("*.py") if p.parent != SOURCE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_module_imports_only_its_layer_and_below(path):
    package = path.relative_to(SOURCE).parts[0]
    assert package in LAYERS, f"unknown package {package}: add it to LAYERS"
    for imported in imported_packages(path):
        if imported == package:
            continue
        assert imported in LAYERS, f"{path.name} imports unknown dpcomm.{imported}"
        assert LAYERS[imported] < LAYERS[package], (
            f"{package}/{path.name} (layer {LAYERS[package]}) imports {imported}"
        )
