"""Every function of the Python front door, driven with bad values: a result, or a named error.

As ``test_cli_fuzz.py`` drives every command: each example replaces one parameter of a cheap
valid call of a front-door function (everything ``dpcomm`` exports that takes parameters, and
``dpcomm.datasets.synthetic``) by a bad value: a wrong type, NaN, ±inf, negative, zero, huge, a
string, None, a pandas or numpy object. The call returns, or raises an InvalidParameterError (or
a documented subclass) naming that parameter, on one line; never an error of a library below
(TypeError, AttributeError, DuckDB's, numpy's warnings) nor a process killed for memory. The
parameters are enumerated from the signatures, so a new one is fuzzed too (with no baseline its
function cannot be called: add one).
"""

import atexit
import contextlib
import inspect
import io
import math
import shutil
import tempfile
import warnings
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

import dpcomm
from dpcomm.errors import DpcommError, DpcommWarning, InvalidParameterError
from dpcomm.queries.aggregate import OutputOverflowError

FRAME = pd.DataFrame({"g": [1, 2, 3] * 10, "v": np.arange(30.0)})
POINTS = np.vstack([np.zeros((10, 2)), np.ones((10, 2)) * 10])
NONE = dpcomm.NoCountermeasure()

#: Each function with a quick valid call (every parameter given, its default where it has one).
BASELINES = {
    dpcomm.run_sql: {
        "sql": "SELECT g, COUNT(*), SUM(v) FROM t GROUP BY g", "data": FRAME,
        "countermeasure": NONE, "num_targets": 2, "delta": 1e-4, "seed": 1, "engine": "memory",
        "max_groups": None, "max_text_bytes": 255, "estimate": "delivered", "progress": False,
        "target_epsilon": None, "budget": None, "release": None, "bounds": None, "keys": None,
        "key_selection_delta": None, "consistent_totals": False,
    },
    dpcomm.kmeans: {
        "points": POINTS, "k": 2, "iterations": 1, "countermeasure": NONE, "labels": None,
        "test_points": POINTS, "test_labels": [0] * 10 + [1] * 10, "seed": 1, "delta": 1e-4,
        "engine": "memory", "start_seed": 0, "progress": False, "target_epsilon": None,
        "drop_non_finite": False, "budget": None, "init": "random", "init_points": None,
        "release": None, "bounds": None, "columns": None, "scale": False,
    },
    dpcomm.Budget: {"epsilon": 1.0, "delta": 1e-5, "ledger": "ledger.json", "accept_edits": False},
    dpcomm.Laplace: {"epsilon": 1.0},
    dpcomm.Gaussian: {"epsilon": 1.0, "delta": 1e-6},
    dpcomm.account: {
        "mechanism": dpcomm.LocalRandomizer(num_targets=5, sampling_rate=0.5), "delta": 1e-4,
        "epsilon": None, "rounds": 1, "all_methods": False, "monte_carlo_samples": 0, "seed": 0,
    },
    dpcomm.calibrate: {
        "sql": None, "data": None, "epsilon": 1.0, "delta": 1e-4, "sources": 20,
        "num_targets": 3, "grouping_sets": None, "iterations": None, "max_channels": None,
        "max_extra_consents": None, "min_utility": None, "max_messages": None, "release": None,
        "bounds": None, "keys": None, "key_selection_delta": None, "progress": False,
    },
    dpcomm.LocalFlooding: {"sampling_rate": 0.5, "num_dummies": 1},
    dpcomm.Scramblers: {"sampling_rate": 0.5, "batch_size": 10, "num_dummies": 1, "capped": False},
    dpcomm.LocalRandomizer: {"num_targets": 5, "sampling_rate": 0.5, "num_dummies": 1},
    dpcomm.ScramblerMechanism: {
        "num_targets": 5, "sampling_rate": 0.5, "batch_size": 10, "num_dummies": 1,
        "capped": False,
    },
    dpcomm.datasets.synthetic: {"rows": 10, "seed": 1, "distribution": "uniform"},
    dpcomm.compare_with_exact: {
        "run": dpcomm.run_sql(
            "SELECT g, COUNT(*) FROM t GROUP BY g", FRAME, countermeasure=NONE, num_targets=2,
            seed=1, release=dpcomm.Laplace(1.0), keys={"g": [1, 2, 3]},
        ),
    },
}  # fmt: skip

