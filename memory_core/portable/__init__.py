"""`chatmem export` and `chatmem import`: a workspace's memories out, and in again.

The export is JSON lines (`records.py`: a versioned header, then one record a line, each
with its `kind` and `scope`), or a Markdown tree laid out as a workspace for people to
read. An import reads chatmem's own export, a workspace-like directory of another tool
(`MEMORY.md` + `memory/YYYY-MM-DD.md`) or a mem0 export (`foreign.py`), checks the whole
source first (a bad record refuses it all, nothing written), then writes each record into
its own scope through the core's parts (`importer.py`). Reached through
`MemoryCore.export_lines`, `export_markdown` and `import_from`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.portable.export import (
    PortableCore,
    chosen_scopes,
    export_records,
    markdown_files,
)
from memory_core.portable.foreign import (
    detect,
    mem0_records,
    read_mem0,
    workspace_records,
)
from memory_core.portable.importer import ImportingCore, ImportReport, import_records
from memory_core.portable.records import (
    ExportRefused,
    ImportRefused,
    Record,
    header,
    line,
    read_lines,
)

__all__ = [
    "ExportRefused",
    "ImportRefused",
    "ImportReport",
    "export_file",
    "export_lines",
    "export_markdown",
    "import_from",
]

EXPORT_BYTES = 1 << 34
"""The largest export file an import reads (16 GiB)."""


def chatmem_version() -> str:
    try:
        return metadata.version("chatmem-memory")
    except metadata.PackageNotFoundError:
        from memory_core import __version__

        return __version__


async def export_lines(
    core: PortableCore, wanted: Sequence[ScopeKey], now: datetime
) -> AsyncIterator[str]:
    """The export as JSON lines, header first."""
    scopes = await chosen_scopes(core, wanted)
    yield json.dumps(header(chatmem_version(), scopes, now), ensure_ascii=False)
    async for record in export_records(core, scopes):
        yield line(record)


async def export_file(
    core: PortableCore, wanted: Sequence[ScopeKey], out: Path, now: datetime
) -> int:
    """The export written to `out` at once (temp file and rename); its record count."""
    lines = [text async for text in export_lines(core, wanted, now)]
    parent = out.parent
    await asyncio.to_thread(
        atomic_write_text, out, "\n".join(lines) + "\n", root=parent if parent.is_dir() else out
    )
    return len(lines) - 1


async def export_markdown(core: PortableCore, wanted: Sequence[ScopeKey], out: Path) -> list[Path]:
    """The export as a Markdown tree in `out` (a new or empty folder): each scope's
    long-term file as it stands, its daily notes, snapshot, one transcript per session
    and its audit, where a workspace keeps them."""
    scopes = await chosen_scopes(core, wanted)
    await asyncio.to_thread(_empty_folder, out)
    records = [r async for r in export_records(core, scopes)]
    files = markdown_files(records, out)
    layout = Workspace.at(out)
    for scope in scopes:
        text = await core.long_term_text(scope)
        if text:
            files[layout.long_term_path(scope)] = text
        if not scope.is_main:
            files[layout.memory_dir(scope) / ".scope"] = scope.value + "\n"

    def write() -> None:
        for path, text in files.items():
            safe_files.make_dirs(out, path.parent)
            atomic_write_text(path, text, root=out)

    await asyncio.to_thread(write)
    return sorted(files)


def _empty_folder(out: Path) -> None:
    if out.exists() and (not out.is_dir() or safe_files.entries(out, out)):
        raise ExportRefused(f"{out} exists and is not an empty folder: nothing was written")
    safe_files.make_dirs(out, out)


async def import_from(
    core: ImportingCore, source: Path, scopes: Sequence[ScopeKey], now: datetime
) -> tuple[str, ImportReport]:
    """Import `source` (its form told from its content), checked whole before the first
    write. `scopes`: for an export, the scopes to take from it; for a directory, the one
    scope it goes to (main by default); for mem0, the scope of its one user."""
    records, only, form = await asyncio.to_thread(_read, source, scopes, now)
    return form, await import_records(core, records, only)


def _read(
    source: Path, scopes: Sequence[ScopeKey], now: datetime
) -> tuple[list[Record], Sequence[ScopeKey], str]:
    if not source.exists():
        raise ImportRefused(f"no such file or folder: {source}")
    if len(scopes) > 1 and source.is_dir():
        raise ImportRefused("a folder is imported into one scope: give --scope once")
    form = detect(source, [] if source.is_dir() else _head(source))
    if form == "workspace":
        target = scopes[0] if scopes else ScopeKey.parse("main")
        return workspace_records(source, target, now), (), form
    if form == "chatmem":
        text = safe_files.read_text(source.parent, source, EXPORT_BYTES)
        return list(read_lines(text.splitlines())), scopes, form
    if len(scopes) > 1:
        raise ImportRefused("a mem0 file of one user goes to one scope: give --scope once")
    return mem0_records(read_mem0(source), scopes[0] if scopes else None, now), (), form


def _head(source: Path) -> list[str]:
    head, _ = safe_files.read_head(source.parent, source, 4096)
    return [head.decode("utf-8", "replace").split("\n", 1)[0]]
