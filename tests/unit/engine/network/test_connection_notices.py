"""asyncio's warnings about writes to a lost connection stay off a node's stderr."""

from __future__ import annotations

import asyncio
import logging

import pytest

import dpcomm.engine.network.tls  # noqa: F401  (installs the filter on asyncio's logger)


def test_writes_after_a_lost_connection_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> int:
        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.transport.abort()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.read()  # the peer is gone
        lost = 0
        for _ in range(40):  # asyncio warns from the fifth discarded write on
            writer.write(b"x" * 1024)
            await asyncio.sleep(0)
            lost += writer.transport.is_closing()
        writer.close()
        server.close()
        await server.wait_closed()
        return lost

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        assert asyncio.run(scenario()) > 0
    assert not [r for r in caplog.records if "raised exception" in r.getMessage()]


def test_other_asyncio_warnings_still_reach_the_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        logging.getLogger("asyncio").warning("socket.send() raised exception.")
        logging.getLogger("asyncio").warning("Executing <Task> took 2.5 seconds")
    assert [r.getMessage() for r in caplog.records] == ["Executing <Task> took 2.5 seconds"]
