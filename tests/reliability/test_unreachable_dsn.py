"""A DSN this workspace never reached (a port that refuses, a host that never answers, a
mistyped host or database name) is one line with the cause and a non-zero exit, within
seconds, for every command; it never claims anything of pgvector.

A server the workspace did reach and that is down now is an outage instead: the start
goes on from the files (tests/reliability/test_start_around_outage.py).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from tests.functional.test_console import clean_env
from tests.postgres import PostgresServer
from tests.reliability.support import REPO, cli
from tests.reliability.test_postgres_outage import pg_config

pytestmark = pytest.mark.timeout(300)

UPPER_GUARD_SECONDS = 15.0
"""The target is 5 s (a first contact waits at most `FIRST_CONTACT_SECONDS`, 3 s, plus
the interpreter's start); the guard is generous for a busy 2-core machine: it catches a
wait for the pool (5 s per part, ~20 s before), not a slow start."""
COMMANDS = (("status",), ("search", "kayak"), ("capture", "the kayak is red"), ("chat",))


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def refusing_port() -> int:
    """A loopback port nobody listens on (taken, then given back)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(workspace: Path, dsn: str, *args: str) -> tuple[int, str, float]:
    env = clean_env({"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn})
    began = time.monotonic()
    done = subprocess.run(
        cli(*args, "--workspace", str(workspace)),
        input="hello\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stderr, time.monotonic() - began


def assert_one_line(code: int, stderr: str, took: float, cause: str) -> None:
    lines = [line for line in stderr.strip().splitlines() if "creating workspace" not in line]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("chatmem: error: "), stderr
    assert cause in lines[0], stderr
    assert "pgvector" not in stderr
    assert code != 0
    assert took < UPPER_GUARD_SECONDS, (took, stderr)


@pytest.mark.slow
async def test_a_dsn_never_reached_is_one_line_and_a_non_zero_exit(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    # The workspace has reached its own server: a DSN that leads elsewhere is another one.
    async with MemoryCore.open(pg_config(own_postgres, workspace), create=True) as core:
        await core.memories.capture(MAIN, "met the real server")
    mistyped_name = own_postgres.uri.replace("/postgres?", "/postgress?", 1)
    assert mistyped_name != own_postgres.uri
    cases = [
        (f"postgresql://127.0.0.1:{refusing_port()}/chatmem", "Connection refused", COMMANDS),
        (mistyped_name, 'database "postgress" does not exist', COMMANDS),
        ("postgresql://chatmem-db.invalid/chatmem", "chatmem-db.invalid", COMMANDS[:1]),
    ]
    for dsn, cause, commands in cases:
        for command in commands:
            code, stderr, took = run(workspace, dsn, *command)
            assert_one_line(code, stderr, took, cause)
    with silent_port() as port:
        code, stderr, took = run(workspace, f"postgresql://127.0.0.1:{port}/chatmem", "status")
        assert_one_line(code, stderr, took, "timeout")
    # A new workspace pointed at a server that is not there is refused the same way.
    code, stderr, took = run(
        tmp_path / "new", f"postgresql://127.0.0.1:{refusing_port()}/chatmem", "init"
    )
    assert_one_line(code, stderr, took, "Connection refused")
