"""`dpcomm plan` and `dpcomm headline` end to end, through main()."""

import json
import shlex

import pytest

from dpcomm.calibration import describe_batches
from dpcomm.cli.main import build_parser
from dpcomm.data import synthetic_table
from dpcomm.data.synthetic import synthetic_sql
from dpcomm.plan import balanced_batch_sizes
from dpcomm.queries.aggregate import AggregateProgram

SMALL = ("--sources", "2000", "--targets", "10", "--epsilon", "1", "--delta", "1e-4")


def test_plan_prints_the_choice_and_the_pareto_front(cli):
    status, out, _ = cli("plan", *SMALL, "--grouping-sets", "2")
    assert status == 0
    for text in ("Chosen (least network load)", "privacy: ε =", "network load", "Pareto front"):
        assert text in out
    assert "*" in out
    status, text, _ = cli("plan", *SMALL, "--grouping-sets", "2", "--json")
    document = json.loads(text)
    recruited = document["sources_recruited"]
    assert f"sources recruited: S_t = {recruited:,}" in out
    assert f"Run it:\n  {document['run_command']}\n" in out
    sizes = document["batch_sizes"]
    if sizes is not None:
        assert f"batches per grouping set: {describe_batches(sizes)}" in out


def test_plan_prints_balanced_batches(cli):
    status, out, _ = cli("plan", *SMALL, "--grouping-sets", "1", "--max-channels", "60")
    assert status == 0
    # S_t = 2,920 sources in 59 balanced batches of at most 50 (every number of scramblers
    # is searched: 50 sources and the 10 targets make the 60 channels of a scrambler).
    assert "batches per grouping set: 59 scramblers: 29 of 50 sources, 30 of 49" in out
    assert "sources recruited: S_t = 2,920" in out


def test_plan_json_has_exactly_the_documented_keys(cli):
    status, out, _ = cli("plan", *SMALL, "--iterations", "3", "--json")
    assert status == 0
    document = json.loads(out)
    assert set(document) == {
        "configuration",
        "epsilon",
        "delta",
        "epsilon_pld",
        "epsilon_basic",
        "epsilon_lower_bound",
        "network_load_messages",
        "max_channels_per_node",
        "extra_consents",
        "sources_recruited",
        "batch_sizes",
        "run_command",
        "grouping_sets",
        "free_grouping_sets",
        "pareto",
        "release",
    }
    assert document["release"] is None  # without --release
    configuration = document["configuration"]
    assert set(configuration) == {
        "mechanism",
        "sampling_rate",
        "batch_size",
        "num_dummies",
        "capped",
        "num_scramblers",
    }
    assert configuration["mechanism"] in ("scrambler", "local")
    sizes = document["batch_sizes"]
    if configuration["mechanism"] == "local":
        assert configuration["batch_size"] is None and configuration["num_scramblers"] is None
        assert sizes is None
    else:
        # One balanced batch per scrambler of a cluster, covering the S_t recruited sources.
        assert sizes == list(
            balanced_batch_sizes(document["sources_recruited"], configuration["batch_size"])
        )
        assert len(sizes) == configuration["num_scramblers"]
        assert max(sizes) <= configuration["batch_size"] and max(sizes) - min(sizes) <= 1
    assert document["sources_recruited"] == 2000 + document["extra_consents"]
    assert document["run_command"].startswith(
        f"dpcomm run kmeans --sources {document['sources_recruited']} --k 10 --iterations 3 "
    )
    # G = 3 clusters: the reported ε is account_plan's at the whole plan's δ, the smaller of
    # its PLD and basic compositions, each at least as loose as the planner's own check.
    assert document["epsilon"] <= 1.0 + 1e-9
    assert document["delta"] == pytest.approx(1e-4)
    assert document["epsilon_lower_bound"] <= document["epsilon"]
    assert document["epsilon"] == min(document["epsilon_pld"], document["epsilon_basic"])
    assert document["pareto"]
    for member in document["pareto"]:
        assert set(member) == set(document) - {
            "pareto",
            "batch_sizes",
            "run_command",
            "grouping_sets",  # the plan's shape: the same for every member
            "free_grouping_sets",
            "epsilon_pld",  # how the chosen configuration's ε composes: for it alone
            "epsilon_basic",
            "epsilon_lower_bound",
            "release",  # the split of the budget with a release: the chosen configuration's
        }


RUNNABLE = [
    # (plan options, mechanism expected): scramblers with two batch sizes; local sampling.
    ((*SMALL, "--grouping-sets", "1", "--max-channels", "60"), "scrambler"),
    ((*SMALL, "--grouping-sets", "2", "--max-channels", "200"), "scrambler"),
    (("--sources", "500", "--targets", "5", "--epsilon", "3", "--delta", "1e-3",
      "--grouping-sets", "1"), "local"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "mechanism"), RUNNABLE)