#: What else an error may name when one parameter is bad: the parameter it must agree with.
PARTNERS = {
    (dpcomm.run_sql, "data"): {"column"},  # a table without the query's column names the column
    (dpcomm.run_sql, "bounds"): {"release"},  # bounds and keys need a release
    (dpcomm.run_sql, "keys"): {"release"},
    (dpcomm.run_sql, "key_selection_delta"): {"release"},
    (dpcomm.run_sql, "consistent_totals"): {"release"},
    (dpcomm.kmeans, "points"): {"k", "test_points"},  # fewer points than K; another dimension
    (dpcomm.kmeans, "test_points"): {"test_labels"},  # one label per test point
    (dpcomm.kmeans, "test_labels"): {"test_points"},
    (dpcomm.kmeans, "init_points"): {"k"},  # fewer public points than K
    (dpcomm.kmeans, "bounds"): {"release"},  # bounds need a release
    (dpcomm.kmeans, "release"): {"bounds"},  # a release needs bounds
    (dpcomm.kmeans, "columns"): {"points"},  # one name per column of the points
    (dpcomm.Budget, "delta"): {"epsilon"},  # a budget other than the ledger's names both
    # sql= reads the table from data= (and the sources from it: sources= must then be None)
    (dpcomm.calibrate, "sql"): {"data", "sources"},
    (dpcomm.calibrate, "data"): {"sources"},
}

#: Documented outcomes of valid values that a run or the planner cannot meet: the error's type
#: and what its message names. run_sql: a compute node with more groups than max_groups fails
#: the run (its docstring); calibrate: no configuration meets the limits (it names the limit).
OUTCOMES = {
    dpcomm.run_sql: (OutputOverflowError, "(max_groups)"),
    dpcomm.calibrate: (DpcommError, "no configuration meets"),
}

BAD_VALUES = [
    None, True, False, 0, 1, -1, 0.5, -0.5, 10**30, 2**64, 1e308, -1e308, 5e-324, 1e-320,
    math.nan, math.inf, -math.inf, "", "abc", "1", "nan", b"x", 1j, [], [1, 2], {}, object(),
    Decimal("1"), Decimal("NaN"), Fraction(1, 3), np.float64("nan"), np.int64(-1),
    np.array(np.inf), np.array([1.0, 2.0]), np.array([[np.nan, 1.0]]), pd.NA, pd.NaT,
    pd.Series([1, 2]), pd.DataFrame({"a": [1.0, math.nan]}), pd.DataFrame(),
]  # fmt: skip


def front_door():
    """Every callable ``dpcomm`` exports that takes parameters (not its errors), and
    ``datasets.synthetic``."""
    found = [dpcomm.datasets.synthetic]
    for name in dpcomm.__all__:
        value = getattr(dpcomm, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            continue
        if callable(value) and inspect.signature(value).parameters:
            found.append(value)
    return found


def fuzzed_parameters():
    """(function, parameter) for every parameter of every front-door function."""
    return [
        (function, name)
        for function in front_door()
        if function in BASELINES
        for name in inspect.signature(function).parameters
    ]


OPTIONS = fuzzed_parameters()


def test_every_parameter_of_the_front_door_is_fuzzed():
    """Results (AggregateRun, KMeansRun, Calibration) are returned, never given: not fuzzed."""
    results = {dpcomm.AggregateRun, dpcomm.KMeansRun, dpcomm.Calibration}
    assert set(front_door()) - results == set(BASELINES)
    for function, baseline in BASELINES.items():
        assert list(baseline) == list(inspect.signature(function).parameters), function
    assert (dpcomm.kmeans, "drop_non_finite") in OPTIONS


#: Where relative paths (a ledger named "abc", "1", ...) are created.
WORKDIR = Path(tempfile.mkdtemp(prefix="dpcomm-front-door-fuzz-"))
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)


