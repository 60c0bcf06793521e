"""Which PostgreSQL servers a workspace has reached: what tells an outage from a mistake."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from memory_core.base.errors import ConfigError, DatabaseUnreachable
from memory_core.storage.pg.database import PgDatabase, refusal
from memory_core.storage.pg.reached import ReachedServers, fingerprint

DSN = "postgresql://bot:secret@db.example:5432/chatmem?options=-csearch_path%3Dbot1"


def test_a_fingerprint_is_where_the_dsn_leads_not_its_password() -> None:
    same = "postgresql://bot:rotated@db.example:5432/chatmem?options=-csearch_path%3Dbot1"
    assert fingerprint(DSN) == fingerprint(same)
    assert "secret" not in (fingerprint(DSN) or "")
    for other in (
        DSN.replace("db.example", "db.exampel"),
        DSN.replace("5432", "5433"),
        DSN.replace("/chatmem?", "/chatmen?"),
        DSN.replace("bot1", "bot2"),
    ):
        assert fingerprint(other) != fingerprint(DSN)
    assert fingerprint("not a dsn = =") is None


def test_a_server_is_known_once_recorded(tmp_path: Path) -> None:
    reached = ReachedServers(tmp_path)
    assert not reached.known(DSN)
    reached.record(DSN)
    reached.record(DSN)
    assert reached.recorded(DSN) and reached.known(DSN)
    assert not reached.known(DSN.replace("5432", "5433"))
    assert len(reached.path.read_text().splitlines()) == 1
    assert "secret" not in reached.path.read_text()


def test_a_workspace_that_spooled_before_the_record_existed_knows_its_server(
    tmp_path: Path,
) -> None:
    (tmp_path / "spool").mkdir()
    reached = ReachedServers(tmp_path)
    assert reached.known(DSN) and not reached.recorded(DSN)
    reached.record("postgresql://elsewhere/chatmem")
    assert not reached.known(DSN)  # once there is a record, only what it holds


def test_only_a_lasting_refusal_is_one() -> None:
    def unreachable(text: str) -> DatabaseUnreachable:
        error = DatabaseUnreachable("the database is unreachable")
        error.__cause__ = psycopg.OperationalError(text)
        return error

    said = 'connection failed: ... failed: FATAL:  database "chatmen" does not exist'
    assert refusal(unreachable(said)) == 'database "chatmen" does not exist'
    password = 'FATAL:  password authentication failed for user "bot"'
    assert refusal(unreachable(password)) == 'password authentication failed for user "bot"'
    assert refusal(unreachable("FATAL:  the database system is starting up")) is None
    assert refusal(unreachable("failed: Connection refused")) is None
    assert refusal(DatabaseUnreachable("no cause")) is None


async def test_a_server_never_reached_is_one_config_line_without_the_password() -> None:
    dsn = "postgresql://chatmem:hunter2@127.0.0.1:1/nowhere"
    with pytest.raises(ConfigError) as caught:
        await PgDatabase.open(dsn, known=False)
    said = str(caught.value)
    assert "Connection refused" in said and "never reached" in said
    assert "hunter2" not in said and "\n" not in said
