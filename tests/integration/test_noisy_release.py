"""Noisy releases end to end: keys, clamping, intervals, the composed guarantee, CLI (every engine
runs the same round up to the noise: the engine contract, tests/integration/engine_contract.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpcomm
from dpcomm.accounting.pld import epsilon_for_delta
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.mechanisms import release_pld
from dpcomm.release.noise import noisy_program, released_rows

pytestmark = pytest.mark.filterwarnings("ignore::dpcomm.errors.DpcommWarning")

SQL = (
    "SELECT species, sex, COUNT(*) AS n, AVG(body_mass_g) AS mass FROM penguins "
    "GROUP BY ROLLUP(species, sex)"
)
KEYS = {"species": ["Adelie", "Chinstrap", "Gentoo", "Emperor"], "sex": ["FEMALE", "MALE"]}
BOUNDS = {"body_mass_g": (2500.0, 6500.0)}
SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.2, batch_size=40, num_dummies=10)


@pytest.fixture(scope="module")
def penguins(openml_table: Callable[[str], Any]) -> Any:
    return openml_table("id_42585").to_pandas()


def test_every_key_of_the_domain_is_released_and_no_other(penguins: Any) -> None:
    run = dpcomm.run_sql(
        SQL, penguins, countermeasure=SCRAMBLERS, seed=1,
        release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    keys = {(r["species"], r["sex"], r["grouping_set"]) for r in run.rows}
    expected = {(None, None, "()")}
    expected |= {(s, None, "(species)") for s in KEYS["species"]}
    expected |= {(s, x, "(species, sex)") for s in KEYS["species"] for x in KEYS["sex"]}
    assert keys == expected  # Emperor (absent) released; NULL sex (not in the domain) not
    assert run.report.result_semantics is not None
    assert "differentially private release" in run.report.result_semantics
    release = run.report.release
    assert release is not None and release.epsilon == pytest.approx(1.0)


def test_values_are_clamped_on_the_sources_rows(penguins: Any) -> None:
    """With a huge ε the noise vanishes: the SUM is that of the clamped values."""
    sql = "SELECT species, SUM(body_mass_g) AS s FROM penguins GROUP BY species"
    run = dpcomm.run_sql(
        sql, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=1,
        release=dpcomm.Laplace(1e9), bounds={"body_mass_g": (3000.0, 4000.0)},
        keys={"species": ["Adelie", "Gentoo"]},
    )  # fmt: skip
    masses = penguins.dropna(subset=["body_mass_g"])
    for row in run.rows:
        values = masses[masses.species == row["species"]].body_mass_g.clip(3000, 4000)
        assert row["s"] == pytest.approx(float(values.sum()), abs=1e-2)


def test_noise_intervals_cover_95_percent() -> None:
    frame = {"k": np.array(["a", "b"] * 50, dtype=object), "v": np.arange(100.0)}
    from dpcomm.data.table import table_from_arrays

    table = table_from_arrays("t", frame)
    program = noisy_program(
        "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY k", table,
        release=dpcomm.Laplace(0.5), bounds={"v": (0, 100)}, keys={"k": ["a", "b", "c"]},
    )  # fmt: skip
    release = program.release
    assert release is not None
    exact = program.without_release().core_result(program_state(program))
    inside = {noise.output: 0 for noise in release.noises}
    trials = 400
    for _ in range(trials):
        noisy = released_rows(program.query, release, exact)
        for noise in release.noises:
            truth = {r["k"]: r[noise.output] or 0 for r in exact[0]}
            for row in noisy[0]:
                error = abs(float(row[noise.output]) - float(truth.get(row["k"], 0)))
                inside[noise.output] += error <= noise.half_width_95
    for count in inside.values():
        assert 0.92 <= count / (3 * trials) <= 0.98


def program_state(program: AggregateProgram) -> Any:
    """The final state of a non-private in-memory run of ``program``."""
    from dpcomm.engine.memory import simulate

    run = simulate(program.without_release(), dpcomm.NoCountermeasure(), delta=1e-4, seed=0)
    return run.state


def test_composed_guarantee_between_its_parts_and_the_sum(penguins: Any) -> None:
    run = dpcomm.run_sql(
        SQL, penguins, countermeasure=SCRAMBLERS, seed=1,
        release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    release = run.report.release
    traffic = run.report.privacy
    assert release is not None and release.composed_epsilon is not None
    assert release.summed_epsilon == pytest.approx(traffic.epsilon + 1.0)
    assert release.composed_epsilon <= release.summed_epsilon + 1e-9
    assert release.epsilon_total == min(release.composed_epsilon, release.summed_epsilon)
    program = run.program
    assert program.release is not None
    alone = epsilon_for_delta(release_pld(program.release.noises), release.composed_delta)
    assert release.composed_epsilon >= alone - 1e-6
    lower = traffic.epsilon_lower_bound
    assert lower is not None and release.composed_epsilon >= lower - 1e-6


def test_no_countermeasure_means_no_finite_guarantee(penguins: Any) -> None:
    run = dpcomm.run_sql(
        SQL, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=1,
        release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    release = run.report.release
    assert release is not None and release.composed_epsilon is None
    assert math.isinf(release.epsilon_total)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": {"species": ["Adelie"]}}, "keys"),  # no domain for sex
        ({"bounds": {}}, "bounds"),  # AVG without bounds
        ({"keys": {**KEYS, "island": ["Dream"]}}, "keys"),  # not a grouping column
    ],
)
def test_a_release_without_what_it_needs_is_refused(
    penguins: Any, kwargs: dict[str, Any], message: str
) -> None:
    options = {"release": dpcomm.Laplace(1.0), "bounds": BOUNDS, "keys": KEYS, **kwargs}
    with pytest.raises(InvalidParameterError, match=message):
        dpcomm.run_sql(SQL, penguins, countermeasure=SCRAMBLERS, **options)


def test_min_is_refused_under_a_release(penguins: Any) -> None:
    with pytest.raises(InvalidParameterError, match="COUNT, COUNT_IF, SUM and AVG"):
        dpcomm.run_sql(
            "SELECT species, MIN(body_mass_g) FROM penguins GROUP BY species", penguins,
            countermeasure=SCRAMBLERS, release=dpcomm.Laplace(1.0), bounds=BOUNDS,
            keys={"species": KEYS["species"]},
        )  # fmt: skip


def test_cli_release(cli: Callable[..., Any], tmp_path: Path) -> None:
    outcome = cli(
        "run", "aggregate", "--sql", "SELECT A, COUNT(*), AVG(I) FROM t GROUP BY A",
        "--release", "laplace", "--release-epsilon", "2", "--bounds", "I=0:300",
        "--keys", "A=20,30,40,50,60,70,80", "--seed", "1",
    )  # fmt: skip
    assert outcome.status in (0, None), outcome.err
    assert "Release (laplace" in outcome.out
    assert "traffic and release together" in outcome.out
    bad = cli(
        "run", "aggregate", "--sql", "SELECT A, AVG(I) FROM t GROUP BY A",
        "--release", "laplace", "--bounds", "I=0-300", "--keys", "A=20",
    )  # fmt: skip
    assert bad.status == 2
    assert "--bounds" in bad.err and len(bad.err.strip().splitlines()) == 1
    stray = cli("run", "aggregate", "--sql", "SELECT A, COUNT(*) FROM t GROUP BY A",
                "--keys", "A=20")  # fmt: skip
    assert stray.status == 2 and "only with --release" in stray.err


def test_a_budget_is_charged_traffic_and_release_together(penguins: Any, tmp_path: Path) -> None:
    budget = dpcomm.Budget(epsilon=100.0, delta=1e-2, ledger=tmp_path / "ledger.json")
    run = dpcomm.run_sql(
        SQL, penguins, countermeasure=SCRAMBLERS, seed=1, budget=budget,
        release=dpcomm.Laplace(1.0), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    release = run.report.release
    assert release is not None
    spent = budget.spent()
    assert spent.epsilon == pytest.approx(release.epsilon_total, rel=1e-9)
    assert spent.delta == pytest.approx(release.composed_delta, rel=1e-9)
    assert spent.epsilon > run.report.privacy.epsilon  # more than the traffic alone


def test_key_selection_in_the_memory_engine(penguins: Any, tmp_path: Path) -> None:
    """No domain for (species), (species, island): OpenDP's threshold chooses their keys; the
    report names them and τ; δ_sel enters the release's δ, the composition and the budget."""
    budget = dpcomm.Budget(epsilon=100.0, delta=1e-2, ledger=tmp_path / "ledger.json")
    run = dpcomm.run_sql(
        "SELECT species, island, COUNT(*) AS n FROM penguins "
        "GROUP BY GROUPING SETS ((species), (species, island))",
        penguins, countermeasure=SCRAMBLERS, seed=1, budget=budget,
        release=dpcomm.Laplace(2.0), key_selection_delta=1e-6,
    )  # fmt: skip
    release = run.report.release
    assert release is not None and release.key_selection is not None
    selection = release.key_selection
    assert selection.mechanism == "make_laplace_threshold" and selection.count == "COUNT(*)"
    # 2 selected sets x 3 keys: the row's two and, under scramblers with sampling, one other
    # source's whose delivery the joint view's coupling moves (docs/accounting.md).
    assert selection.changed_keys == 6 and selection.opendp_delta <= selection.delta == 1e-6
    data = {(s, i) for s, i in zip(penguins.species, penguins.island, strict=True)}
    released = {(r["species"], r["island"], r["grouping_set"]): r["n"] for r in run.rows}
    assert all(n >= selection.threshold for n in released.values())
    assert {(s, i) for s, i, g in released if g == "(species, island)"} <= data
    assert {s for s, _, g in released if g == "(species)"} <= {s for s, _ in data}
    # 124 rows (about 100 delivered at σ = 0.2); the COUNT's scale is 6 / 2 = 3 (3 keys per set
    # in the joint view), τ about 45: Gentoo on Biscoe misses it with chance below 1e-6.
    assert ("Gentoo", "Biscoe", "(species, island)") in released
    assert selection.selected_keys is not None
    assert {g: set(keys) for g, keys in selection.selected_keys.items()} == {
        "(species)": {(s,) for s, _, g in released if g == "(species)"},
        "(species, island)": {(s, i) for s, i, g in released if g == "(species, island)"},
    }
    assert release.delta == pytest.approx(1e-6) and release.epsilon == pytest.approx(2.0)
    assert release.composed_epsilon is not None
    assert release.composed_epsilon <= release.summed_epsilon + 1e-9
    assert budget.spent().delta == pytest.approx(release.composed_delta)
    assert release.composed_delta == pytest.approx(run.report.privacy.delta + 1e-6)
    assert "selected by" in release.keys and "τ" in release.keys
    document = run.to_dict()["report"]["release"]["key_selection"]
    assert document["threshold"] == selection.threshold