def test_the_printed_run_command_runs_the_planned_configuration(cli, options, mechanism):
    status, out, _ = cli("plan", *options, "--json")
    assert status == 0
    plan = json.loads(out)
    configuration = plan["configuration"]
    assert configuration["mechanism"] == mechanism
    argv = shlex.split(plan["run_command"])
    assert argv[:3] == ["dpcomm", "run", "aggregate"]
    assert argv[argv.index("--synthetic") + 1] == str(plan["sources_recruited"])
    status, out, err = cli(*argv[1:], "--json", "--seed", "0")
    assert status == 0
    grouping_sets = int(options[options.index("--grouping-sets") + 1])
    if grouping_sets == 1:  # one cluster: account_plan's δ is the plan's in any semantics
        assert "warning" not in err  # --target-epsilon: the run's ε does not exceed the target
    report = json.loads(out)["report"]
    privacy, efficiency = report["privacy"], report["efficiency"]
    # The run is the planned configuration: its ε is at most (here: exactly) the planned ε,
    # its δ the planned δ, its messages and batches those of the plan.
    assert privacy["epsilon"] <= plan["epsilon"]
    assert privacy["epsilon"] == plan["epsilon"]
    assert privacy["delta"] == pytest.approx(plan["delta"])
    assert efficiency["messages"] == plan["network_load_messages"]
    assert efficiency["max_channels_per_node"] <= plan["max_channels_per_node"]
    sizes = plan["batch_sizes"]
    if sizes is None:
        assert efficiency["num_scramblers"] == 0 and efficiency["batch_sizes"] == {}
    else:
        assert efficiency["num_scramblers"] == grouping_sets * len(sizes)
        assert list(efficiency["batch_sizes"].values()) == grouping_sets * [
            sorted(set(sizes), reverse=True)
        ]


@pytest.mark.parametrize("grouping_sets", [1, 2, 5, 15])
def test_the_synthetic_query_has_the_planned_clusters(grouping_sets):
    # The run command's query gives G data-dependent clusters of C = T compute nodes each.
    table = synthetic_table(num_rows=60, seed=0, name="t")
    program = AggregateProgram.from_sql(synthetic_sql(grouping_sets), table, num_targets=7)
    dependent = [c for c in program.plan.clusters if c.data_dependent]
    assert len(dependent) == grouping_sets
    assert {c.num_targets for c in dependent} == {7}
    assert synthetic_sql(16) is None  # four synthetic columns: at most 15 non-empty sets


def test_the_kmeans_run_command_parses_to_the_planned_countermeasure(cli):
    status, out, _ = cli("plan", *SMALL, "--iterations", "3", "--json")
    assert status == 0
    plan = json.loads(out)
    configuration = plan["configuration"]
    args = build_parser().parse_args(shlex.split(plan["run_command"])[1:])
    assert (args.k, args.iterations) == (10, 3)
    assert args.mechanism == configuration["mechanism"]
    assert args.sampling_rate == configuration["sampling_rate"]
    assert args.num_dummies == configuration["num_dummies"]
    assert args.delta == pytest.approx(1e-4, rel=1e-15)  # the whole plan's δ
    assert args.target_epsilon == 1.0
    if plan["batch_sizes"] is not None:
        assert args.batch_size == max(plan["batch_sizes"])
    assert args.sources == plan["sources_recruited"]
    # Run it (mnist5k has 4,000 training points): the run's ε is the planned one.
    status, out, err = cli(*shlex.split(plan["run_command"])[1:], "--json")
    assert status == 0, err  # (no --target-epsilon warning once account_plan takes the plan's δ)
    report = json.loads(out)["report"]
    assert report["privacy"]["epsilon"] == pytest.approx(plan["epsilon"], rel=1e-12)
    assert report["utility"]["sources"] == plan["sources_recruited"]


def test_plan_limits_are_honoured(cli):
    status, out, _ = cli("plan", *SMALL, "--grouping-sets", "1", "--max-channels", "60", "--json")
    assert status == 0
    document = json.loads(out)
    assert document["max_channels_per_node"] <= 60


def test_plan_draws_the_pareto_front(cli, tmp_path):
    target = tmp_path / "front.png"
    status, out, _ = cli("plan", *SMALL, "--grouping-sets", "1", "--plot", str(target))
    assert status == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(target) in out


def test_plan_infeasible_limit_is_a_one_line_error(cli):
    status, _, err = cli("plan", *SMALL, "--grouping-sets", "1", "--max-channels", "12")
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("dpcomm: error:") and "--max-channels" in err


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--grouping-sets", "1", "--iterations", "2"),
    ],
)
def test_plan_needs_exactly_one_of_grouping_sets_and_iterations(cli, extra):
    status, _, err = cli("plan", *SMALL, *extra)
    assert status == 2 and "--grouping-sets/--iterations" in err and err.count("\n") == 1


