"""`chatmem restore DIR`: a backup put back into a workspace, checked before anything
is touched.

The checksums are verified first; a workspace (or PostgreSQL database) that holds
anything is refused unless `force`, and then its files are moved aside, never deleted.
The restored journal's rows belong to processes that are gone, so the first process to
open the workspace writes them into MEMORY.md (`longterm/staging.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memory_core.backup.files import copy_file
from memory_core.backup.manifest import (
    FILES_DIR,
    POSTGRES_DIR,
    BackupRefused,
    Manifest,
    read_manifest,
    verify,
)
from memory_core.base.atomic import describe
from memory_core.base.clock import epoch_seconds
from memory_core.base.workspace import Workspace
from memory_core.storage.dialects import dialect_for
from memory_core.storage.journal import FileOwners


@dataclass(slots=True)
class Restored:
    manifest: Manifest
    files: int = 0
    rows: int = 0
    moved_aside: Path | None = None
    left_out: list[str] = field(default_factory=list)
    """PostgreSQL columns the target lacks (pgvector's: made again)."""


def restore_blocking(
    source: Path, workspace: Workspace, backend: str, postgres_dsn: str, *, force: bool
) -> Restored:
    """Check the backup at `source`, then put it into `workspace` (blocking: a worker
    thread's job). Every refusal is a `ChatmemError` line, with nothing changed."""
    manifest = read_manifest(source)
    if manifest.backend != backend:
        raise BackupRefused(
            f"the backup is of a {manifest.backend} workspace and this one is configured for"
            f" {backend}: set storage.backend = '{manifest.backend}' to restore it (then"
            " `chatmem migrate` moves it)"
        )
    verify(source, manifest)
    root = workspace.root
    _refuse_running(workspace)
    occupied = root.exists() and any(root.iterdir())
    database = None
    served = dialect_for(backend).is_server
    if served:
        from memory_core.storage.pg import dump

        database = dump.used(postgres_dsn)
    if not force and (occupied or database):
        what = f"workspace {root} is not empty" if occupied else f"the database: {database}"
        raise BackupRefused(
            f"{what}; restore into an empty one, or give --force to replace it (the files"
            " are moved aside, not deleted; nothing was done)"
        )
    refused = writable_refusal(root, occupied, os.access, renames_out)
    if refused:
        raise BackupRefused(f"{refused} (nothing was done)")
    restored = Restored(manifest)
    if served:  # first: one transaction, so a refusal changes nothing
        from memory_core.storage.pg import dump

        tables = {t.name: t.columns for t in manifest.tables}
        restored.left_out = dump.load(
            postgres_dsn, source / POSTGRES_DIR, tables, manifest.migrations
        )
        restored.rows = sum(t.rows for t in manifest.tables)
    if occupied:
        restored.moved_aside = _move_aside(root)
    prefix = f"{FILES_DIR}/"
    try:
        root.mkdir(parents=True, exist_ok=True)
        for relative in sorted(manifest.files):
            if relative.startswith(prefix):
                copy_file(source / relative, root / relative.removeprefix(prefix))
                restored.files += 1
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise BackupRefused(
            f"restore stopped: cannot write{where}: {describe(exc)} (the backup is intact:"
            " make room and run it again with --force)"
        ) from exc
    return restored


def _refuse_running(workspace: Workspace) -> None:
    """A process that holds its journal owner's lock still uses the workspace."""
    owners_dir = workspace.state_dir / "owners"
    if not owners_dir.is_dir():
        return
    owners = FileOwners(owners_dir)
    for lock in owners_dir.glob("*.lock"):
        if not owners.is_gone(lock.stem):
            raise BackupRefused(
                f"a chatmem process is using workspace {workspace.root}: stop the bots first"
                " (nothing was done)"
            )


def renames_out(root: Path) -> bool:
    """Whether an entry of `root` can be renamed into its parent directory: not when
    `root` is a mount point (a container's volume, a bind mount), whatever the devices'
    numbers say. Tried with an empty file of its own, removed again."""
    probe = root / f".chatmem-restore-probe-{os.getpid()}"
    out = root.parent / f".{root.name}.restore-probe-{os.getpid()}"
    try:
        probe.touch()
    except OSError:
        return False
    try:
        os.rename(probe, out)
    except OSError:
        probe.unlink(missing_ok=True)
        return False
    out.unlink(missing_ok=True)
    return True


def writable_refusal(
    root: Path,
    occupied: bool,
    access: Callable[[Path, int], bool],
    renames: Callable[[Path], bool],
) -> str | None:
    """Why the restore could not put its files in place (or move the present ones
    aside), found before anything changes: the database is loaded first, so a failure
    after it would leave the files and the rows of two different times."""
    if occupied:
        for place in (root, root.parent):
            if not access(place, os.W_OK):
                return f"cannot move the files of workspace {root} aside: {place} is not writable"
        if not renames(root):
            return (
                f"workspace {root} is a mount point, so its files cannot be moved aside"
                " beside it: empty it yourself (keep a copy), then restore without --force"
            )
        return None
    target = root if root.exists() else next(p for p in root.parents if p.exists())
    if not access(target, os.W_OK):
        return f"cannot restore into workspace {root}: {target} is not writable"
    return None


def _move_aside(root: Path) -> Path:
    """The workspace's current contents, moved into a folder beside it (same file
    system: renames)."""
    aside = root.with_name(f"{root.name}.before-restore-{int(epoch_seconds())}")
    aside.mkdir()
    for entry in sorted(os.listdir(root)):
        try:
            os.rename(root / entry, aside / entry)
        except OSError as exc:
            moved = f"what was moved is in {aside}" if any(aside.iterdir()) else "nothing moved"
            raise BackupRefused(
                f"cannot move {root / entry} aside: {describe(exc)} ({moved})"
            ) from exc
    return aside
