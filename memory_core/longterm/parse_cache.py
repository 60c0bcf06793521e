"""A large long-term file's parse kept on disk, so that a new process does not parse it again.

Parsing MEMORY.md costs about 20 us an entry, and matching a capture needs every entry's
normalised text and often its skeleton (as much again): seconds for 114 000 entries,
paid by every process that opens the workspace (a bot's restart, every command) before
its first capture, search or status. So each parse and each write of a file of at least
`MIN_BYTES` leaves its result in `.chatmem/parsed/`, in two files per scope:

* `<slug>.marshal`, the parse: every entry as plain values with its block's key
  (`memory_md.block_key`), its normalised text and its skeleton (what matching a capture
  needs of it: `matching`, `fact_keys`), the quarantined blocks, where each entry
  stands, and a hash of the bytes it was parsed from;
* `<slug>.stamp`, what vouches for it: the file's stamp (mtime, size, inode), that hash,
  and when the file was known to hold those bytes (`known_ns`: the read or the write).

A reader trusts them exactly as `store.py` trusts its in-memory parse: an equal stamp
vouches for the bytes unless it was recorded within `RACY_NS` of the file's mtime; then,
and whenever the stamp differs, the file is read and hashed. If only its stamp changed (a
copy, a restore, a racy record) the parse still serves and the small stamp file is written
again; if the file did change (a person's edit, another program), it is parsed with the
cached entries looked up by block key, so only the blocks that changed are parsed.

The cache is an optimisation and never the truth: a missing, torn, foreign or older-format
cache is ignored and the file parsed; it is written without fsync, since a torn one
costs a parse and nothing else. `marshal` holds plain values only (no code runs on load,
unlike pickle). A cache made by other code (`file_format`: a hash of the sources of the
parser, the entry, the matching and the entity rules) is someone else's and ignored.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import marshal
import os
import sys
import tempfile
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_core.base import clock, safe_files
from memory_core.base import entries as entries_module
from memory_core.base.entries import (
    ArchiveReason,
    EntryFields,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    build_entry,
)
from memory_core.base.errors import FileRefused
from memory_core.base.process_knobs import gc_paused
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.longterm import (
    entities,
    entity_tracker,
    fact_keys,
    matching,
    memory_md,
    memory_md_parser,
    values,
)
from memory_core.longterm.entities import EntityKind, Named
from memory_core.longterm.fact_keys import known_skeleton, remember_skeletons, skeleton
from memory_core.longterm.matching import SKELETON_MAX, normalize_content, remember_norms
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory

log = logging.getLogger(__name__)

VERSION = 5
"""2: an entry's row ends with its `speaker` and `claim_on` (group scopes); 3: skeletons
made of the values' one writing; 4: then its `speaker_id`; 5: a delta file beside the
data file (`parse_delta.py`), and the entities file."""
_PRODUCERS = (
    memory_md,
    memory_md_parser,
    entries_module,
    clock,
    matching,
    fact_keys,
    values,
    entities,
    entity_tracker,
)
"""The modules whose code decides what the cache holds: the parse, the normalised text,
the skeleton (with the values' one writing) and the entities named."""


@functools.cache
def file_format() -> tuple[str, int, int, tuple[int, ...], str, str]:
    """Written first and compared first: another version of this format, of marshal, of
    Python, of its Unicode tables or of the code that made the values (a hash of its
    modules' sources, read at the first use of a cache, not at import) makes the cache
    someone else's. So a release that parses differently never reads an older parse."""
    code = hashlib.blake2b(digest_size=16)
    for module in _PRODUCERS:
        try:
            code.update(Path(module.__file__ or "").read_bytes())
        except OSError:
            code.update(module.__name__.encode())  # no source to read: the name alone
    return (
        "chatmem-parse",
        VERSION,
        marshal.version,
        sys.version_info[:2],
        unicodedata.unidata_version,
        code.hexdigest(),
    )


MIN_BYTES = 1 << 20
"""Files smaller than this (about 2 000 entries, parsed in tens of milliseconds) get no
cache: writing it would cost more than it saves."""

Stamp = tuple[int, int, int]

_ARCHIVE_REASONS = {reason.value: reason for reason in ArchiveReason}
_CLASSES = {kind.value: kind for kind in MemoryClass}
_GRANULARITIES = {kind.value: kind for kind in Granularity}
_IMPORTANCES = {kind.value: kind for kind in Importance}
Moment = tuple[int, int, int, int, int, int, int]


def _moment(when: datetime) -> Moment:
    """A UTC time as plain ints (`isoformat` costs several times more)."""
    return (
        when.year,
        when.month,
        when.day,
        when.hour,
        when.minute,
        when.second,
        when.microsecond,
    )


def _when(moment: Moment) -> datetime:
    return datetime(*moment, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class CacheFiles:
    """Where one scope's cached parse lives (`Workspace.parse_cache_path`)."""

    data: Path
    stamp: Path
    delta: Path
    """The versions written since `data`, by difference (`parse_delta.py`)."""
    entities: Path
    """The entities of the current version (`entity_keeper.py`)."""

    def all(self) -> tuple[Path, ...]:
        """Every file, the stamp first (removed first, it vouches for the others)."""
        return (self.stamp, self.delta, self.entities, self.data)


def files_for(workspace: Workspace, scope: ScopeKey) -> CacheFiles:
    """The cache files of a scope's long-term file."""
    base = workspace.parse_cache_path(scope)
    return CacheFiles(
        *(
            base.with_name(base.name + suffix)
            for suffix in (".marshal", ".stamp", ".delta", ".entities")
        )
    )


@dataclass(frozen=True, slots=True)
class Mark:
    """The stamp file: which bytes the file held, at what stamp, known when."""

    stamp: Stamp
    digest: bytes
    known_ns: int


@dataclass(slots=True)
class Base:
    """What a delta is written against (`parse_delta.py`): the data file's version, and
    each of its entries' block key and lines, in its order."""

    digest: bytes
    keys: list[bytes]
    lines: list[tuple[int, int]]
    complete: bool
    """Written by the store's writer (`encode`'s `complete`): every entry's skeleton and
    entities are in it, and every block of the file it stands for is as the renderer
    writes its entry. Only then is a delta written against it (else the whole parse,
    once), and the file's blocks reused by the next write."""
    entries: list[MemoryEntry] | None = None
    """The base's entries (the very list its parse holds, not a copy), for `contents`."""
    _positions: dict[bytes, int] | None = None
    _contents: frozenset[str] | None = None

    def positions(self) -> dict[bytes, int]:
        """Block key → place in the base (made at the first delta written against it)."""
        if self._positions is None:
            self._positions = {key: n for n, key in enumerate(self.keys)}
        return self._positions

    def contents(self) -> frozenset[str]:
        """The texts of the base's entries: an entry of one of them needs none of its
        derived values in a delta (a reader has them from the base, by text)."""
        if self._contents is None:
            self._contents = frozenset(e.content for e in self.entries or ())
        return self._contents


@dataclass(frozen=True, slots=True)
class CachedParse:
    """A parse as the cache holds it, and the hash of the bytes it was made from."""

    parsed: ParsedMemory
    digest: bytes
    archive_below: float
    keys: list[bytes]
    """Each entry's block key, in the order of `parsed.entries` (not put in
    `parsed.keys`: only the parse of a changed file asks for them)."""
    base: Base
    """The data file this parse was read from (with a delta applied, or not)."""
    pieces: Sequence[Any] | None = None
    """The delta's pieces that made this parse from `base` (`parse_delta`); None when it
    is the base's own parse."""

    def by_key(self) -> dict[bytes, MemoryEntry]:
        """Block key → entry, for the parse of a changed file."""
        return dict(zip(self.keys, self.parsed.entries, strict=True))


def _maybe_moment(when: datetime | None) -> Moment | None:
    return None if when is None else _moment(when)


def _row(entry: MemoryEntry) -> tuple[object, ...]:
    return (
        entry.id,
        entry.content,
        entry.category,
        entry.score,
        _moment(entry.created_at),
        _moment(entry.last_activated),
        _moment(entry.scored_at),
        entry.hits,
        entry.source_session,
        entry.confidence,
        _maybe_moment(entry.expires_at),
        entry.pinned,
        None if entry.archived is None else entry.archived.value,
        entry.sessions,
        None if entry.memory_class is None else entry.memory_class.value,
        None if entry.granularity is None else entry.granularity.value,
        None if entry.importance is None else entry.importance.value,
        entry.speaker,
        entry.claim_on,
        entry.speaker_id,
    )


def _plain(entry: MemoryEntry) -> bool:
    """Whether the entry's values survive the cache exactly: plain types (marshal keeps
    int and float apart, and -0.0), UTC times (given back as the same value with the same
    `UTC` object, which the renderer tests for; `fold` means nothing in UTC)."""
    times = [entry.created_at, entry.last_activated, entry.scored_at]
    if entry.expires_at is not None:
        times.append(entry.expires_at)
    return (
        type(entry.id) is str
        and type(entry.content) is str
        and type(entry.category) is str
        and type(entry.score) in _NUMBERS
        and type(entry.hits) is int
        and type(entry.pinned) is bool
        and all(type(t) is datetime and t.tzinfo is UTC for t in times)
        and type(entry.sessions) is tuple
        and all(type(s) is str for s in entry.sessions)
        and (entry.source_session is None or type(entry.source_session) is str)
        and (entry.confidence is None or type(entry.confidence) in _NUMBERS)
        and (entry.speaker is None or type(entry.speaker) is str)
        and (entry.claim_on is None or type(entry.claim_on) is str)
        and (entry.speaker_id is None or type(entry.speaker_id) is str)
    )


_NUMBERS = (int, float)


def encode(
    parsed: ParsedMemory, digest: bytes, archive_below: float, *, complete: bool = False
) -> bytes | None:
    """The data file's bytes for `parsed` (which must carry every entry's block key); None
    when an entry holds a value the cache cannot give back exactly (nothing is cached).

    Each entry's normalised text goes with it, and its skeleton and the entities it names
    when they are remembered; with `complete`, every entry's are made first (tens of
    microseconds each, once per text: a background write pays it, so that no capture or
    search has to)."""
    keys = parsed.keys
    entries = parsed.entries
    if any(e.id not in keys for e in entries) or not all(map(_plain, entries)):
        return None
    norms, known, named = derived(entries, complete)
    body = (
        file_format(),
        archive_below,
        digest,
        [keys[e.id] for e in entries],
        [_row(e) for e in entries],
        norms,
        known,
        named,
        [parsed.lines.get(e.id, (0, 0)) for e in entries],
        [(q.text, q.line, q.reason) for q in parsed.quarantined],
        complete,
    )
    return marshal.dumps(body)


def decode(data: bytes) -> CachedParse | None:
    """The parse a data file's bytes hold; None for bytes of another format or torn ones."""
    # Hundreds of thousands of new objects, none in a cycle: the collector's passes over
    # the growing heap would cost as much as making them.
    with gc_paused():
        return _decode(data)


def _decode(data: bytes) -> CachedParse | None:
    try:
        body = marshal.loads(data)
        if not isinstance(body, tuple) or len(body) != 11 or body[0] != file_format():
            return None
        (
            _,
            archive_below,
            digest,
            keys,
            rows,
            norms,
            skeletons,
            named,
            lines,
            quarantined,
            complete,
        ) = body
        entries = [_entry(row) for row in rows]
        counts = {len(keys), len(entries), len(norms), len(skeletons), len(named), len(lines)}
        if len(counts) != 1:
            return None
        parsed = ParsedMemory(
            entries=entries,
            quarantined=[QuarantinedBlock(t, n, r) for t, n, r in quarantined],
            lines={e.id: (int(a), int(b)) for e, (a, b) in zip(entries, lines, strict=True)},
        )
        remember(entries, norms, skeletons, named)
        return CachedParse(
            parsed,
            digest,
            archive_below,
            keys,
            Base(digest, keys, lines, complete=complete is True, entries=entries),
        )
    except (EOFError, ValueError, TypeError, KeyError, IndexError) as exc:
        log.info("long-term parse cache unreadable, parsing the file (%s)", exc)
        return None


def remember(
    entries: list[MemoryEntry],
    norms: list[str],
    skeletons: list[Any],
    named: list[list[tuple[str, str, tuple[str, ...], str]] | None],
) -> None:
    """What the cache kept of each entry's text, remembered as made by these very rules."""
    contents = [e.content for e in entries]
    remember_norms(contents, norms)
    remember_skeletons(contents, skeletons)
    entities.remember_named(contents, map(_named, named))


def derived(
    entries: list[MemoryEntry], complete: bool
) -> tuple[list[str], list[Any], list[list[tuple[str, str, tuple[str, ...], str]] | None]]:
    """Each entry's normalised text, skeleton and entities named, as the cache keeps them
    (`encode`'s `complete`)."""
    contents = [e.content for e in entries]
    norms = [normalize_content(c) for c in contents]
    named: list[tuple[Named, ...] | None]
    if complete:
        known = [
            skeleton(c) if len(n) <= SKELETON_MAX else None
            for c, n in zip(contents, norms, strict=True)
        ]
        named = [entities.named_in(c) for c in contents]
    else:
        known = [known_skeleton(c) for c in contents]
        named = [entities.known_named(c) for c in contents]
    plain = [None if n is None else [(a, k.value, al, r) for a, k, al, r in n] for n in named]
    return norms, known, plain


def row_of(entry: MemoryEntry) -> tuple[object, ...]:
    """An entry as the cache keeps it (`plain` entries only)."""
    return _row(entry)


def plain(entry: MemoryEntry) -> bool:
    """Whether the cache gives the entry back exactly."""
    return _plain(entry)


def entry_of(row: tuple[Any, ...]) -> MemoryEntry:
    return _entry(row)


def _named(found: list[tuple[str, str, tuple[str, ...], str]] | None) -> tuple[Named, ...] | None:
    if not found:
        return None if found is None else ()
    return tuple(
        (name, EntityKind(kind), aliases, relation) for name, kind, aliases, relation in found
    )


def _entry(row: tuple[Any, ...]) -> MemoryEntry:
    """An entry from its cached row: `EntryFields` in their order, times and enums as text."""
    (
        entry_id,
        content,
        category,
        score,
        created_at,
        last_activated,
        scored_at,
        hits,
        source_session,
        confidence,
        expires_at,
        pinned,
        archived,
        sessions,
        memory_class,
        granularity,
        importance,
        speaker,
        claim_on,
        speaker_id,
    ) = row
    fields = EntryFields.blank()
    fields.id = entry_id
    fields.content = content
    fields.category = category
    fields.score = score
    fields.created_at = _when(created_at)
    fields.last_activated = _when(last_activated)
    fields.scored_at = _when(scored_at)
    fields.hits = hits
    fields.source_session = source_session
    fields.confidence = confidence
    fields.expires_at = None if expires_at is None else _when(expires_at)
    fields.pinned = pinned
    fields.archived = None if archived is None else _ARCHIVE_REASONS[archived]
    fields.sessions = sessions
    fields.memory_class = None if memory_class is None else _CLASSES[memory_class]
    fields.granularity = None if granularity is None else _GRANULARITIES[granularity]
    fields.importance = None if importance is None else _IMPORTANCES[importance]
    fields.speaker = speaker
    fields.claim_on = claim_on
    fields.speaker_id = speaker_id
    return build_entry(fields)


def read_mark(files: CacheFiles) -> Mark | None:
    """The stamp file (blocking), None when there is none usable."""
    try:
        body = marshal.loads(read_file(files.stamp))
        if not isinstance(body, tuple) or len(body) != 4 or body[0] != file_format():
            return None
        _, stamp, digest, known_ns = body
        mtime, size, inode = stamp
        return Mark((int(mtime), int(size), int(inode)), bytes(digest), int(known_ns))
    except (OSError, EOFError, ValueError, TypeError, FileRefused) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.info("long-term parse cache stamp unreadable (%s)", exc)
        return None


def load(files: CacheFiles, archive_below: float) -> CachedParse | None:
    """The cached parse (blocking), None when there is none usable."""
    try:
        data = read_file(files.data)
    except (OSError, FileRefused):
        return None
    cached = decode(data)
    if cached is None or cached.archive_below != archive_below:
        return None
    return cached


def save_data(files: CacheFiles, data: bytes, mark: Mark) -> bool:
    """Write a whole data file (a base): the old delta, made against another base, goes
    before the stamp vouches for the new version."""
    if not write_file(files.data, data):
        return False
    with contextlib.suppress(OSError):
        files.delta.unlink()
    return save_mark(files, mark)


def save(
    files: CacheFiles,
    parsed: ParsedMemory,
    mark: Mark,
    archive_below: float,
    *,
    complete: bool = False,
) -> bool:
    """Write the parse and its stamp (blocking; `complete` as `encode`'s); False when
    they were not written. A failure is logged and harmless: the next process parses."""
    data = encode(parsed, mark.digest, archive_below, complete=complete)
    if data is None:
        forget(files)
        return False
    return save_data(files, data, mark)


def save_mark(files: CacheFiles, mark: Mark) -> bool:
    """Write only the stamp file: the cached parse still holds, under a new stamp."""
    return write_file(
        files.stamp, marshal.dumps((file_format(), mark.stamp, mark.digest, mark.known_ns))
    )


def read_file(path: Path) -> bytes:
    """A cache file, through the workspace boundary (its folder, `.chatmem/parsed/`, is
    checked when the workspace opens): no link out, no FIFO, bounded."""
    return safe_files.read_bytes(path.parent, path, 2 * safe_files.LONG_TERM_BYTES)


def write_file(path: Path, data: bytes) -> bool:
    """Temp file and rename, without fsync: a torn cache costs a parse."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        log.info("long-term parse cache not written (%s); the next process parses the file", exc)
        return False
    return True


def forget(files: CacheFiles) -> None:
    """Remove a cache that no longer describes its file (blocking): the stamp first, so a
    data file left alone vouches for nothing."""
    for path in files.all():
        with contextlib.suppress(OSError):
            path.unlink()
