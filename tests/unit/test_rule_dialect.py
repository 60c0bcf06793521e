"""Rule: what differs between the databases is asked of their dialect, never of a name.

Product code (memory_core/, adapters/, tui/, testkit/) neither compares a backend's name
nor keys a table by it: memory_core/storage/dialects.py holds one object per kind and
turns a `storage.backend` value into one, in one place (`dialect_for`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from memory_core.base.sql import Connection
from memory_core.storage.dialects import DIALECTS, POSTGRES, SQLITE, dialect_for

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("memory_core", "adapters", "tui", "testkit")
NAME = r"""["'](?:sqlite|postgres)["']"""
BRANCHES = re.compile(
    "|".join(
        [
            rf"[=!]=\s*{NAME}",  # backend == "sqlite", x.name != 'postgres'
            rf"{NAME}\s*[=!]=",  # "sqlite" == backend
            rf"\bin\s*[(\[{{]\s*{NAME}",  # backend in ("sqlite", ...)
            rf"\bcase\s+{NAME}",  # match backend: case "postgres"
            rf"[{{,]\s*{NAME}\s*:",  # {"sqlite": ..., "postgres": ...}
            r"\bbackend\s*[=!]=\s*[\"']",  # any literal compared with a backend
        ]
    )
)


def branches_on_name(text: str) -> list[int]:
    """The line numbers of `text` that compare a backend's name or key a table by it."""
    return [n for n, line in enumerate(text.splitlines(), 1) if BRANCHES.search(line)]


def test_no_code_branches_on_a_backend_name() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in branches_on_name(path.read_text(encoding="utf-8"))
    ]
    assert not found, "ask the dialect (memory_core/storage/dialects.py) instead: " + ", ".join(
        found
    )


def test_the_pattern_catches_each_form() -> None:
    caught = [
        'if conn.backend == "postgres":',
        "if backend != 'sqlite':",
        'return "sqlite" == kind',
        'if backend in ("sqlite", "other"):',
        '    case "postgres":',
        'BY = {"sqlite": 1, "postgres": 2}',
        'if dialect.name == "sqlite":',
    ]
    passed = [
        'choices=("postgres", "sqlite"),',
        '"sqlite_index": len(MIGRATIONS),',
        "return a.backend == b.backend",
        'help="--to postgres needs --dsn"',
    ]
    assert [branches_on_name(line) for line in caught] == [[1]] * len(caught)
    assert [branches_on_name(line) for line in passed] == [[]] * len(passed)


def test_one_dialect_per_name_and_a_clear_refusal() -> None:
    assert dialect_for("sqlite") is SQLITE and dialect_for("postgres") is POSTGRES
    assert all(dialect.name == name for name, dialect in DIALECTS.items())
    try:
        dialect_for("mysql")
    except Exception as exc:
        assert str(exc) == "storage.backend = 'mysql' is not one of 'sqlite', 'postgres'"
    else:
        raise AssertionError("an unknown backend name was taken")


class _Recorder:
    """A connection that records its statements (the dialects' SQL, without a server)."""

    dialect = POSTGRES

    def __init__(self) -> None:
        self.statements: list[str] = []

    def execute(self, sql: str, parameters: object = (), /) -> _Recorder:
        self.statements.append(sql)
        return self

    def executemany(self, sql: str, seq_of_parameters: object, /) -> _Recorder:
        return self.execute(sql)

    rowcount = 0

    def fetchone(self) -> tuple[int]:
        return (0,)

    def fetchall(self) -> list[object]:
        return []

    def __iter__(self) -> Iterator[object]:
        return iter([])


def test_each_dialect_says_what_differs() -> None:
    assert SQLITE.any_of("c.id", [3, 4]) == ("c.id IN (?,?)", [3, 4])
    assert POSTGRES.any_of("c.id", [3, 4]) == ("c.id = ANY(?)", [[3, 4]])
    assert (SQLITE.is_server, POSTGRES.is_server) == (False, True)
    assert (SQLITE.full_text, POSTGRES.full_text) == ("fts5", "gin")
    conn = _Recorder()
    recorded: Connection = conn
    assert POSTGRES.vacuum(recorded, ["audit", "chunks", "audit"])
    POSTGRES.follow_identity(recorded, "captures", "seq")
    SQLITE.follow_identity(recorded, "captures", "seq")
    assert conn.statements == [
        "VACUUM FULL audit",
        "VACUUM FULL chunks",
        "SELECT setval(pg_get_serial_sequence('captures', 'seq'),"
        " GREATEST((SELECT COALESCE(MAX(seq), 0) FROM captures), 1))",
    ]
