"""explain_infinite: the reason for ε = ∞ and the least σ and d that make it finite."""

import math

import pytest

from dpcomm.accounting import account
from dpcomm.accounting.accountant import SAMPLING_GRID, explain_infinite
from dpcomm.accounting.mechanisms import LocalRandomizer, ScramblerMechanism


def epsilon(mechanism, delta):
    return account(mechanism, delta=delta, monte_carlo_samples=0).guarantee.epsilon


@pytest.mark.parametrize(
    "mechanism",
    [
        LocalRandomizer(num_targets=6, sampling_rate=0.0, num_dummies=2),
        ScramblerMechanism(num_targets=4, sampling_rate=0.0, batch_size=20, num_dummies=0),
        ScramblerMechanism(num_targets=4, sampling_rate=0.0, batch_size=20, num_dummies=3),
    ],
    ids=["local", "scrambler", "scrambler-d3"],
)
def test_the_changes_are_finite_and_least(mechanism):
    delta = 1e-6
    assert math.isinf(epsilon(mechanism, delta))
    explanation = explain_infinite(mechanism, delta=delta)
    assert explanation.reason and "\n" not in explanation.describe()
    by_parameter = {c.parameter: c for c in explanation.changes}
    assert set(by_parameter) == {"sampling_rate", "num_dummies"}
    for change in explanation.changes:
        changed = (
            mechanism.__class__(**{**mechanism.__dict__, change.parameter: change.value})
            if change.parameter == "sampling_rate"
            else mechanism.__class__(**{**mechanism.__dict__, "num_dummies": int(change.value)})
        )
        assert math.isfinite(change.epsilon) and change.epsilon == epsilon(changed, delta)
    dummies = int(by_parameter["num_dummies"].value)
    fewer = mechanism.__class__(**{**mechanism.__dict__, "num_dummies": dummies - 1})
    assert math.isinf(epsilon(fewer, delta))  # the least d
    assert by_parameter["sampling_rate"].value == SAMPLING_GRID[0]


def test_local_flooding_without_sampling_needs_every_other_target():
    mechanism = LocalRandomizer(num_targets=6, sampling_rate=0.0, num_dummies=2)
    change = {c.parameter: c for c in explain_infinite(mechanism, delta=1e-6).changes}
    assert change["num_dummies"].value == 5 and change["num_dummies"].epsilon == 0.0


def test_run_reports_say_why_epsilon_is_infinite():
    from dpcomm.data import synthetic_table
    from dpcomm.pipeline.report import NO_COUNTERMEASURE_REASON
    from dpcomm.pipeline.runs import run_aggregate
    from dpcomm.plan import NoCountermeasure, Scramblers
    from dpcomm.queries.aggregate import AggregateProgram

    table = synthetic_table(num_rows=400, seed=1)
    program = AggregateProgram.from_sql("SELECT g1, COUNT(*) FROM t GROUP BY g1", table)
    cases = [
        (NoCountermeasure(), NO_COUNTERMEASURE_REASON),
        (Scramblers(sampling_rate=0.0, batch_size=100, num_dummies=0), "smallest changes"),
        (Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10), None),
    ]
    for countermeasure, expected in cases:
        report = run_aggregate(program, countermeasure, delta=1e-4, seed=1).report
        why = report.privacy.clusters[0].why_infinite
        if expected is None:
            assert why is None
        else:
            assert expected in why and "\n" not in why


def test_the_account_command_explains_an_infinite_epsilon(capsys):
    import json

    from dpcomm.cli.main import main

    args = ["account", "local", "--targets", "6", "--sampling", "0", "--dummies", "2"]
    assert main([*args, "--delta", "1e-6", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["epsilon"] == "inf" and "σ = 0" in row["why_infinite"]["reason"]
    assert {c["parameter"] for c in row["why_infinite"]["changes"]} == {
        "sampling_rate",
        "num_dummies",
    }
    assert main([*args, "--delta", "1e-6"]) == 0
    assert "why ε = ∞: σ = 0" in capsys.readouterr().out


def test_a_refuted_method_is_labelled_wherever_it_is_shown(capsys):
    import json

    from dpcomm.cli.main import main

    args = ["account", "scrambler", "--targets", "4", "--batch", "3", "--dummies", "2"]
    args += ["--capped", "--delta", "1e-4", "--method", "theorem-exact"]
    assert main([*args, "--sampling", "0.2"]) == 0
    assert "refuted by enumeration, not a valid bound" in capsys.readouterr().out
    assert main([*args, "--sampling", "0.2,0.3"]) == 0
    out = capsys.readouterr().out
    assert "theorem-exact *" in out and "* theorem-exact: not a valid bound" in out
    assert main([*args, "--sampling", "0.2", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["method"] == "theorem-exact" and row["method_is_valid_bound"] is False
    # A refuted method's ∞ is not the mechanism's: no explanation of an infinite ε.
    plain = ["account", "scrambler", "--targets", "20", "--batch", "100", "--dummies", "50"]
    plain += ["--sampling", "0.2", "--delta", "1e-4", "--method", "bennett-printed"]
    assert main(plain) == 0
    assert "why ε = ∞" not in capsys.readouterr().out
