"""The versions `chatmem --version` prints: the distribution's, the schemas this code
writes, which extras are installed, and the schema a workspace's database is at.

Cheap on purpose (`--version` answers at once): the distribution's metadata, the
migration lists (plain data), and for a workspace one read of its `_migrations` table; no
extra is imported, an extra counts as installed when every distribution it requires is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

DISTRIBUTION = "chatmem-memory"
LEFT_OUT_EXTRAS = frozenset({"dev"})
"""Extras that are only the sum of others (and test tools): not a feature to report."""
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_NUMBER = re.compile(r"^m(\d+)_")


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema stands against this code's migrations."""

    database: str
    """"sqlite index", "sqlite journal" or "postgres"."""
    code: int
    """Migrations this code knows (its schema version)."""
    applied: int
    """Of those, how many the database has applied."""
    newer: int
    """Migrations the database has that this code does not know (a newer chatmem)."""

    @property
    def summary(self) -> str:
        if self.newer:
            return f"{self.database} schema is newer than this chatmem ({self.newer} unknown)"
        if self.applied < self.code:
            return (
                f"{self.database} schema {self.applied} of {self.code}: the next open migrates it"
            )
        return f"{self.database} schema {self.code} (current)"

    def as_json(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "code": self.code,
            "applied": self.applied,
            "newer": self.newer,
        }


def distribution_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed as a distribution)"


def code_schemas() -> dict[str, int]:
    """The schema versions this code writes: its number of migrations per database."""
    from memory_core.storage.migrations import JOURNAL_MIGRATIONS, MIGRATIONS
    from memory_core.storage.pg.migrations import PG_MIGRATIONS

    return {
        "sqlite_index": len(MIGRATIONS),
        "sqlite_journal": len(JOURNAL_MIGRATIONS),
        "postgres": len(PG_MIGRATIONS),
    }


def extras() -> dict[str, bool]:
    """Each extra of the distribution and whether everything it requires is installed."""
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return {}
    needs: dict[str, set[str]] = {}
    for line in requirements:
        marker = _EXTRA_MARKER.search(line)
        name = _NAME.match(line)
        if marker is None or name is None or marker.group(1) in LEFT_OUT_EXTRAS:
            continue
        needs.setdefault(marker.group(1), set()).add(name.group(1))
    return {extra: all(_installed(n) for n in names) for extra, names in sorted(needs.items())}


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def schema_state(database: str, applied: set[str], code: list[str]) -> SchemaState:
    """Pure: how the names a database recorded compare with this code's migrations. A
    name numbered past this code's last one is a newer chatmem's; names the code makes at
    run time under a known number (pgvector's HNSW steps) are neither."""
    known = set(code)
    last = max((_number(name) for name in code), default=0)
    newer = sum(1 for name in applied - known if _number(name) > last)
    return SchemaState(database, len(code), len(known & applied), newer)


def _number(name: str) -> int:
    match = _NUMBER.match(name)
    return int(match.group(1)) if match else 0


def sqlite_states(state_dir: Path) -> list[SchemaState]:
    """The schema of a workspace's SQLite files, read without writing (blocking); a file
    not made yet is left out."""
    from memory_core.storage.migrations import JOURNAL_MIGRATIONS, MIGRATIONS

    states = []
    for database, file, code in (
        ("sqlite index", "index.sqlite3", MIGRATIONS),
        ("sqlite journal", "journal.sqlite3", JOURNAL_MIGRATIONS),
    ):
        path = state_dir / file
        if path.is_file():
            names = [name for name, _ in code]
            states.append(schema_state(database, _sqlite_names(path), names))
    return states


def _sqlite_names(path: Path) -> set[str]:
    from memory_core.storage.db import read_only_rows

    rows = read_only_rows(path, "SELECT name FROM _migrations")
    return {str(r[0]) for r in rows or ()}  # no table: nothing applied


def postgres_state(dsn: str, timeout_seconds: int) -> SchemaState:
    """The schema a PostgreSQL database is at (blocking, at most about `timeout_seconds`
    to connect); psycopg's errors pass to the caller."""
    from memory_core.storage.pg.migrations import PG_MIGRATIONS
    from memory_core.storage.pg.probe import migrations

    names = [name for name, _ in PG_MIGRATIONS]
    return schema_state("postgres", migrations(dsn, timeout_seconds), names)