ROLLUP = "SELECT species, sex, COUNT(*) FROM penguins GROUP BY ROLLUP(species, sex)"


@pytest.fixture(scope="module")
def penguins_csv(openml_table, tmp_path_factory):
    """The Palmer penguins (344 rows) as a CSV file."""
    import pyarrow.csv

    path = tmp_path_factory.mktemp("penguins") / "penguins.csv"
    pyarrow.csv.write_csv(openml_table("id_42585"), path)
    return path


def test_plan_from_the_query_reads_its_shape_and_its_run_meets_the_target(cli, penguins_csv):
    """ROLLUP(species, sex) over the 344 penguins: 2 composed grouping sets, () free, no
    source recruited; the printed command runs it within the target."""
    query = ("--sql", ROLLUP, "--data", penguins_csv, "--epsilon", "1", "--delta", "1e-4")
    status, out, err = cli("plan", *query)
    assert status == 0, err
    assert "Aggregate, G = 2 grouping sets" in out
    assert "344 sources, 2 data-dependent grouping sets of T = 20" in out
    assert "() is free (one compute node)" in out
    assert "sources recruited: S_t = 344 (0 extra consents)" in out
    status, text, _ = cli("plan", *query, "--json")
    plan = json.loads(text)
    assert plan["grouping_sets"] == ["(species)", "(species, sex)"]
    assert plan["free_grouping_sets"] == ["()"]
    assert plan["extra_consents"] == 0 and plan["sources_recruited"] == 344
    assert plan["epsilon"] <= 1.0
    assert f"Run it:\n  {plan['run_command']}\n" in out
    arguments = shlex.split(plan["run_command"])[1:]
    assert arguments[:3] == ["run", "aggregate", "--data"] and ROLLUP in arguments
    status, out, err = cli(*arguments, "--json", "--seed", "1")
    assert status == 0, err
    report = json.loads(out)["report"]
    assert report["privacy"]["epsilon"] == pytest.approx(plan["epsilon"], rel=1e-12)
    assert report["privacy"]["epsilon"] <= 1.0
    assert report["efficiency"]["messages"] == plan["network_load_messages"]
    assert report["efficiency"]["extra_consents"] == 0
    # Fewer dummies than planned: the run is refused before it starts, naming the flag.
    dummies = arguments.index("--dummies") + 1
    arguments[dummies] = str(plan["configuration"]["num_dummies"] // 2)
    status, out, err = cli(*arguments)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "--target-epsilon" in err and "nothing ran" in err


def test_plan_by_hand_recruits_sources_the_query_form_does_not(cli, penguins_csv):
    by_hand = ("--sources", "344", "--targets", "20", "--grouping-sets", "2")
    common = ("--epsilon", "1", "--delta", "1e-4", "--json")
    status, out, _ = cli("plan", *by_hand, *common)
    assert status == 0 and json.loads(out)["extra_consents"] > 0
    status, out, _ = cli("plan", "--sql", ROLLUP, "--data", penguins_csv, *common)
    assert status == 0 and json.loads(out)["extra_consents"] == 0


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--sql", ROLLUP), "--data"),
        (("--sql", ROLLUP, "--data", "DATA", "--sources", "10"), "--sources"),
        (("--sql", ROLLUP, "--data", "DATA", "--grouping-sets", "3"), "--grouping-sets"),
        (("--grouping-sets", "1", "--targets", "5"), "--sources"),
        (("--sql", "SELECT COUNT(*) FROM penguins GROUP BY ()", "--data", "DATA"), "--sql"),
    ],
)
def test_plan_from_the_query_refuses_what_it_reads_itself(cli, penguins_csv, extra, named):
    extra = tuple(str(penguins_csv) if e == "DATA" else e for e in extra)
    status, _, err = cli("plan", *extra, "--epsilon", "1", "--delta", "1e-4")
    assert status == 2 and err.count("\n") == 1 and named in err, err


BY_SPECIES = (
    "SELECT species, COUNT(*) AS n, AVG(body_mass_g) AS mass FROM penguins GROUP BY species"
)
RELEASE = (
    "--release",
    "laplace",
    "--bounds",
    "body_mass_g=2500:6500",
    "--keys",
    "species=Adelie,Chinstrap,Gentoo",
)


