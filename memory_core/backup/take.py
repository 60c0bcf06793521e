"""`chatmem backup DEST`: a consistent copy of a workspace that bots go on writing.

Order matters. A capture is acknowledged once its journal row commits; its row is
deleted only after MEMORY.md holds it. So the journal is copied first and the files
after it: a capture acknowledged before the backup began is in the copied journal, or
was already in MEMORY.md when that was copied (a capture in both is replayed once: the
replay skips what the file holds). The database (history, audit) is copied before the
files too, so a conversation archived meanwhile is in the copied database or in the
copied archive file, never in neither.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections import defaultdict
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memory_core.backup.files import copy_file, lock_of, workspace_files
from memory_core.backup.manifest import (
    FILES_DIR,
    MANIFEST,
    POSTGRES_DIR,
    BackupRefused,
    Manifest,
    TableDump,
    sha256_of,
)
from memory_core.base.atomic import describe, fsync_dir
from memory_core.base.workspace import STATE_DIR, Workspace
from memory_core.storage.db import copy_database
from memory_core.storage.dialects import dialect_for


class Locks(Protocol):
    """`LockRegistry.hold`: the lock a writer of the file holds."""

    def hold(self, name: str) -> AbstractAsyncContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class Source:
    workspace: Workspace
    backend: str
    postgres_dsn: str
    created_at: str


def check_destination(dest: Path, workspace: Workspace) -> bool:
    """A new or empty directory outside the workspace (blocking); whether it exists."""
    root = workspace.root.resolve()
    resolved = dest.resolve()
    if resolved == root or root in resolved.parents:
        raise BackupRefused(f"the backup cannot go inside the workspace it copies: {dest}")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupRefused(f"{dest} exists and is not an empty directory (nothing was done)")
    return dest.exists()


async def take_backup(source: Source, locks: Locks, dest: Path) -> Manifest:
    """Copy the workspace into `dest` (see the module docstring); its manifest, written
    last. A backup that fails or is interrupted removes what it wrote (`dest` was new
    or empty)."""
    existed = await asyncio.to_thread(check_destination, dest, source.workspace)
    try:
        return await _take(source, locks, dest)
    except BaseException as exc:
        _remove(dest, keep_dir=existed)  # ours alone: it was checked empty above
        if isinstance(exc, OSError):
            where = f" {exc.filename}" if exc.filename else ""
            raise BackupRefused(
                f"backup not made: cannot copy{where}: {describe(exc)}; nothing was kept in {dest}"
            ) from exc
        raise


def _remove(dest: Path, *, keep_dir: bool) -> None:
    if not keep_dir:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


async def _take(source: Source, locks: Locks, dest: Path) -> Manifest:
    workspace = source.workspace
    identity = workspace.identity_path
    manifest = Manifest(
        backend=source.backend,
        created_at=source.created_at,
        workspace_id=(
            (await asyncio.to_thread(identity.read_text, "utf-8")).strip()
            if identity.is_file()
            else None
        ),
    )
    files = dest / FILES_DIR
    if not dialect_for(source.backend).is_server:
        for name in ("journal.sqlite3", "index.sqlite3"):  # the journal first
            relative = f"{STATE_DIR}/{name}"
            if await asyncio.to_thread(copy_database, workspace.state_dir / name, files / relative):
                manifest.files[f"{FILES_DIR}/{relative}"] = await asyncio.to_thread(
                    sha256_of, files / relative
                )
    else:
        from memory_core.storage.pg import dump

        tables, migrations = await asyncio.to_thread(
            dump.dump, source.postgres_dsn, dest / POSTGRES_DIR
        )
        manifest.migrations = migrations
        for table, (columns, rows) in tables.items():
            manifest.tables.append(TableDump(table, columns, rows))
            relative = f"{POSTGRES_DIR}/{table}.copy"
            manifest.files[relative] = await asyncio.to_thread(sha256_of, dest / relative)
    await _copy_files(workspace.root, files, locks, manifest)
    await asyncio.to_thread(_write_manifest, dest, manifest)
    return manifest


async def _copy_files(root: Path, files: Path, locks: Locks, manifest: Manifest) -> None:
    by_lock: dict[str | None, list[str]] = defaultdict(list)
    for relative in await asyncio.to_thread(lambda: sorted(workspace_files(root))):
        by_lock[lock_of(relative)].append(relative)

    def copy_all(names: list[str]) -> None:
        for relative in names:
            digest = copy_file(root / relative, files / relative)
            if digest is not None:
                manifest.files[f"{FILES_DIR}/{relative}"] = digest

    for name, names in sorted(by_lock.items(), key=lambda item: item[0] or ""):
        if name is None:
            await asyncio.to_thread(copy_all, names)
            continue
        async with locks.hold(name):
            await asyncio.to_thread(copy_all, names)


def _write_manifest(dest: Path, manifest: Manifest) -> None:
    path = dest / MANIFEST
    draft = dest / f".{MANIFEST}.tmp"
    with draft.open("w", encoding="utf-8") as handle:
        handle.write(manifest.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(draft, path)
    fsync_dir(dest)
