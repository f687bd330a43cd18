"""Under a noisy release every printed byte is a function of the released rows and the public
configuration.

The noise draw is forced (``released_rows`` patched to publish fixed values whatever the
table), so that two *different* tables publish the same rows: the whole output of the run (the
CLI's text and ``--json``, the report's ``to_dict``) must then be the same, byte for byte, apart
from what the traffic observer sees (covered by the plan's guarantee, composed with the
release's): the channels and edges of the observed traffic. The patch also counts the draws:
one per run (the report never draws the noise a second time).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dpcomm
from dpcomm.queries import release as release_module

pytestmark = pytest.mark.filterwarnings("ignore::dpcomm.errors.DpcommWarning")

SQL = "SELECT species, COUNT(*) AS n, AVG(body_mass_g) AS mass FROM penguins GROUP BY species"
KEYS = {"species": ["Adelie", "Chinstrap", "Gentoo", "Emperor"]}
BOUNDS = {"body_mass_g": (2500.0, 6500.0)}
SCRAMBLERS = dpcomm.Scramblers(sampling_rate=0.2, batch_size=40, num_dummies=10)
RELEASE_FLAGS = (
    "--release", "laplace", "--release-epsilon", "1", "--bounds", "body_mass_g=2500:6500",
    "--keys", "species=Adelie,Chinstrap,Gentoo,Emperor",
)  # fmt: skip


@pytest.fixture(scope="module")
def tables(openml_table: Callable[[str], Any]) -> tuple[Any, Any]:
    """The penguins, and the penguins with other species and masses (same S)."""
    penguins = openml_table("id_42585").to_pandas()
    other = penguins.copy()
    other["species"] = (["Gentoo"] * 200 + ["Adelie"] * len(other))[: len(other)]
    other["body_mass_g"] = other["body_mass_g"] * 0.8 + 300.0
    return penguins, other


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every release publishes fixed values (50 + the row's place), whatever the data."""
    original = release_module.released_rows
    draws: list[int] = []

    def released_rows(bound: Any, release: Any, rows_by_set: Any) -> list[list[dict[str, Any]]]:
        draws.append(1)
        rows = original(bound, release, rows_by_set)  # the real path (keys, checks)
        for rows_of_set in rows:
            for place, row in enumerate(rows_of_set):
                for noise in release.noises:
                    row[noise.output] = 50 + place if noise.integer else 5000.0 + place
        return rows

    monkeypatch.setattr(release_module, "released_rows", released_rows)
    return draws


#: Lines of the text report that describe the observed traffic (the plan's guarantee covers it).
TRAFFIC_LINES = re.compile(r"^  (secure channels per node|max channels by role): ")
#: ``--json`` fields of the observed traffic.
TRAFFIC_FIELDS = ("max_channels_per_node", "mean_channels_per_node", "max_channels_by_role")


def _public(document: dict[str, Any]) -> dict[str, Any]:
    """A run's JSON without the observed traffic's channels and edges."""
    efficiency = document["report"]["efficiency"]
    for name in TRAFFIC_FIELDS:
        efficiency.pop(name)
    for flow in efficiency["traffic"]:
        flow.pop("edges")
    return document


def test_the_cli_prints_the_same_bytes_for_two_tables(
    cli: Callable[..., Any], tables: tuple[Any, Any], forced: list[int], tmp_path: Path
) -> None:
    path = tmp_path / "penguins.csv"
    texts, documents = [], []
    for table in tables:
        table.to_csv(path, index=False)
        base = ("run", "aggregate", "--data", path, "--sql", SQL, *RELEASE_FLAGS, "--seed", "3")
        text = cli(*base, "--mechanism", "scrambler", "--batch", "40", "--dummies", "10")
        as_json = cli(*base, "--mechanism", "scrambler", "--batch", "40", "--dummies", "10",
                      "--json")  # fmt: skip
        assert text.status in (0, None) and as_json.status in (0, None), text.err + as_json.err
        texts.append(
            "\n".join(line for line in text.out.splitlines() if not TRAFFIC_LINES.match(line))
        )
        documents.append(_public(json.loads(as_json.out)))
    assert len(forced) == 4  # one draw per run
    assert texts[0] == texts[1]
    assert documents[0] == documents[1]
    assert "exact" not in texts[0].split("Utility")[1]
    assert "timing is withheld" in texts[0]


def test_the_report_is_the_same_for_two_tables(tables: tuple[Any, Any], forced: list[int]) -> None:
    documents = []
    for table in tables:
        run = dpcomm.run_sql(
            SQL, table, countermeasure=SCRAMBLERS, seed=3, release=dpcomm.Laplace(1.0),
            bounds=BOUNDS, keys=KEYS,
        )  # fmt: skip
        documents.append(_public(run.to_dict()))
        estimated = run.with_unbiased_estimate()
        documents.append(_public(estimated.to_dict()))
    assert len(forced) == 2  # drawn once per run; the estimate reads the same draw
    assert documents[0] == documents[2] and documents[1] == documents[3]
    utility = documents[0]["report"]["utility"]
    assert "mean_relative_error" not in utility and utility["groups"] == 4
    efficiency = documents[0]["report"]["efficiency"]
    assert efficiency["max_channels_per_node_nonprivate"] is None
    assert efficiency["seconds"] is None


def test_compare_with_exact_compares_the_published_values(tables: tuple[Any, Any]) -> None:
    """For whoever holds the data: the published values (not another draw) against the exact."""
    penguins, _ = tables
    run = dpcomm.run_sql(
        SQL, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=3,
        release=dpcomm.Laplace(1e9), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    utility = dpcomm.compare_with_exact(run)
    assert utility.mean_relative_error["COUNT(*)"] < 1e-6  # ε = 1e9: the published ≈ exact
    assert utility.groups == 3  # Emperor has no tuple
    weak = dpcomm.run_sql(
        SQL, penguins, countermeasure=dpcomm.NoCountermeasure(), seed=3,
        release=dpcomm.Laplace(0.01), bounds=BOUNDS, keys=KEYS,
    )  # fmt: skip
    exact = {r["species"]: r["n"] for r in penguins.groupby("species").size().reset_index(
        name="n").to_dict("records")}  # fmt: skip
    published = {r["species"]: r["n"] for r in weak.rows if r["species"] in exact}
    errors = [abs(published[s] - n) / n for s, n in exact.items()]
    compared = dpcomm.compare_with_exact(weak)
    assert compared.mean_relative_error["COUNT(*)"] == pytest.approx(sum(errors) / len(errors))
    with pytest.raises(dpcomm.InvalidParameterError, match="invalid run"):
        dpcomm.compare_with_exact("a run")  # type: ignore[arg-type]


def test_key_selection_counts_the_released_rows(tables: tuple[Any, Any]) -> None:
    penguins, _ = tables
    run = dpcomm.run_sql(
        "SELECT species, island, COUNT(*) AS n FROM penguins GROUP BY species, island",
        penguins, countermeasure=SCRAMBLERS, seed=1, release=dpcomm.Laplace(1.0),
        key_selection_delta=1e-6,
    )  # fmt: skip
    utility = run.report.utility
    assert isinstance(utility, dpcomm.pipeline.utility.ReleaseUtility)
    assert utility.groups == len(run.rows) == utility.groups_released["(species, island)"]
