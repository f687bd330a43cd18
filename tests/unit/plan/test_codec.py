"""The countermeasure codec: dict form, ``dpcomm run`` options, and the run command."""

from __future__ import annotations

import json
import shlex

import pytest

from dpcomm.cli.execute import AGGREGATE_DEFAULTS, KMEANS_DEFAULTS, countermeasure_from_options
from dpcomm.cli.main import build_parser
from dpcomm.data.synthetic import synthetic_sql
from dpcomm.engine.network.spec import CountermeasureSpec
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.codec import (
    COUNTERMEASURE_KEYS,
    countermeasure_arguments,
    countermeasure_from_arguments,
    countermeasure_from_dict,
    countermeasure_to_dict,
    run_command,
)

SQL = synthetic_sql(1)
EVERY_KIND = [
    NoCountermeasure(),
    LocalFlooding(sampling_rate=0.0),
    LocalFlooding(sampling_rate=0.35, num_dummies=4),
    Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50),
    Scramblers(sampling_rate=1.0, batch_size=1, num_dummies=0),
    Scramblers(sampling_rate=0.1 + 0.2, batch_size=7, num_dummies=3, capped=True),
]


def parsed(countermeasure, workload="aggregate"):
    """``dpcomm run`` parses the countermeasure's options (the real parser)."""
    source = ["--synthetic", "10", "--sql", SQL] if workload == "aggregate" else ["--sources", "10"]
    args = build_parser().parse_args(
        ["run", workload, *source, *countermeasure_arguments(countermeasure)]
    )
    defaults = AGGREGATE_DEFAULTS if workload == "aggregate" else KMEANS_DEFAULTS
    return countermeasure_from_options(args, defaults)


@pytest.mark.parametrize("countermeasure", EVERY_KIND, ids=repr)
def test_the_dict_form_round_trips_through_json(countermeasure):
    form = countermeasure_to_dict(countermeasure)
    assert tuple(form) == COUNTERMEASURE_KEYS
    assert countermeasure_from_dict(json.loads(json.dumps(form))) == countermeasure


@pytest.mark.parametrize("countermeasure", EVERY_KIND, ids=repr)
@pytest.mark.parametrize("workload", ["aggregate", "kmeans"])
def test_the_options_round_trip_through_dpcomm_run(countermeasure, workload):
    # Every value is written: the use case's defaults (σ = 0.9 for K-means) do not matter.
    assert parsed(countermeasure, workload) == countermeasure


def test_the_dict_forms_are_those_persisted_so_far():
    """A ledger's charges and a round's spec carry these dicts: they must not change."""
    assert countermeasure_to_dict(NoCountermeasure()) == {
        "mechanism": "none",
        "sampling_rate": 0.0,
        "batch_size": None,
        "num_dummies": 0,
        "capped": False,
    }
    assert countermeasure_to_dict(LocalFlooding(sampling_rate=0.2, num_dummies=5)) == {
        "mechanism": "local",
        "sampling_rate": 0.2,
        "batch_size": None,
        "num_dummies": 5,
        "capped": False,
    }
    capped = Scramblers(sampling_rate=0.5, batch_size=10, num_dummies=2, capped=True)
    assert countermeasure_to_dict(capped) == {
        "mechanism": "scrambler",
        "sampling_rate": 0.5,
        "batch_size": 10,
        "num_dummies": 2,
        "capped": True,
    }
    for countermeasure in EVERY_KIND:  # the round spec's record is the dict form
        spec = CountermeasureSpec.of(countermeasure)
        assert spec.countermeasure() == countermeasure


def test_short_dict_forms_read_with_defaults():
    assert countermeasure_from_dict({"mechanism": "none"}) == NoCountermeasure()
    assert countermeasure_from_dict({"mechanism": "local", "sampling_rate": 0.5}) == (
        LocalFlooding(sampling_rate=0.5)
    )
    assert countermeasure_from_dict(
        {"mechanism": "scrambler", "batch_size": 10, "num_dummies": 3}
    ) == Scramblers(sampling_rate=0.0, batch_size=10, num_dummies=3)


