"""`dpcomm plan` and `dpcomm headline` end to end, through main()."""

import json

import pytest

from dpcomm.cli.main import main


def run_cli(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


SMALL = ("--sources", "2000", "--targets", "10", "--epsilon", "1", "--delta", "1e-4")


def test_plan_prints_the_choice_and_the_pareto_front(capsys):
    status, out, _ = run_cli(capsys, "plan", *SMALL, "--grouping-sets", "2")
    assert status == 0
    for text in ("Chosen (least network load)", "privacy: ε =", "network load", "Pareto front"):
        assert text in out
    assert "*" in out


def test_plan_json_has_exactly_the_documented_keys(capsys):
    status, out, _ = run_cli(capsys, "plan", *SMALL, "--iterations", "3", "--json")
    assert status == 0
    document = json.loads(out)
    assert set(document) == {
        "configuration",
        "epsilon",
        "delta",
        "network_load_messages",
        "max_channels_per_node",
        "extra_consents",
        "pareto",
    }
    configuration = document["configuration"]
    assert set(configuration) == {
        "mechanism",
        "sampling_rate",
        "batch_size",
        "num_dummies",
        "num_scramblers",
    }
    assert configuration["mechanism"] in ("scrambler", "local")
    if configuration["mechanism"] == "local":
        assert configuration["batch_size"] is None and configuration["num_scramblers"] is None
    assert document["epsilon"] <= 1.0
    assert document["delta"] == pytest.approx(1e-4)
    assert document["pareto"]
    for member in document["pareto"]:
        assert set(member) == set(document) - {"pareto"}


def test_plan_limits_are_honoured(capsys):
    status, out, _ = run_cli(
        capsys, "plan", *SMALL, "--grouping-sets", "1", "--max-channels", "60", "--json"
    )
    assert status == 0
    document = json.loads(out)
    assert document["max_channels_per_node"] <= 60


def test_plan_draws_the_pareto_front(capsys, tmp_path):
    target = tmp_path / "front.png"
    status, out, _ = run_cli(capsys, "plan", *SMALL, "--grouping-sets", "1", "--plot", str(target))
    assert status == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(target) in out


def test_plan_infeasible_limit_is_a_one_line_error(capsys):
    status, _, err = run_cli(capsys, "plan", *SMALL, "--grouping-sets", "1", "--max-channels", "12")
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("dpcomm: error:") and "--max-channels" in err


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--grouping-sets", "1", "--iterations", "2"),
    ],
)
def test_plan_needs_exactly_one_of_grouping_sets_and_iterations(capsys, extra):
    status, _, err = run_cli(capsys, "plan", *SMALL, *extra)
    assert status == 2 and "grouping_sets/iterations" in err


def test_headline_prints_the_markdown_table(capsys):
    status, out, _ = run_cli(capsys, "headline", "--mc-samples", "500")
    assert status == 0
    lines = [line for line in out.splitlines() if line.startswith("|")]
    assert len(lines) == 7
    assert "| 275 |" in out and "| 545 |" in out and "| 4,333 |" in out
    assert "estimate" in out and "unreachable" in out


def test_headline_json(capsys):
    status, out, _ = run_cli(capsys, "headline", "--json", "--mc-samples", "500")
    assert status == 0
    rows = {row["method"]: row for row in json.loads(out)}
    assert rows["exact"]["num_dummies"] == 275
    assert rows["post-processing"]["num_dummies"] is None
