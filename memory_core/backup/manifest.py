"""The manifest of a backup: what it holds, each file's SHA-256, and how it was made.

A backup directory without one is unfinished (the manifest is written last), and one
whose files do not match it is refused before anything is restored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from memory_core.base.errors import ChatmemError

MANIFEST = "manifest.json"
FORMAT = "chatmem-backup"
FORMAT_VERSION = 1
FILES_DIR = "files"
"""The workspace's files (SQLite's databases among them) under the backup directory."""
POSTGRES_DIR = "postgres"
"""One COPY text file per table of a PostgreSQL backup."""
CHUNK = 1 << 20


class BackupRefused(ChatmemError):
    """A backup that cannot be restored (missing, unfinished, altered): one line."""


@dataclass(frozen=True, slots=True)
class TableDump:
    name: str
    columns: list[str]
    rows: int


@dataclass(slots=True)
class Manifest:
    backend: str
    created_at: str
    workspace_id: str | None
    chatmem_version: str = field(default_factory=lambda: distribution_version())
    files: dict[str, str] = field(default_factory=dict)
    """Backup-relative POSIX path -> SHA-256 (hex): workspace files and table dumps."""
    tables: list[TableDump] = field(default_factory=list)
    migrations: list[str] = field(default_factory=list)
    """PostgreSQL: the migrations the dumped database had applied."""

    def to_json(self) -> str:
        data: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION}
        data.update(asdict(self))
        return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: Path) -> Manifest:
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError("not a chatmem backup manifest")
            if int(data["format_version"]) > FORMAT_VERSION:
                raise ValueError(f"format {data['format_version']} is newer than this chatmem's")
            return cls(
                backend=str(data["backend"]),
                created_at=str(data["created_at"]),
                workspace_id=data.get("workspace_id"),
                chatmem_version=str(data.get("chatmem_version", "unknown")),
                files={str(k): str(v) for k, v in data["files"].items()},
                tables=[
                    TableDump(str(t["name"]), list(t["columns"]), int(t["rows"]))
                    for t in data.get("tables", [])
                ],
                migrations=[str(m) for m in data.get("migrations", [])],
            )
        except KeyError as exc:
            raise BackupRefused(
                f"{where} is not a usable backup manifest: it lacks the field {exc.args[0]!r}"
            ) from exc
        except (ValueError, TypeError, AttributeError) as exc:
            raise BackupRefused(f"{where} is not a usable backup manifest: {exc}") from exc


def distribution_version() -> str:
    try:
        return metadata.version("chatmem-memory")
    except metadata.PackageNotFoundError:
        return "unknown"


def sha256_of(path: Path) -> str:
    """The file's SHA-256 (blocking)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(source: Path) -> Manifest:
    """The manifest of the backup at `source` (blocking); one line if there is none."""
    if not source.is_dir():
        raise BackupRefused(f"no backup at {source}: not a directory")
    path = source / MANIFEST
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise BackupRefused(
            f"{source} holds no {MANIFEST}: not a chatmem backup, or one that did not finish"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BackupRefused(f"cannot read {path}: {exc}") from exc
    return Manifest.from_json(text, path)


def verify(source: Path, manifest: Manifest) -> None:
    """Every file the manifest lists is there with its checksum (blocking); the first
    that is not is refused by name."""
    for relative, expected in sorted(manifest.files.items()):
        if relative.startswith("/") or ".." in relative.split("/"):
            raise BackupRefused(f"the backup's manifest names a path outside it: {relative}")
        path = source / relative
        if not path.is_file() or path.is_symlink():
            raise BackupRefused(f"the backup is incomplete: {relative} is missing")
        if sha256_of(path) != expected:
            raise BackupRefused(
                f"the backup is damaged: {relative} does not match its checksum (nothing was"
                " restored)"
            )
