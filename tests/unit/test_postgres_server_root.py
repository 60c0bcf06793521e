"""The test PostgreSQL server keeps its files outside pytest's temporary root: run as
root, the server is a user of its own, and any pytest session that starts on the machine
sets `pytest-of-<user>` back to 0700 (one did, and a whole worker's server failed its
initdb with "Permission denied")."""

from __future__ import annotations

import stat

import psycopg
import pytest

from tests.postgres import PostgresServer


def test_the_server_files_are_outside_pytests_temporary_root(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    temporary_root = tmp_path_factory.getbasetemp()
    user_root = next(
        (p for p in temporary_root.parents if p.name.startswith("pytest-of-")), temporary_root
    )
    assert user_root not in postgres_server.root.parents
    assert postgres_server.root.stat().st_mode & stat.S_IXOTH
    mode = user_root.stat().st_mode
    try:
        user_root.chmod(0o700)  # what another pytest session does to it
        postgres_server.pause()
        postgres_server.resume()
        with psycopg.connect(postgres_server.uri) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        user_root.chmod(stat.S_IMODE(mode))
