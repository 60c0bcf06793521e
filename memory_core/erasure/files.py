"""An erasure's file work: blocking, run off the event loop by `erasure`.

Every path goes through the workspace's boundary (`safe_files`): links are never
followed out, a refused file is left as it is and reported. A file is rewritten
atomically (temp file, fsync, rename) or unlinked; nothing is moved aside, since the
point is that the text is gone.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_bytes
from memory_core.base.errors import FileRefused
from memory_core.base.scope import ScopeKey, scope_slug
from memory_core.base.workspace import MAIN_LONG_TERM, Workspace
from memory_core.erasure.people import Traces, kept_lines
from memory_core.longterm import parse_cache
from memory_core.storage.spool_records import QUARANTINE_DIR

MERGED_DIR = "merged"
"""Under `.chatmem/`: what `scopes --merge` set aside of a merged scope's directory."""

NOT_SCRUBBED = frozenset({"LONG_TERM.md", "LONG_TERM.md.bak", "SNAPSHOT.md", ".scope"})
"""A group's files an erasure does not rewrite line by line: the long-term file and its
backup are rewritten entry by entry, the snapshot is built again."""


REPLY_TYPES = frozenset({"output", "action", "result", "error"})
"""Event types that answer the input before them (a decision names only an entry id)."""


@dataclass
class FilesErased:
    files: list[str] = field(default_factory=list)
    """Workspace-relative paths removed, or (a group's) rewritten."""
    parts: int = 0
    """Notes, archive lines and log records dropped from a group's files."""
    refused: list[str] = field(default_factory=list)
    """Files the boundary refused (a link out, a FIFO): left as they are."""


def scope_files(workspace: Workspace, scope: ScopeKey) -> list[Path]:
    """Every file the scope owns (its folder's, and its own in `.chatmem/`): what an
    erasure of the whole scope removes."""
    root = workspace.root
    found: list[Path] = []
    if scope.is_main:
        for entry in safe_files.entries(root, root):
            if entry.name == MAIN_LONG_TERM or entry.name.startswith(MAIN_LONG_TERM + "."):
                found.append(Path(entry.path))
        found += _walk(root, workspace.memory_dir(scope), skip=workspace.scopes_dir)
    else:
        found += _walk(root, workspace.memory_dir(scope))
    slug = scope_slug(scope)
    state = workspace.state_dir
    found += [
        p for p in (state / "forgotten" / f"{slug}.md", state / "scope-keys" / slug) if p.is_file()
    ]
    cache = parse_cache.files_for(workspace, scope)
    found += [p for p in cache.all() if p.is_file()]
    for entry in safe_files.entries(root, state / MERGED_DIR):
        if entry.name == slug or entry.name.startswith(f"{slug}."):
            path = Path(entry.path)
            found += _walk(root, path) if entry.is_dir(follow_symlinks=False) else [path]
    return sorted(set(found))


def remove_scope_files(workspace: Workspace, scope: ScopeKey) -> FilesErased:
    """Unlink every file `scope_files` lists, then the scope's emptied folders."""
    report = FilesErased()
    for path in scope_files(workspace, scope):
        try:
            safe_files.check_file(workspace.root, path)
        except FileRefused:
            report.refused.append(workspace.relative(path))
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        report.files.append(workspace.relative(path))
    if not scope.is_main:
        _remove_empty_dirs(workspace.root, workspace.memory_dir(scope))
    for entry in safe_files.entries(workspace.root, workspace.state_dir / MERGED_DIR):
        slug = scope_slug(scope)
        if entry.name == slug or entry.name.startswith(f"{slug}."):
            _remove_empty_dirs(workspace.root, Path(entry.path))
    return report


def scrub_group_files(
    workspace: Workspace, scope: ScopeKey, traces: Traces, *, write: bool = True
) -> FilesErased:
    """A group's notes, archives, summaries and event logs without the person's parts
    (`people.kept_lines`, `kept_records`); any other file of the folder that names
    them (the consolidation's progress) is removed: it is made again. With `write`
    false, only what would change is reported."""
    report = FilesErased()
    root = workspace.root
    directory = workspace.memory_dir(scope)
    for path in _walk(root, directory):
        relative = path.relative_to(directory).as_posix()
        if relative in NOT_SCRUBBED:
            continue
        try:
            raw = safe_files.read_bytes(root, path, safe_files.NOTE_BYTES)
        except FileRefused:
            report.refused.append(workspace.relative(path))
            continue
        text = raw.decode("utf-8", errors="replace")
        if path.suffix == ".md":
            kept, dropped = kept_lines(text, traces)
        elif path.suffix == ".jsonl":
            kept, dropped = kept_records(text, traces)
        elif traces.found_in(text):
            if write:
                path.unlink()
            report.files.append(workspace.relative(path))
            continue
        else:
            continue
        if dropped:
            if write:
                atomic_write_bytes(path, kept.encode("utf-8"), root=root)
            report.files.append(workspace.relative(path))
            report.parts += dropped
    return report


