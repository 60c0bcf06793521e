"""Reading a scope's files into chunks and tokens (blocking: run in worker threads)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, tzinfo
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.clock import epoch_ns
from memory_core.base.errors import FileRefused
from memory_core.base.scope import ScopeKey
from memory_core.base.text import tokenize
from memory_core.base.turn_dates import mentioned_days
from memory_core.base.workspace import Workspace
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.recall.chunking import (
    chunk_file,
    chunk_long_term,
    classify,
    classify_name,
    search_text,
)
from memory_core.recall.index.model import PreparedFile
from memory_core.recall.index.summaries import FolderSeen, LongTermSeen
from memory_core.storage.summary_format import stamp_part

DATED_KINDS = frozenset({ChunkKind.MESSAGE, ChunkKind.ARCHIVE_RAW, ChunkKind.DAILY})
"""Chunks written on the day they speak from (a turn, a day's note): their "yesterday" is
resolved against their own date. A long-term entry's date is when it was saved, and a
summary's the start of its period; neither is the day its words are relative to."""


def scope_files(workspace: Workspace, scope: ScopeKey) -> list[Path]:
    """Every file of the scope that the index covers (blocking: directory listing). A
    file or folder the workspace boundary refuses is left out, with one warning."""
    return _scope_files(workspace, scope, None)[0]


def scope_files_seen(workspace: Workspace, scope: ScopeKey) -> tuple[list[Path], FolderSeen, bool]:
    """`scope_files`, the scope folder as its summary sees it (stamped before it is
    listed, its daily files counted in the same listing), and whether the scope has a
    long-term file."""
    read_at = epoch_ns()
    names: list[str] = []
    files, (part, mtime), long_term = _scope_files(workspace, scope, names)
    return files, FolderSeen.of(part, mtime, read_at, names), long_term


def scope_folder_seen(workspace: Workspace, scope: ScopeKey) -> FolderSeen:
    """The scope folder as its summary sees it (blocking: a stat, then a listing of
    names alone)."""
    read_at = epoch_ns()
    folder = workspace.memory_dir(scope)
    part, mtime = stamp_part(str(folder))
    names = [entry.name for entry in safe_files.entries(workspace.root, folder)]
    return FolderSeen.of(part, mtime, read_at, names)


def _scope_files(
    workspace: Workspace, scope: ScopeKey, names: list[str] | None
) -> tuple[list[Path], tuple[str, int], bool]:
    """`scope_files`, the scope folder's `stamp_part` and whether the long-term file is
    listed; with `names`, the folder is stat'ed before it is listed and its entries'
    names added to `names` (else its stamp is left untaken: ("-", 0))."""
    out: list[Path] = []
    long_term = workspace.long_term_path(scope)
    has_long_term = _regular(workspace, long_term)
    if has_long_term:
        out.append(long_term)
    directory = workspace.memory_dir(scope)
    stamp = stamp_part(str(directory)) if names is not None else ("-", 0)
    for sub in (directory, directory / "summary"):
        entries = safe_files.entries(workspace.root, sub)
        if names is not None and sub is directory:
            names.extend(entry.name for entry in entries)
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and entry.name.endswith(".md"):
                path = Path(entry.path)
                # A scope's LONG_TERM.md sits in its own directory: list it once; a file
                # the index does not hold (SNAPSHOT.md) is no file of the index at all.
                if path != long_term and classify(workspace.relative(path)) is not None:
                    out.append(path)
    return out, stamp, has_long_term


def prepare_file(
    workspace: Workspace, path: Path, zone: tzinfo = UTC, archive_below: float | None = None
) -> PreparedFile | None:
    """Read + chunk + tokenize one file (blocking, CPU): run it in a worker thread. With
    `archive_below` (the long-term store's), a long-term file read as its store reads it
    (all UTF-8) also gives what its scope's summary needs (`PreparedFile.summary`)."""
    relative = workspace.relative(path)
    classified = classify(relative)
    if classified is None:
        return None
    summarized = archive_below is not None and classified[0] is ChunkKind.LONG_TERM
    if summarized:
        read_at = epoch_ns()  # before the stamp's stat, which comes before the read
        part, mtime = stamp_part(str(path))
    try:
        st = safe_files.file_stat(workspace.root, path)
        if st is None:
            return None
        data = safe_files.read_bytes(workspace.root, path, safe_files.LONG_TERM_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileRefused as exc:
        safe_files.warn_once(exc)
        return None  # as if it were not there: nothing of it is indexed
    summary = None
    if summarized and archive_below is not None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # the store quarantines such blocks: its listing reads it
            text = data.decode("utf-8", errors="replace")
            chunks = chunk_file(relative, text, zone)
        else:
            parsed = parse_memory(text, archive_below=archive_below)
            chunks = chunk_long_term(text, parsed)
            summary = LongTermSeen.of(part, mtime, read_at, parsed)
    else:
        text = data.decode("utf-8", errors="replace")
        chunks = chunk_file(relative, text, zone)
    return PreparedFile(
        path=relative,
        mtime_ns=st.st_mtime_ns,
        # The size of what was read: a note appended between the stat and the read then
        # leaves a (time, size) pair no later stat matches, so nothing trusts it.
        size=len(data),
        hash=hashlib.blake2b(data, digest_size=16).hexdigest(),
        kind=classified[0],
        chunks=[prepare_chunk(c, classified[0], zone) for c in chunks],
        summary=summary,
    )


def prepare_chunk(chunk: Chunk, kind: ChunkKind, zone: tzinfo) -> tuple[Chunk, str]:
    """A chunk's index fields, computed off the event loop: its tokens and, for a dated
    kind, the days its text speaks of (local dates in `zone`, the workspace's)."""
    text = search_text(chunk)
    if kind in DATED_KINDS and chunk.created_at is not None:
        chunk = replace(chunk, dates=mentioned_days(text, chunk.created_at, zone))
    return chunk, " ".join(tokenize(text))


def tokenize_chunks(chunks: Sequence[Chunk]) -> list[tuple[Chunk, str]]:
    return [(chunk, " ".join(tokenize(search_text(chunk)))) for chunk in chunks]


def stat_files(workspace: Workspace, scope: ScopeKey) -> dict[str, tuple[int, int]]:
    """Workspace-relative path → (mtime_ns, size) of every file of the scope the index
    covers (blocking): `scope_files` and a stat each, in strings and directory entries
    (a scope of 100 000 daily files is listed in a fraction of a second; `Path`
    objects for each would cost more than the stats)."""
    out: dict[str, tuple[int, int]] = {}
    long_term = workspace.long_term_path(scope)
    try:
        st = os.stat(safe_files.inside(workspace.root, long_term))
    except FileNotFoundError:
        pass
    except FileRefused as exc:
        safe_files.warn_once(exc)
    else:
        if stat.S_ISREG(st.st_mode):
            out[workspace.relative(long_term)] = (st.st_mtime_ns, st.st_size)
    skip = str(long_term)
    directory = workspace.memory_dir(scope)
    for sub, in_summary in ((directory, False), (directory / "summary", True)):
        prefix = workspace.relative(sub) + "/"
        for entry in safe_files.entries(workspace.root, sub):
            name = entry.name
            if not name.endswith(".md") or entry.path == skip:
                continue
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                if classify_name(name, in_summary=in_summary) is None:
                    continue
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            out[prefix + name] = (st.st_mtime_ns, st.st_size)
    return out


def _regular(workspace: Workspace, path: Path) -> bool:
    """Whether `path` is a regular file inside the workspace (a refusal warns once)."""
    try:
        return safe_files.check_file(workspace.root, path).is_file()
    except FileRefused as exc:
        safe_files.warn_once(exc)
        return False
