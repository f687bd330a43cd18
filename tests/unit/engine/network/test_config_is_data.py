"""A node's config is data: the SQL it runs is derived again, programs come from the registry.

Whoever carries the configs of a `deploy configs` round may edit them; the result node never
runs the derived SQL a config carries as given (it derives it from the user's SQL and the
schema through the checks of ``run``), and no config makes a node import a module of its
choice. Each edit is refused in one line before the node registers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dpcomm.cli.main import main
from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import write_deployment
from dpcomm.engine.network.result import run_result
from dpcomm.engine.network.spec import NodeConfig, RoundSpec
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import NoCountermeasure
from dpcomm.queries.program import public_program
from dpcomm.release.mechanisms import Laplace
from dpcomm.release.noise import noisy_program

SQL = (
    "SELECT g1, COUNT(*) AS n, SUM(m1) AS total FROM t WHERE m2 > 0 "
    "GROUP BY g1 HAVING COUNT(*) > 0 ORDER BY g1"
)


@pytest.fixture(scope="module")
def config_text() -> str:
    """The result node's config of a released analyst query, as `deploy configs` writes it."""
    program = noisy_program(
        SQL,
        synthetic_table(num_rows=6, seed=4),
        num_targets=2,
        release=Laplace(1.0),
        bounds={"m1": (-3.0, 3.0)},
        keys={"g1": list(range(5))},
        countermeasure=NoCountermeasure(),
    )
    spec = RoundSpec.create(
        public_program(program), NoCountermeasure(), seed=None, idle_seconds=5, round_seconds=30
    )
    return NodeConfig(name="result", round=spec).to_json()


def _edited(text: str, edit: Any) -> NodeConfig:
    document = json.loads(text)
    edit(document["round"]["program"])
    return NodeConfig.from_json(json.dumps(document))


def _refused(config: NodeConfig, match: str) -> str:
    with pytest.raises(InvalidParameterError, match=match) as refused:
        config.round.public_program.check_config()
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_an_unedited_config_derives_the_same_sql(config_text):
    NodeConfig.from_json(config_text).round.public_program.check_config()


def _post(program: dict[str, Any], sql: str) -> None:
    program["query"]["post"]["sql"] = sql


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: _post(p, "COPY (SELECT 1) TO '/tmp/dpcomm-edited.csv'"),
        lambda p: _post(p, "SELECT read_text('/etc/hostname') FROM __dpcomm_result"),
        lambda p: p["query"].update(projection='SELECT getenv(\'HOME\') AS "g1" FROM "t"'),
        lambda p: p["query"]["output_types"].__setitem__(0, "BIGINT GENERATED ALWAYS AS (1)"),
    ],
    ids=["copy-to", "read-text", "projection", "type"],
)
def test_edited_derived_sql_is_refused(config_text, edit):
    message = _refused(_edited(config_text, edit), "edited config")
    assert "derives" in message


def test_derived_sql_without_the_users_sql_is_refused(config_text):
    _refused(_edited(config_text, lambda p: p.update(derivation=None)), "the user's SQL")


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda p: p["derivation"].update(sql=SQL.replace("m2 > 0", "random() > 0.5")), "random"),
        (lambda p: p["derivation"]["schema"][0].__setitem__(1, "INTEGER, x AS (1)"), "type"),
    ],
    ids=["users-sql", "schema"],
)
def test_an_edited_derivation_goes_through_the_checks_of_run(config_text, edit, match):
    _refused(_edited(config_text, edit), match)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda p: p.update(module="os"), "program module"),
        (lambda p: p.update(kind="shell", module="subprocess"), "program kind"),
        (lambda p: p["release"].update(module="dpcomm.cli.main"), "release module"),
    ],
    ids=["program-module", "program-kind", "release-module"],
)
def test_programs_load_only_from_the_registry(config_text, edit, match):
    config = _edited(config_text, edit)
    with pytest.raises(InvalidParameterError, match=match):
        _ = config.round.public_program


def test_the_result_node_refuses_before_it_registers(config_text):
    """`run_result` checks first: nothing is listened on or sent."""
    config = _edited(config_text, lambda p: _post(p, "SELECT 1"))

    class Context:
        program = config.round.public_program

    with pytest.raises(InvalidParameterError, match="edited config"):
        asyncio.run(run_result(Context()))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A round's configs and certificates as `deploy configs` writes them (4 sources)."""
    folder = tmp_path_factory.mktemp("deployment")
    program = noisy_program(
        "SELECT g1, COUNT(*) AS n FROM t WHERE m2 > 0 GROUP BY g1 ORDER BY g1",
        synthetic_table(num_rows=4, seed=4),
        num_targets=1,
        release=Laplace(1.0),
        keys={"g1": list(range(5))},
    )
    write_deployment(
        program, NoCountermeasure(), folder, coordinator_port=1, idle_seconds=5, timeout=10
    )
    return folder


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda p: _post(p, "COPY (SELECT 1) TO '/tmp/dpcomm-edited.csv'"),
            "result: registration: InvalidParameterError: invalid program query",
        ),
        (lambda p: p.update(module="os"), "invalid program module"),
    ],
    ids=["post-processing", "module"],
)
def test_node_run_refuses_an_edited_result_config(written, edit, said, capsys):
    config = written / "configs" / "edited.json"
    document = json.loads((written / "configs" / "result.json").read_text())
    edit(document["round"]["program"])
    config.write_text(json.dumps(document))
    pki = written / "pki"
    argv = ["node", "run", "--role", "result", "--config", str(config)]
    argv += ["--ssl-certfile", str(pki / "result.pem"), "--ssl-keyfile", str(pki / "result.key")]
    assert main([*argv, "--ssl-ca-certfile", str(pki / "ca.pem")]) != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if said in line]
    assert len(errors) == 1
    assert not Path("/tmp/dpcomm-edited.csv").exists()