def kept_records(text: str, traces: Traces) -> tuple[str, int]:
    """An event log without the person's records: their inputs (by id, or by speaker
    where the record kept no id), any record that names them or holds their text, and
    what followed one of their inputs in its session (the reply, the tool calls:
    `REPLY_TYPES`) up to the next input."""
    kept: list[str] = []
    dropped = 0
    following: set[str] = set()
    for line in text.splitlines(keepends=True):
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if traces.found_in(line):
                dropped += 1
            else:
                kept.append(line)
            continue
        session = str(record.get("session"))
        if record.get("type") == "input":
            following.discard(session)
        speaker_id = record.get("speaker_id")
        if isinstance(speaker_id, str) and speaker_id:
            # Who said it is known by id: their name in the record is no sign.
            said = {k: v for k, v in record.items() if k not in ("speaker", "speaker_id")}
            theirs = traces.spoke(None, speaker_id) or traces.found_in(
                json.dumps(said, ensure_ascii=False)
            )
        else:
            theirs = (
                traces.spoke(str(record.get("speaker", "")))
                or traces.found_in(json.dumps(record, ensure_ascii=False))
                or traces.found_in(line)
            )
        if theirs and record.get("type") == "input":
            following.add(session)
        if theirs or (session in following and record.get("type") in REPLY_TYPES):
            dropped += 1
            continue
        kept.append(line)
    return "".join(kept), dropped


def scrub_spools(spool_dir: Path, scope: ScopeKey, traces: Traces | None, *, root: Path) -> int:
    """Records of dead processes' spools (PostgreSQL's outage spools of messages and of
    audit rows, replayed by the next process; and the records set aside as malformed,
    `storage/spool_records.py`) that hold the scope's messages or audit rows: all of
    them (`traces` None: the whole scope), or the person's. A live process's spool is
    left to it."""
    dropped = 0
    folders = [spool_dir, spool_dir / "audit"]
    for path in [
        Path(entry.path)
        for folder in (*folders, *(f / QUARANTINE_DIR for f in folders))
        for entry in safe_files.entries(root, folder)
        if entry.name.endswith(".jsonl")
    ]:
        lock = FileLock(path.with_suffix(".lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            continue
        try:
            raw = safe_files.read_bytes(root, path, safe_files.NOTE_BYTES)
            kept = []
            set_aside = path.parent.name == QUARANTINE_DIR
            for line in raw.decode("utf-8", errors="replace").splitlines(keepends=True):
                if _spooled_by(line, scope, traces) or (set_aside and _held(line, scope, traces)):
                    dropped += 1
                else:
                    kept.append(line)
            if len(kept) < len(raw.splitlines()):
                atomic_write_bytes(path, "".join(kept).encode("utf-8"), root=root)
        except FileRefused:
            continue
        finally:
            lock.release()
    return dropped


def _spooled_by(line: str, scope: ScopeKey, traces: Traces | None) -> bool:
    """Whether a spool line is the scope's (a message or session record names its
    scope, an audit record its rows'), and with `traces`, the person's too. A line that
    is no JSON object goes when it holds the scope's key."""
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return _held(line, scope, traces)
    rows = record.get("rows")
    scopes = {str(record.get("scope"))}
    if isinstance(rows, list):
        scopes |= {str(r[1]) for r in rows if isinstance(r, list) and len(r) > 1}
    if scope.value not in scopes:
        return False
    speaker_id = record.get("speaker_id")
    if traces is not None and isinstance(speaker_id, str) and speaker_id:
        said = {k: v for k, v in record.items() if k not in ("speaker", "speaker_id")}
        return traces.spoke(None, speaker_id) or traces.found_in(
            json.dumps(said, ensure_ascii=False)
        )
    return traces is None or traces.found_in(line)


def _held(line: str, scope: ScopeKey, traces: Traces | None) -> bool:
    """A line read as text: the scope's key in it, and with `traces`, the person's."""
    return scope.value in line and (traces is None or traces.found_in(line))


def _walk(root: Path, directory: Path, skip: Path | None = None) -> Iterator[Path]:
    """Files under `directory` (not under `skip`), links to folders not followed."""
    for entry in safe_files.entries(root, directory):
        path = Path(entry.path)
        if path == skip:
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(root, path, skip)
        else:
            yield path


def _remove_empty_dirs(root: Path, directory: Path) -> None:
    for entry in safe_files.entries(root, directory):
        if entry.is_dir(follow_symlinks=False):
            _remove_empty_dirs(root, Path(entry.path))
    with contextlib.suppress(OSError):
        directory.rmdir()
