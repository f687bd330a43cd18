"""Every public name of the front door has a docstring example, and the examples run (doctest);
``import dpcomm`` stays light."""

import doctest
import functools
import inspect
import os
import subprocess
import sys

import pytest

import dpcomm
import dpcomm.api
import dpcomm.calibration.calibrate
import dpcomm.calibration.query
import dpcomm.datasets

#: The modules of the front door's functions (``calibrate`` is the calibration's, re-exported).
FRONT_DOOR = (dpcomm.api, dpcomm.calibration.calibrate, dpcomm.datasets)


def public_objects():
    """dpcomm's exports, and the public functions and classes of the front door's modules."""
    found = {f"dpcomm.{name}": getattr(dpcomm, name) for name in dpcomm.__all__}
    for module in FRONT_DOOR:
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value) or (inspect.isclass(value) and f"dpcomm.{name}" in found):
                found[f"{module.__name__}.{name}"] = value
    return {name: value for name, value in found.items() if not isinstance(value, str)}


PUBLIC = public_objects()


def test_the_front_door_is_listed():
    for name in ("run_sql", "kmeans", "calibrate", "account", "Scramblers", "datasets"):
        assert f"dpcomm.{name}" in PUBLIC
    assert "dpcomm.datasets.synthetic" in PUBLIC and "dpcomm.api.run_sql" in PUBLIC
    assert "dpcomm.calibration.calibrate.calibrate" in PUBLIC


@functools.cache
def _module_docstrings(module_name: str) -> frozenset[str]:
    """The docstrings (with examples) that ``doctest.testmod`` of the module runs."""
    tests = doctest.DocTestFinder().find(sys.modules[module_name])
    return frozenset(test.docstring for test in tests if test.examples and test.docstring)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_has_an_example_that_runs(name):
    """Its example runs once, with its module's (`test_every_modules_examples_run`)."""
    value = PUBLIC[name]
    finder = doctest.DocTestFinder(recurse=False)
    tests = [test for test in finder.find(value, name, globs={}) if test.examples]
    assert tests, f"{name} has no >>> example in its docstring"
    home = value.__name__ if inspect.ismodule(value) else value.__module__
    assert home in MODULES_WITH_EXAMPLES, home
    ran = _module_docstrings(home)
    assert all(test.docstring in ran for test in tests), f"{home} runs no {name}"


def test_import_dpcomm_is_light():
    heavy = "{'numpy', 'duckdb', 'pandas', 'scipy', 'dask'}"
    code = f"import sys, dpcomm; print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy}))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout.strip() == "[]", done.stderr


def _modules_with_examples() -> list[str]:
    """Every module of the package whose source holds a ``>>>`` example (found by reading the
    files, so that collection imports nothing)."""
    root = os.path.dirname(dpcomm.__file__)
    names = []
    for folder, _, files in os.walk(root):
        for file in sorted(files):
            if not file.endswith(".py") or file == "__main__.py":
                continue
            path = os.path.join(folder, file)
            with open(path, encoding="utf-8") as source:
                if ">>>" not in source.read():
                    continue
            relative = os.path.relpath(path, os.path.dirname(root))[: -len(".py")]
            names.append(relative.replace(os.sep, ".").removesuffix(".__init__"))
    return sorted(names)


MODULES_WITH_EXAMPLES = _modules_with_examples()


def test_the_front_doors_modules_have_examples():
    front_door = [dpcomm, *FRONT_DOOR, dpcomm.calibration.query]
    assert {module.__name__ for module in front_door} <= set(MODULES_WITH_EXAMPLES)


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES)
def test_every_modules_examples_run(name):
    """The examples of every module, not only the front door's: a docstring's output is what
    the code prints."""
    import importlib

    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
