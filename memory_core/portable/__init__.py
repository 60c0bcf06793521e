"""`chatmem export` and `chatmem import`: a workspace's memories out, and in again.

The export is JSON lines (`records.py`: a versioned header, then one record a line, each
with its `kind` and `scope`), or a Markdown tree laid out as a workspace for people to
read; both are made a scope at a time and written as they are made (`stream.py`), never
held whole. An import reads chatmem's own export, a workspace-like directory of another
tool (`MEMORY.md` + `memory/YYYY-MM-DD.md`) or a mem0 export (`foreign.py`), checks the
whole source first (a bad record refuses it all, nothing written; an export file is
read twice for that, a scope at a time the second time), then writes each record into
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
from memory_core.base.scope import ScopeKey, printable_key
from memory_core.base.workspace import Workspace
from memory_core.portable.export import (
    PortableCore,
    chosen_scopes,
    markdown_files,
    scope_records,
    written_keys,
)
from memory_core.portable.foreign import (
    detect,
    mem0_records,
    read_mem0,
    workspace_records,
)
from memory_core.portable.importer import (
    ImportingCore,
    ImportReport,
    ImportSource,
    InMemorySource,
    import_source,
)
from memory_core.portable.records import (
    ExportRefused,
    ImportRefused,
    Record,
    header,
    line,
)
from memory_core.portable.stream import Plan, StagedFile, scan, scope_records_of

__all__ = [
    "ExportRefused",
    "ImportRefused",
    "ImportReport",
    "export_file",
    "export_lines",
    "export_markdown",
    "import_from",
]

BATCH_BYTES = 1 << 20
"""How much of an export file is written at once (one worker-thread call)."""


def chatmem_version() -> str:
    try:
        return metadata.version("chatmem-memory")
    except metadata.PackageNotFoundError:
        from memory_core import __version__

        return __version__


async def export_lines(
    core: PortableCore, wanted: Sequence[ScopeKey], now: datetime
) -> AsyncIterator[str]:
    """The export as JSON lines, header first, a line as each record is read."""
    scopes = await chosen_scopes(core, wanted)
    keys = written_keys(scopes)
    head = header(chatmem_version(), [ScopeKey(keys[s]) for s in scopes], now)
    renamed = {keys[s]: printable_key(s) for s in scopes if keys[s] != s.value}
    if renamed:
        head["renamed"] = renamed  # for people: the stored keys, as they can be shown
    yield json.dumps(head, ensure_ascii=False)
    for scope in scopes:
        async for record in scope_records(core, scope):
            yield line(record, keys[scope])


async def export_file(
    core: PortableCore, wanted: Sequence[ScopeKey], out: Path, now: datetime
) -> int:
    """The export written to `out` as it is read (temp file, renamed over `out` once
    whole); its record count."""
    staged = await asyncio.to_thread(StagedFile, out)
    count = -1
    batch: list[bytes] = []
    size = 0
    try:
        async for text in export_lines(core, wanted, now):
            data = (text + "\n").encode("utf-8")
            batch.append(data)
            size += len(data)
            count += 1
            if size >= BATCH_BYTES:
                await asyncio.to_thread(staged.write, b"".join(batch))
                batch, size = [], 0
        await asyncio.to_thread(staged.write, b"".join(batch))
        await asyncio.to_thread(staged.commit)
    except BaseException:
        await asyncio.to_thread(staged.abort)
        raise
    return count


async def export_markdown(core: PortableCore, wanted: Sequence[ScopeKey], out: Path) -> list[Path]:
    """The export as a Markdown tree in `out` (a new or empty folder): each scope's
    long-term file as it stands, its daily notes, snapshot, one transcript per session
    and its audit, where a workspace keeps them."""
    scopes = await chosen_scopes(core, wanted)
    await asyncio.to_thread(_empty_folder, out)
    layout = Workspace.at(out)
    written: list[Path] = []
    for scope in scopes:  # one scope's files in memory at a time
        files = markdown_files([r async for r in scope_records(core, scope)], out)
        text = await core.long_term_text(scope)
        if text:
            files[layout.long_term_path(scope)] = text
        if not scope.is_main:
            files[layout.memory_dir(scope) / ".scope"] = scope.value + "\n"
        await asyncio.to_thread(_write_files, out, files)
        written.extend(files)
    return sorted(written)


def _write_files(out: Path, files: dict[Path, str]) -> None:
    for path, text in files.items():
        safe_files.make_dirs(out, path.parent)
        atomic_write_text(path, text, root=out)


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
    read, form = await asyncio.to_thread(_read, source, scopes, now)
    return form, await import_source(core, read)


class _ExportFile:
    """An export file as an import source: checked whole already (`scan`), each scope's
    records read when the import comes to it."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.scopes = list(plan.runs)
        self.kinds = frozenset(plan.kinds)

    async def records(self, scope: ScopeKey) -> list[Record]:
        return await asyncio.to_thread(scope_records_of, self.plan, scope)


def _read(source: Path, scopes: Sequence[ScopeKey], now: datetime) -> tuple[ImportSource, str]:
    if not source.exists():
        raise ImportRefused(f"no such file or folder: {source}")
    if len(scopes) > 1 and source.is_dir():
        raise ImportRefused("a folder is imported into one scope: give --scope once")
    form = detect(source, [] if source.is_dir() else _head(source))
    if form == "workspace":
        target = scopes[0] if scopes else ScopeKey.parse("main")
        return InMemorySource(workspace_records(source, target, now)), form
    if form == "chatmem":
        return _ExportFile(scan(source, scopes)), form
    if len(scopes) > 1:
        raise ImportRefused("a mem0 file of one user goes to one scope: give --scope once")
    return InMemorySource(mem0_records(read_mem0(source), scopes[0] if scopes else None, now)), form


def _head(source: Path) -> list[str]:
    head, _ = safe_files.read_head(source.parent, source, 4096)
    return [head.decode("utf-8", "replace").split("\n", 1)[0]]
