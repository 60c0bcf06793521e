"""The suite's socket guard: a test that tries to leave the machine fails at once, while
loopback (every fake server of the suite) stays open."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.conftest import ExternalConnection


def test_a_connection_beyond_loopback_is_refused() -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
        pytest.raises(ExternalConnection, match=r"192\.0\.2\.1"),
    ):
        sock.connect(("192.0.2.1", 443))


async def test_asyncio_connections_are_guarded_too() -> None:
    with pytest.raises(ExternalConnection):
        await asyncio.open_connection("192.0.2.1", 443)


async def test_loopback_stays_open() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.read() == b"ok"
        writer.close()
        await writer.wait_closed()