def test_cli_key_selection(cli: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    rows = ["city,age"] + [f"{c},{30 + i % 40}" for i, c in enumerate(["a"] * 150 + ["b"] * 3)]
    path.write_text("\n".join(rows) + "\n")
    outcome = cli(
        "run", "aggregate", "--data", path, "--sql",
        "SELECT city, COUNT(*), AVG(age) FROM people GROUP BY city",
        "--mechanism", "scrambler", "--batch", "50", "--dummies", "5", "--sampling", "0.2",
        "--release", "laplace", "--release-epsilon", "3", "--bounds", "age=0:100",
        "--key-selection-delta", "1e-6", "--estimate", "unbiased", "--seed", "1", "--json",
    )  # fmt: skip
    assert outcome.status in (0, None), outcome.err
    import json

    document = json.loads(outcome.out)
    # a: 150 rows, about 120 delivered; the COUNT's scale 3 / (3 / 3) = 3 (three aggregates, 3
    # keys per set in the joint view), τ about 45; b's 3 rows: released with chance ~1e-6.
    assert [row["city"] for row in document["result"]] == ["a"]
    assert document["report"]["release"]["key_selection"]["selected_keys"] == {"(city)": [["a"]]}
    (row,) = document["result"]  # estimates whose intervals cover sampling and noise
    assert row["count_star() (95% low)"] < row["count_star() (estimate)"]
    assert row["avg(age) (95% low)"] < row["avg(age) (estimate)"] < row["avg(age) (95% high)"]
    assert document["report"]["estimate"]["method"] == "horvitz-thompson with release noise"
    assert "noise" in document["report"]["result_semantics"]
    stray = cli(
        "run", "aggregate", "--data", path,
        "--sql", "SELECT city, COUNT(*) FROM people GROUP BY city", "--key-selection-delta", "1e-6",
    )  # fmt: skip
    assert stray.status == 2 and "only with --release" in stray.err
