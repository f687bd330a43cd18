"""Every third-party package the library imports is a declared dependency of ``pip install .``.

A package that only the development toolchain brings (pytest, mkdocs, ...) or that another
dependency happens to pull in would work under ``make`` and fail for a user who installs the
library alone. A package of an optional extra (``pip install '.[explore]'``) may be imported
only by the package that extra serves, whose command says how to install it when it is missing.
"""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_packages() -> dict[str, set[str]]:
    """Top-level modules imported by ``src/dpcomm`` (outside the standard library), with where."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "src" / "dpcomm").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "dpcomm" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


#: The package of dpcomm each optional extra serves (only it may import the extra's packages).
EXTRA_HOMES = {
    "explore": ("src/dpcomm/explorer/",),
    "figures": (
        "src/dpcomm/experiments/figures/",
        "src/dpcomm/cli/plan.py",
        "src/dpcomm/data/images.py",
    ),
}


def _names(requirements: list[str]) -> set[str]:
    return {_normalized(re.split(r"[<>=!~\[; ]", d)[0]) for d in requirements}


def test_every_imported_package_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _names(project["dependencies"])
    extras = {name: _names(project["optional-dependencies"][name]) for name in EXTRA_HOMES}
    distributions = packages_distributions()
    imported = imported_packages()
    assert {"numpy", "pandas", "duckdb"} <= set(imported)
    undeclared = {}
    for module, files in imported.items():
        names = {_normalized(d) for d in distributions.get(module, [module])}
        if names & declared:
            continue
        homes = [
            h for extra, packages in extras.items() if names & packages for h in EXTRA_HOMES[extra]
        ]
        outside = sorted(f for f in files if not any(f.startswith(home) for home in homes))
        if outside:
            undeclared[module] = outside
    assert not undeclared, f"imported but not in [project] dependencies: {undeclared}"


def test_the_figures_extra_is_the_one_its_commands_name():
    from dpcomm.errors import EXTRA_PACKAGES

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for extra, packages in EXTRA_PACKAGES.items():
        assert _names(extras[extra]) == {_normalized(p) for p in packages}
        # `make` installs the dev extra, which brings this one (the tests need it).
        own = [re.fullmatch(r"dpcomm\[(.*)\]", d) for d in extras["dev"]]
        assert extra in [e.strip() for m in own if m for e in m.group(1).split(",")]