def call(function, parameter, value):
    arguments = {**BASELINES[function], parameter: value}
    with contextlib.chdir(WORKDIR), warnings.catch_warnings():
        warnings.simplefilter("ignore", DpcommWarning)  # documented warnings; numpy's still fail
        with contextlib.redirect_stderr(io.StringIO()):  # progress=True draws a bar
            return function(**arguments)


def test_the_baselines_run():
    for function, baseline in BASELINES.items():
        first = next(iter(baseline))
        call(function, first, baseline[first])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(option=st.sampled_from(OPTIONS), value=st.sampled_from(BAD_VALUES))
def test_a_bad_value_gives_a_result_or_an_error_naming_its_parameter(option, value):
    function, parameter = option
    try:
        call(function, parameter, value)
    except InvalidParameterError as error:
        text = str(error)
        assert "\n" not in text, (function, parameter, text)
        named = {parameter, *PARTNERS.get((function, parameter), ())}
        assert error.name.split()[0] in named, (function.__name__, parameter, text)
        if type(error) is InvalidParameterError:
            assert text.startswith(f"invalid {error.name}: expected "), text
    except DpcommError as error:
        kind, words = OUTCOMES.get(function, (None, None))
        assert kind is not None and isinstance(error, kind), (function.__name__, parameter, error)
        assert words in str(error) and "\n" not in str(error), error


#: A run with a noisy release, whose release parameters are fuzzed with values that overflow,
#: divide by zero or are of the wrong shape: refused before the run, never by OpenDP after it.
RELEASED = {
    "sql": "SELECT g, COUNT(*), SUM(v) FROM t GROUP BY g", "data": FRAME, "countermeasure": NONE,
    "num_targets": 2, "seed": 1, "release": dpcomm.Laplace(1.0), "bounds": {"v": (0.0, 30.0)},
    "keys": {"g": [1, 2, 3]},
}  # fmt: skip
RELEASE_VALUES = {
    "release": [
        dpcomm.Laplace(1e308), dpcomm.Laplace(5e-324), dpcomm.Laplace(1e-320),
        dpcomm.Gaussian(5e-324, 1e-6), dpcomm.Gaussian(1e308, 1e-6), dpcomm.Gaussian(1.0, 5e-324),
    ],
    "bounds": [
        {"v": (-1e308, 1e308)}, {"v": (0.0, 1e308)}, {"v": (5e-324, 1e-320)}, {"v": (0, 10**400)},
        {"v": [[1]]}, {"v": (1.0, math.inf)}, {"v": "0,1"},
    ],
    "keys": [
        {"g": [[1]]}, {"g": [1e308]}, {"g": [10**400]}, {"g": [5e-324]}, {"g": {1: 2}},
        {"g": [b"x"]}, {"g": [math.nan]},
    ],
    "key_selection_delta": [5e-324, 1e-320, 1e-300, 1.0, 0.9999999999],
}  # fmt: skip


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    option=st.sampled_from(
        [(name, value) for name, values in RELEASE_VALUES.items() for value in values]
    )
)
def test_release_values_that_overflow_are_refused_before_the_run(option):
    """Only DpcommError subclasses escape (never TypeError, OverflowError, ZeroDivisionError
    nor OpenDP's error), in one line naming the parameter."""
    name, value = option
    arguments = {**RELEASED, name: value}
    if name == "key_selection_delta":
        arguments["keys"] = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DpcommWarning)
            dpcomm.run_sql(**arguments)
    except InvalidParameterError as error:
        assert "\n" not in str(error), str(error)
        assert error.name.split("[")[0].split()[0] in {name, "release", "keys", "bounds"}, error
