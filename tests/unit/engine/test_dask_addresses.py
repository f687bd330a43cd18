"""A scheduler's address is checked before anything connects: a malformed one is one line."""

import pytest

from dpcomm.engine.dask_engine import SCHEDULER_VARIABLE, DaskEngine, scheduler_address
from dpcomm.errors import InvalidParameterError

MALFORMED = [
    "nonsense",
    "tcp://",
    "tcp://host:notaport",
    "http://x",
    "tcp://host:0",
    "tcp://host:65536",
    "tcp://host:8786/",
    " tcp://host:8786",
    "tcp://:8786",
    "udp://host:8786",
    "",
]


@pytest.mark.parametrize("address", MALFORMED)
def test_a_malformed_address_is_refused_by_the_engine(address):
    with pytest.raises(InvalidParameterError) as caught:
        DaskEngine(scheduler=address)
    assert caught.value.name == "scheduler" and caught.value.given == address
    assert "tcp://HOST:PORT" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("address", ["nonsense", "tcp://", "tcp://host:notaport", "http://x"])
def test_a_malformed_address_is_one_line_from_the_cli(cli, address):
    query = ["run", "aggregate", "--synthetic", 100, "--engine", "dask", "--scheduler", address]
    status, out, err = cli(*query, "--sql", "SELECT g1, COUNT(*) FROM t GROUP BY g1")
    assert status != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--scheduler" in lines[0] and repr(address) in lines[0], err


def test_a_malformed_address_in_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv(SCHEDULER_VARIABLE, "tcp://host:notaport")
    with pytest.raises(InvalidParameterError) as caught:
        DaskEngine()
    assert caught.value.name == SCHEDULER_VARIABLE


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ("tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
        ("10.0.0.5:8786", "tcp://10.0.0.5:8786"),
        ("tls://scheduler.example.org:8786", "tls://scheduler.example.org:8786"),
        ("tcp://[::1]:8786", "tcp://[::1]:8786"),
    ],
)
def test_well_formed_addresses(given, address):
    assert scheduler_address(given) == address
    assert DaskEngine(scheduler=given).scheduler == address


def test_the_connect_timeout_is_checked():
    for wrong in (0, -1, float("inf"), float("nan"), True, "10"):
        with pytest.raises(InvalidParameterError, match="connect_timeout"):
            DaskEngine(connect_timeout=wrong)
