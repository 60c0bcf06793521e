"""`chatmem backup DEST` and `chatmem restore DIR|ID`: a consistent copy of a running
workspace, and putting one back (memory_core/backup/). `restore` with an entry id
brings back an archived or forgotten entry, as before: an argument that is a path (it
holds a `/`, or names a directory) is a backup."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.cli import EXIT_PROBLEMS, Output, command
from adapters.cli.curate import ID_HELP, RestoreEntry
from memory_core.base.errors import ChatmemError
from memory_core.base.wording import counted

if TYPE_CHECKING:
    from memory_core.config import Config
    from memory_core.engine import MemoryCore


@command(
    "backup",
    "copy the workspace (files, databases, journal) to DEST while bots run, with a manifest",
    own_scope="it copies every scope",
    interrupted="nothing was kept in DEST",
)
class Backup:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("dest", metavar="DEST", help="a new or empty directory")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        dest = absolute(args.dest)
        manifest = await core.backup(dest)
        rows = sum(t.rows for t in manifest.tables)
        data = {
            "dest": str(dest),
            "backend": manifest.backend,
            "files": len(manifest.files),
            "rows": rows,
            "created_at": manifest.created_at,
        }
        what = counted(len(manifest.files), "file")
        if manifest.tables:
            what += f" and {counted(rows, 'database row')}"
        Output(args.json).emit(
            data,
            f"backed up {what} to {dest} (restore: chatmem restore {dest})",
        )
        return 0


def absolute(value: str) -> Path:
    return Path(value).expanduser().absolute()


def is_backup_path(value: str) -> bool:
    """A path (it holds a separator, or names a directory), not an entry id."""
    return "/" in value or os.sep in value or Path(value).expanduser().is_dir()


@command(
    "restore",
    "restore a backup made by `chatmem backup` (restore DIR [--force]), or move an archived"
    " or forgotten entry back to Active (restore ID)",
    opens_core=False,
)
class Restore:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "id",
            metavar="DIR|ID",
            help=f"a backup directory, or an {ID_HELP}",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="restore a backup into a workspace (or database) that is not empty: its"
            " files are moved aside into WORKSPACE.before-restore-TIME",
        )

    @staticmethod
    async def run(config: Config, args: argparse.Namespace) -> int:
        import asyncio

        from adapters.cli import running

        backup = await asyncio.to_thread(is_backup_path, args.id)
        if args.force and not backup:
            raise ChatmemError("--force is for restoring a backup directory, not an entry")
        running.announce_workspace(config, args)  # which workspace it restores into
        if not backup:
            return await running.run_core(config, RestoreEntry.run, args)
        return await _restore_backup(config, args)


async def _restore_backup(config: Config, args: argparse.Namespace) -> int:

    from memory_core.base.workspace import Workspace
    from memory_core.engine import MemoryCore

    if not args.scope_key.is_main:
        raise ChatmemError("`chatmem restore DIR` does not take --scope: it restores every scope")
    workspace = Workspace.at(config.workspace_path)
    restored = await MemoryCore.restore_backup(config, absolute(args.id), force=args.force)
    # Open it as every command will: the journal's captures are written to MEMORY.md,
    # the index is brought in line with the files; then validate.
    async with MemoryCore.open(config) as core:
        problems = await core.memories.validate()
    data = {
        "workspace": str(workspace.root),
        "files": restored.files,
        "rows": restored.rows,
        "moved_aside": str(restored.moved_aside) if restored.moved_aside else None,
        "left_out": restored.left_out,
        "backup_created_at": restored.manifest.created_at,
        "valid": not problems,
        "problems": [f"{p.path}:{p.block.line}: {p.block.reason}" for p in problems],
    }
    lines = [
        f"restored {counted(restored.files, 'file')}"
        + (f" and {counted(restored.rows, 'database row')}" if restored.rows else "")
        + f" from the backup of {restored.manifest.created_at} into {workspace.root}"
    ]
    if restored.moved_aside:
        lines.append(f"the workspace's previous files are in {restored.moved_aside}")
    if restored.left_out:
        lines.append(f"left out (made again): {', '.join(restored.left_out)}")
    lines.append(
        "all memory files are valid"
        if not problems
        else f"{counted(len(problems), 'quarantined block')}: run chatmem validate"
    )
    Output(args.json).emit(data, "\n".join(lines))
    return 0 if not problems else EXIT_PROBLEMS
