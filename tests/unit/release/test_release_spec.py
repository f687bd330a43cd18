"""A noisy release travels in a program's public description (a deployment's node configs)."""

from __future__ import annotations

import datetime

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.program import program_from_spec, public_program
from dpcomm.release.noise import noisy_program

TABLE = table_from_arrays(
    "t",
    {
        "city": np.array(["é", "b c", "🙂", "", "b c"] * 8, dtype=object),
        "day": np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"] * 10,
                        dtype="datetime64[D]"),
        "n": np.arange(40) % 4,
        "v": np.linspace(0.0, 1.0, 40),
    },
)  # fmt: skip


@pytest.mark.parametrize(
    "release",
    [
        {"release": dpcomm.Laplace(0.7), "keys": {"city": ["é", "b c", "🙂", ""]}},
        {"release": dpcomm.Gaussian(1.0, 1e-6), "keys": {"n": [0, 1, 2]}, "bounds": {"v": (0, 1)}},
        {"release": dpcomm.Laplace(1.0), "keys": {"day": [datetime.date(2024, 1, 3)]}},
        {"release": dpcomm.Laplace(1.0), "key_selection_delta": 1e-6},
    ],
    ids=["text keys", "gaussian, int keys, bounds", "date keys", "key selection"],
)
def test_the_release_is_bound_again_the_same_from_the_spec(release):
    column = next(iter(release.get("keys", {"city": None})))
    sql = f"SELECT {column}, COUNT(*) AS c, SUM(v) AS s, AVG(v) AS a FROM t GROUP BY {column}"
    options = {"bounds": {"v": (0.0, 1.0)}, **release}
    program = noisy_program(sql, TABLE, num_targets=3, **options)
    assert program.release is not None
    assert len({n.epsilon for n in program.release.noises}) == 3  # the minimum-error split
    assert public_program(program).release == program.release


def test_a_spec_whose_shares_differ_from_the_nodes_is_refused():
    sql = "SELECT n, COUNT(*) AS c, AVG(v) AS a FROM t GROUP BY n"
    program = noisy_program(
        sql, TABLE, release=dpcomm.Laplace(1.0), keys={"n": [0, 1]}, bounds={"v": (0.0, 1.0)}
    )
    assert program.release is not None
    spec = program.to_spec()
    output = program.release.noises[0].output
    spec["release"]["shares"][output] *= 1.5
    with pytest.raises(InvalidParameterError, match="release shares"):
        program_from_spec(spec)


def test_a_program_without_release_has_none_in_its_spec():
    program = AggregateProgram.from_sql("SELECT city, COUNT(*) FROM t GROUP BY city", TABLE)
    assert program.to_spec()["release"] is None and public_program(program).release is None