def test_plan_with_a_release_prints_the_split_and_its_run_reports_it(cli, penguins_csv):
    """The split of ε = 1 within 5,000 messages, the composed guarantee, the expected error and
    the command; that command's run reports the composed ε planned, and a louder release is
    refused before it runs."""
    query = ("--sql", BY_SPECIES, "--data", penguins_csv, "--epsilon", "1", "--delta", "1e-4")
    options = (*query, *RELEASE, "--max-messages", "5000")
    status, text, err = cli("plan", *options, "--json")
    assert status == 0, err
    plan = json.loads(text)
    release = plan["release"]
    assert release["mechanism"] == "laplace" and release["traffic_epsilon"] == plan["epsilon"]
    assert release["epsilon"] <= 1.0 and release["delta"] <= 1e-4
    assert plan["network_load_messages"] <= 5000
    status, out, _ = cli("plan", *options)
    assert status == 0
    for line in (
        f"  traffic: ε1 = {plan['epsilon']:.4f}, δ1 = 0.0001",
        f"  release: ε2 = {release['release_epsilon']:.4f}, δ2 = 0",
        f"  together: ε = {release['epsilon']:.4f} at δ = 0.0001",
        f"  expected relative error of the released values: "
        f"{release['expected_relative_error']:.1%}",
        f"Run it:\n  {plan['run_command']}\n",
    ):
        assert line in out
    arguments = shlex.split(plan["run_command"])[1:]
    assert arguments[arguments.index("--target-epsilon") + 1] == "1.0"
    status, out, err = cli(*arguments, "--json", "--seed", "1")
    assert status == 0, err
    report = json.loads(out)["report"]
    assert report["release"]["epsilon_total"] == release["epsilon"] <= 1.0
    assert report["privacy"]["epsilon"] == plan["epsilon"]
    louder = arguments.index("--release-epsilon") + 1
    arguments[louder] = str(2 * release["release_epsilon"])
    status, out, err = cli(*arguments)
    assert status == 2 and out == "" and "--target-epsilon" in err and "together" in err


def test_plan_with_key_selection_sets_its_delta_aside_and_the_command_selects(cli, penguins_csv):
    by_island = "SELECT island, COUNT(*) AS n FROM penguins GROUP BY island"
    options = ("--sql", by_island, "--data", penguins_csv, "--epsilon", "1", "--delta", "1e-4")
    options += ("--release", "laplace", "--key-selection-delta", "1e-6", "--max-messages", "5000")
    status, text, err = cli("plan", *options, "--json")
    assert status == 0, err
    plan = json.loads(text)
    assert plan["delta"] + plan["release"]["release_delta"] <= 1e-4
    arguments = shlex.split(plan["run_command"])[1:]
    assert arguments[arguments.index("--key-selection-delta") + 1] == "1e-06"
    status, out, err = cli(*arguments, "--json", "--seed", "1")
    assert status == 0, err
    report = json.loads(out)["report"]
    assert report["release"]["epsilon_total"] == plan["release"]["epsilon"] <= 1.0
    assert report["release"]["key_selection"]["delta"] == 1e-6


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--sql", BY_SPECIES, "--data", "DATA", "--key-selection-delta", "1e-6"),
         "--key-selection-delta"),
        (("--sql", BY_SPECIES, "--data", "DATA", "--bounds", "body_mass_g=0:1"), "--bounds"),
        (("--sources", "344", "--targets", "20", "--grouping-sets", "1", *RELEASE), "--release"),
        (("--sql", BY_SPECIES, "--data", "DATA", *RELEASE[:2]), "--bounds"),
        (("--sql", BY_SPECIES, "--data", "DATA", *RELEASE, "--max-messages", "500"),
         "--max-messages"),
    ],
)  # fmt: skip
def test_plan_release_options_are_checked(cli, penguins_csv, extra, named):
    extra = tuple(str(penguins_csv) if e == "DATA" else e for e in extra)
    status, _, err = cli("plan", *extra, "--epsilon", "1", "--delta", "1e-4")
    assert status == 2 and err.count("\n") == 1 and named in err, err


def test_headline_prints_the_markdown_table(cli):
    status, out, _ = cli("headline", "--mc-samples", "500")
    assert status == 0
    lines = [line for line in out.splitlines() if line.startswith("|")]
    assert len(lines) == 7
    assert "| 275 |" in out and "| 546 |" in out and "| 4,334 |" in out
    assert "12,346 sources in 124 scramblers: 70 of 100 sources, 54 of 99" in out
    assert "estimate" in out and "unreachable" in out


def test_headline_json(cli):
    status, out, _ = cli("headline", "--json", "--mc-samples", "500")
    assert status == 0
    rows = {row["method"]: row for row in json.loads(out)}
    assert rows["exact"]["num_dummies"] == 275
    assert rows["exact"]["batch_sizes"] == [100] * 70 + [99] * 54
    assert rows["exact"]["num_sources"] == 12_346
    assert rows["post-processing"]["num_dummies"] is None
