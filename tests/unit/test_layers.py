"""A lower layer never imports a higher one; a network worker imports only what it runs."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src" / "dpcomm"
#: Layer of every package; a module may import its own package and lower layers only
#: (``data`` is a leaf beside ``accounting``: neither imports the other; ``budget``, the
#: ledger of a privacy budget, is another such leaf, which does I/O). The front door
#: (``api``) sits below the CLI, which calls it; so does the explorer (a web app the CLI starts).
LAYERS = {
    "errors": 0,
    "_lazy": 0,
    "validation": 0,
    "progress": 0,
    "_json": 0,
    "accounting": 1,
    "data": 1,
    "budget": 1,
    "plan": 2,
    "protocol": 4,
    "queries": 5,
    "release": 6,
    "engine": 7,
    "pipeline": 8,
    "calibration": 9,
    "experiments": 10,
    "api": 10,
    "explorer": 11,
    "cli": 12,
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


@pytest.mark.parametrize("name", ["api.py", "datasets.py", "__init__.py"])
def test_the_front_door_sits_below_the_command_line(name):
    """The front door (``dpcomm.run_sql``, ...) and the CLI are peers: neither is built on the
    other's printing; only ``python -m dpcomm`` (``__main__``) enters the CLI."""
    assert "cli" not in set(imported_packages(SOURCE / name))


#: What a node of a deployment never needs: the accountant (scipy), the SQL parser and DuckDB
#: (the bound query travels as data), plotting, data frames, learning.
HEAVY = ("scipy", "duckdb", "sqlglot", "sklearn", "matplotlib", "pandas", "mlxtend", "tqdm")


def test_a_network_worker_imports_only_what_its_nodes_run():
    code = (
        "import sys\n"
        "import dpcomm.engine.network.worker\n"
        "from dpcomm.queries.program import program_from_spec\n"
        "import dpcomm.queries.aggregate, dpcomm.queries.kmeans\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""


def test_the_network_nodes_do_not_import_the_memory_engine():
    network = SOURCE / "engine" / "network"
    for path in sorted(network.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                if path.name in ("deploy.py", "__init__.py"):
                    continue  # the driver side assembles the run (dpcomm.engine.run)
                assert not node.module.startswith(
                    ("dpcomm.engine.memory", "dpcomm.pipeline.report", "dpcomm.engine.run")
                ), f"{path.name} imports {node.module}"


def module_name(path):
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path):
    """Modules ``path`` imports when it runs (``if TYPE_CHECKING:`` blocks aside)."""
    name = module_name(path)
    found = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) == "TYPE_CHECKING":
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
                found.update(f"{child.module}.{alias.name}" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text()))
    found.discard(name)
    return found


def test_no_import_circle():
    """No module imports, even inside a function, a module that imports it back."""
    paths = {module_name(p): p for p in SOURCE.rglob("*.py")}
    graph = {name: runtime_imports(path) & set(paths) for name, path in paths.items()}
    circles = []
    for start in graph:
        # Every module reachable from ``start``: a circle reaches ``start`` again.
        seen, frontier = set(), [start]
        while frontier:
            for following in graph[frontier.pop()]:
                if following == start:
                    circles.append(start)
                    frontier = []
                    break
                if following not in seen:
                    seen.add(following)
                    frontier.append(following)
    assert circles == []


ENGINE = SOURCE / "engine"


@pytest.mark.parametrize("path", sorted(ENGINE.rglob("*.py")), ids=lambda p: p.name)
def test_engine_functions_are_short(path):
    """No function of an engine longer than 80 lines: each role's steps read top to bottom."""
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > 80
    ]
    assert long == []


def _imports_the_release(path):
    """Whether ``path`` imports ``dpcomm.release`` when it runs: a package's ``__init__``
    names its lazy exports under ``TYPE_CHECKING`` (`dpcomm._lazy.attach` imports them)."""
    if path.name == "__init__.py":
        names = {f"dpcomm.{name}" for name in imported_packages(path)}
    else:
        names = runtime_imports(path)
    return any(m == "dpcomm.release" or m.startswith("dpcomm.release.") for m in names)


def test_the_release_has_one_owner_and_few_importers():
    """``dpcomm.release`` owns the release; at most 8 modules outside it import it when they
    run (lazy imports inside functions and the front door's lazy names included; an
    ``if TYPE_CHECKING:`` import that only names a type in an annotation aside)."""
    release = SOURCE / "release"
    importers = sorted(
        module_name(path)
        for path in SOURCE.rglob("*.py")
        if release not in path.parents and _imports_the_release(path)
    )
    assert len(importers) <= 8, importers
