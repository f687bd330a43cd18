"""What a run is charged (`dpcomm.pipeline.charge`): the δ its guarantee uses, and a record of
the run (query as written, countermeasure, release)."""

import pytest

import dpcomm
from dpcomm import datasets
from dpcomm.data.inputs import table_of as _rows
from dpcomm.pipeline.charge import (
    countermeasure_record,
    guarantee_to_charge,
    pure_traffic,
    query_record,
    release_record,
)
from dpcomm.plan.privacy import account_plan
from dpcomm.release.compose import compose_release
from dpcomm.release.noise import noisy_program

SQL = "SELECT g1, AVG(m1) AS mean FROM people WHERE g2 > 0 GROUP BY g1"
LOCAL = dpcomm.LocalFlooding(sampling_rate=0.5, num_dummies=2)
SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10)


@pytest.fixture(scope="module")
def people():
    return _rows(datasets.synthetic(rows=400, seed=1), "people")


def program(people, sql=SQL, **release):
    return noisy_program(sql, people, num_targets=4, **release)


def test_pure_traffic_without_release_is_charged_delta_zero(people):
    bound = program(people)
    charged = guarantee_to_charge(bound, LOCAL, delta=1e-4)
    pure = account_plan(bound.plan, LOCAL, delta=0.0).guarantee
    at_delta = account_plan(bound.plan, LOCAL, delta=1e-4).guarantee
    assert (charged.epsilon, charged.delta) == (pure.epsilon, 0.0)
    assert "theorem-1" in charged.method and "charged at δ = 0" in charged.method
    # What the run reports at its δ: its ε at most the pure one (the δ buys little).
    assert (charged.reported_epsilon, charged.reported_delta) == (at_delta.epsilon, 1e-4)
    assert at_delta.epsilon <= charged.epsilon


def test_pure_traffic_with_a_laplace_release_is_charged_delta_zero(people):
    bound = program(people, release=dpcomm.Laplace(epsilon=1.0), bounds={"m1": (0, 10)},
                    keys={"g1": list(range(10))})  # fmt: skip
    charged = guarantee_to_charge(bound, LOCAL, delta=1e-4)
    pure = account_plan(bound.plan, LOCAL, delta=0.0)
    assert charged.delta == 0.0
    assert charged.epsilon == compose_release(pure, bound.release.noises).epsilon
    assert charged.reported_delta == 1e-4


def test_key_selection_and_gaussian_releases_charge_their_delta_only(people):
    bound = program(people, release=dpcomm.Gaussian(epsilon=1.0, delta=1e-6),
                    bounds={"m1": (0, 10)}, key_selection_delta=1e-7)  # fmt: skip
    charged = guarantee_to_charge(bound, LOCAL, delta=1e-4)
    assert charged.delta == pytest.approx(1e-6 + 1e-7, rel=1e-12)
    assert charged.delta < 1e-4


def test_scramblers_are_charged_the_delta_of_their_guarantee(people):
    bound = program(people)
    assert pure_traffic(bound.plan, SCRAMBLERS) is None
    assert pure_traffic(bound.plan, dpcomm.NoCountermeasure()) is None
    charged = guarantee_to_charge(bound, SCRAMBLERS, delta=1e-4)
    reported = account_plan(bound.plan, SCRAMBLERS, delta=1e-4).guarantee
    assert (charged.epsilon, charged.delta) == (reported.epsilon, reported.delta)
    at_zero = guarantee_to_charge(bound, SCRAMBLERS, delta=0.0)  # a run at δ = 0
    assert at_zero.delta == 0.0


def test_the_records_say_what_ran(people):
    bound = program(people, release=dpcomm.Laplace(epsilon=1.0), bounds={"m1": (0, 10)},
                    key_selection_delta=1e-6)  # fmt: skip
    assert query_record(bound) == SQL  # as written: WHERE and aliases kept
    assert bound.query.sql != SQL
    assert countermeasure_record(LOCAL) == {
        "mechanism": "local", "sampling_rate": 0.5, "batch_size": None, "num_dummies": 2,
        "capped": False,
    }  # fmt: skip
    assert countermeasure_record({"a": SCRAMBLERS, "b": SCRAMBLERS})["batch_size"] == 100
    mixed = countermeasure_record({"a": SCRAMBLERS, "b": LOCAL})
    assert set(mixed) == {"a", "b"} and mixed["b"]["mechanism"] == "local"
    assert release_record(bound) == {
        "mechanism": "laplace", "epsilon": 1.0, "delta": 0.0, "bounds": {"m1": [0.0, 10.0]},
        "keys": {}, "key_selection_delta": 1e-6,
    }  # fmt: skip
    assert release_record(program(people)) is None