@pytest.mark.parametrize(
    ("data", "name", "fragment"),
    [
        ({}, "mechanism", "one of none, local, scrambler, got None"),
        ({"mechanism": "magic"}, "mechanism", "got 'magic'"),
        ({"mechanism": "local", "sigma": 0.2}, "countermeasure", "got 'sigma'"),
        ({"mechanism": "none", "sampling_rate": 0.2}, "sampling_rate", "0.0 for the 'none'"),
        ({"mechanism": "none", "num_dummies": 1}, "num_dummies", "got 1"),
        ({"mechanism": "local", "batch_size": 5}, "batch_size", "unset for the 'local'"),
        ({"mechanism": "local", "capped": True}, "capped", "False for the 'local'"),
        ({"mechanism": "scrambler"}, "batch_size", "a batch size n >= 1"),
        ({"mechanism": "scrambler", "batch_size": 0}, "batch_size", "got 0"),
        ({"mechanism": "local", "sampling_rate": 1.5}, "sampling_rate", "got 1.5"),
        ({"mechanism": "local", "num_dummies": -1}, "num_dummies", "got -1"),
        ({"mechanism": "scrambler", "batch_size": 5, "capped": "yes"}, "capped", "'yes'"),
        ({"mechanism": "local", "sampling_rate": "0.2"}, "sampling_rate", "'0.2'"),
    ],
)
def test_a_bad_dict_form_is_refused_naming_its_key(data, name, fragment):
    with pytest.raises(InvalidParameterError) as raised:
        countermeasure_from_dict(data)
    message = str(raised.value)
    assert raised.value.name == name
    assert "\n" not in message and fragment in message


def test_a_dict_form_is_a_mapping():
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        countermeasure_from_dict(["scrambler"])  # type: ignore[arg-type]


def test_unset_options_take_the_use_case_defaults():
    defaults = {"sampling": 0.2, "batch": 100, "dummies": 50}
    assert countermeasure_from_arguments(mechanism="scrambler", defaults=defaults) == (
        Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    )
    # Local flooding is asked for: d = 0 unless --dummies.
    assert countermeasure_from_arguments(mechanism="local", defaults=defaults) == (
        LocalFlooding(sampling_rate=0.2)
    )
    assert countermeasure_from_arguments(mechanism="none", defaults=defaults) == (
        NoCountermeasure()
    )
    assert countermeasure_from_arguments(mechanism="none", sampling=0.0, dummies=0) == (
        NoCountermeasure()
    )
    with pytest.raises(InvalidParameterError, match="batch_size"):
        countermeasure_from_arguments(mechanism="local", batch=10, defaults=defaults)
    with pytest.raises(InvalidParameterError, match="capped"):
        countermeasure_from_arguments(mechanism="none", capped=True)


def test_the_cli_names_the_flags(cli):
    outcome = cli(
        "run",
        "aggregate",
        "--synthetic",
        "20",
        "--sql",
        SQL,
        "--mechanism",
        "local",
        "--batch",
        "5",
    )
    assert outcome.status == 2
    assert outcome.err == (
        "dpcomm: error: invalid --batch: expected unset for the 'local' mechanism, got 5\n"
    )
    outcome = cli("account", "local", "--targets", "5", "--sampling", "0.5", "--capped")
    assert outcome.status == 2
    assert "invalid --capped: expected False for the 'local' mechanism" in outcome.err


def test_run_command():
    scramblers = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50, capped=True)
    command = run_command(
        "aggregate",
        scramblers,
        num_targets=4,
        data="people.csv",
        sql="SELECT g, COUNT(*) FROM t GROUP BY g",
        delta=1e-4,
        target_epsilon=1.0,
        options=["--release", "laplace"],
        seed=3,
    )
    assert shlex.join(command) == (
        "dpcomm run aggregate --data people.csv --sql 'SELECT g, COUNT(*) FROM t GROUP BY g' "
        "--targets 4 --mechanism scrambler --sampling 0.2 --batch 100 --dummies 50 --capped "
        "--delta 0.0001 --target-epsilon 1.0 --release laplace --seed 3"
    )
    kmeans = run_command("kmeans", NoCountermeasure(), num_targets=3, sources=50, iterations=2)
    assert kmeans == [
        "dpcomm", "run", "kmeans", "--sources", "50", "--k", "3", "--iterations", "2",
        "--mechanism", "none",
    ]  # fmt: skip
    with pytest.raises(InvalidParameterError, match="workload"):
        run_command("sql", NoCountermeasure(), num_targets=3)  # type: ignore[arg-type]


def test_run_command_is_what_dpcomm_run_parses():
    countermeasure = LocalFlooding(sampling_rate=0.25, num_dummies=2)
    command = run_command(
        "aggregate", countermeasure, num_targets=5, synthetic=40, sql=SQL, delta=1e-5, seed=2
    )
    args = build_parser().parse_args(command[1:])
    assert (args.synthetic, args.num_targets, args.delta, args.seed) == (40, 5, 1e-5, 2)
    assert countermeasure_from_options(args, AGGREGATE_DEFAULTS) == countermeasure
