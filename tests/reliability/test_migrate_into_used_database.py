"""`chatmem migrate --to postgres` into a database another workspace already uses.

It used to copy nothing of this workspace's history, report success, and from then on
`chatmem search` here returned the other workspace's turns. A database records the
workspace it serves: a move into it from another workspace, and any later open by one, is
refused in one line (exit 2), and nothing crosses either way. Real processes, a real server.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import psycopg
import pytest

from tests.functional.test_console import clean_env
from tests.postgres import PostgresServer
from tests.reliability.support import REPO, cli

THEIRS = ["remember that the kayak is blue", "the blue kayak lives in the boathouse"]
OURS = ["remember that the kayak is green", "the green kayak lives in the garage"]


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    with postgres_server.schema() as dsn:
        yield dsn


def run(
    args: list[str], env: Mapping[str, str], lines: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*args),
        input="".join(f"{line}\n" for line in lines or []),
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env=clean_env(env),
        timeout=180,
        check=False,
    )


def pg_env(dsn: str) -> dict[str, str]:
    return {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}


def stored_messages(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return sorted(str(row[0]) for row in conn.execute("SELECT content FROM messages"))


def refused_in_one_line(done: subprocess.CompletedProcess[str]) -> None:
    """Exit 2 with one error line (`chatmem: error: ...`, or its JSON form under --json)."""
    errors = [
        line for line in done.stderr.splitlines() if line.startswith(("chatmem: error", '{"error"'))
    ]
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(errors) == 1 and "belongs to another workspace" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_used_database_is_refused_and_nothing_crosses(tmp_path: Path, pg_dsn: str) -> None:
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    for workspace in (theirs, ours):
        assert run(["init", "--workspace", str(workspace)], {}).returncode == 0
    told = run(["chat", "--workspace", str(theirs), "--as", "bob"], pg_env(pg_dsn), THEIRS)
    assert told.returncode == 0, told.stderr
    assert run(["chat", "--workspace", str(ours), "--as", "bob"], {}, OURS).returncode == 0
    theirs_before = stored_messages(pg_dsn)
    assert any("blue" in text for text in theirs_before)

    moved = run(["migrate", "--workspace", str(ours), "--to", "postgres", "--dsn", pg_dsn], {})
    refused_in_one_line(moved)
    assert stored_messages(pg_dsn) == theirs_before  # nothing of ours went in

    # Pointed at their database anyway: refused, and none of their turns shown.
    search = ["search", "kayak", "--workspace", str(ours), "--scope", "main", "--json"]
    on_theirs = run(search, pg_env(pg_dsn))
    refused_in_one_line(on_theirs)
    assert "blue" not in on_theirs.stdout

    # Its own storage still answers with its own turns only.
    own = run(search, {})
    assert own.returncode == 0, own.stderr
    assert "green" in own.stdout and "blue" not in own.stdout
