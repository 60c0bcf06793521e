"""The entities of each scope's long-term file, kept beside its parse cache by difference.

Query expansion (`entities.expand_query`) wants the entities a scope's Active memories
name. Found from scratch they cost seconds at 100 000 memories (every text scanned by the
rules, then for every name), and a search process is new each time: so every version of
a large file written or first found leaves its entities in `.chatmem/parsed/<slug>.entities`,
keyed by the hash of the file's bytes, and a new process READS them (a few milliseconds)
instead of loading the parse and finding them again.

The file also holds the tracker's state (`EntityTracker.kept`: which memories hold each
name or alias, and what each memory names), so that the writer of the next version, which
has the old version's entries in hand, updates them by difference (`EntityTracker.seed`,
which reads no text, then `update`) instead of from scratch. It is a cache and never the truth: a missing, torn, foreign (another format:
the parse cache's `_format`, which hashes the entity rules' source) or older file is
ignored and the entities found again. Written without fsync, as the parse cache is.
"""

from __future__ import annotations

import logging
import marshal
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import FileRefused
from memory_core.longterm import parse_cache
from memory_core.longterm.entities import Entity, EntityKind
from memory_core.longterm.entity_tracker import EntityTracker, TrackerState
from memory_core.longterm.parse_cache import CacheFiles

log = logging.getLogger(__name__)

_TAG = "chatmem-entities-2"
"""2: the namings of each entry kept too, so that a seed reads no text."""

Rows = list[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class KeptEntities:
    """One version's entities as the file holds them."""

    digest: bytes
    entities: list[Entity]
    tracked: TrackerState
    """What a tracker takes up this version's state from (`EntityTracker.seed`)."""


def encode(
    digest: bytes, archive_below: float, found: Sequence[Entity], kept: TrackerState
) -> bytes:
    """`found` with the tracker's state `kept` (whose own entities are `found`, or none
    when the tracker left the version to `extract_entities`: then `seed` refuses it)."""
    rows: Rows = [(e.name, e.kind.value, e.aliases, e.relations, e.facts) for e in found]
    held = {word: tuple(ids) for word, ids in kept.holders.items()}
    named = dict(kept.named)
    return marshal.dumps(
        (parse_cache.file_format(), _TAG, digest, archive_below, rows, held, named)
    )


def decode(data: bytes, digest: bytes, archive_below: float) -> KeptEntities | None:
    """The entities the bytes hold for the file version `digest`; None for another
    version, another format, or torn bytes."""
    try:
        body = marshal.loads(data)
        if not isinstance(body, tuple) or len(body) != 7:
            return None
        form, tag, kept_digest, kept_below, rows, held, named = body
        if (form, tag, kept_digest, kept_below) != (
            parse_cache.file_format(),
            _TAG,
            digest,
            archive_below,
        ):
            return None
        found = [
            Entity(name, EntityKind(kind), tuple(aliases), tuple(relations), tuple(facts))
            for name, kind, aliases, relations, facts in rows
        ]
        if not isinstance(held, dict) or not isinstance(named, dict):
            return None
        return KeptEntities(digest, found, TrackerState(held, named, found))
    except (EOFError, ValueError, TypeError) as exc:
        log.info("entity cache unreadable, finding the entities again (%s)", exc)
        return None


def load(files: CacheFiles, digest: bytes, archive_below: float) -> KeptEntities | None:
    """The kept entities of the file version `digest` (blocking), None when there are none."""
    try:
        data = parse_cache.read_file(files.entities)
    except (OSError, FileRefused):
        return None
    return decode(data, digest, archive_below)


def active(entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """The entries whose entities recall expands queries with."""
    return [e for e in entries if e.archived is None]


class EntityKeeper:
    """Per scope, the entities of the last version found or written and the tracker that
    found them; shared by the store's writer (a worker thread) and the views (another),
    hence the lock. Every method blocks: callers run them in a thread."""

    def __init__(self, archive_below: float) -> None:
        self._archive_below = archive_below
        self._lock = threading.Lock()
        self._trackers: dict[str, tuple[bytes | None, EntityTracker]] = {}
        self._found: dict[str, tuple[bytes, list[Entity]]] = {}

    def read(self, scope: str, digest: bytes, files: CacheFiles | None) -> list[Entity] | None:
        """The entities of the version `digest`: remembered, or read from the file
        (nothing is found again); None when neither has them."""
        with self._lock:
            known = self._found.get(scope)
            if known is not None and known[0] == digest:
                return known[1]
        if files is None:
            return None
        kept = load(files, digest, self._archive_below)
        if kept is None:
            return None
        with self._lock:
            self._found[scope] = (digest, kept.entities)
        return kept.entities

    def find(
        self,
        scope: str,
        digest: bytes | None,
        entries: Sequence[MemoryEntry],
        files: CacheFiles | None,
    ) -> list[Entity]:
        """The entities of `entries` (the version `digest`), by difference from the last
        version this process tracked, and kept on disk for the next process."""
        with self._lock:
            tracked = self._trackers.get(scope)
            tracker = tracked[1] if tracked is not None else EntityTracker()
            found = tracker.update(active(entries))
            self._trackers[scope] = (digest, tracker)
            if digest is not None:
                self._found[scope] = (digest, found)
            kept = tracker.kept()
        if files is not None and digest is not None and _cached_version(files) == digest:
            _save(files, encode(digest, self._archive_below, found, kept))
        return found

    def written(
        self,
        scope: str,
        files: CacheFiles,
        before: Sequence[MemoryEntry],
        before_digest: bytes | None,
        after: Sequence[MemoryEntry],
        after_digest: bytes,
    ) -> None:
        """A new version was written: its entities kept beside its parse, found by
        difference from the version it replaced (from this process's tracker, else from
        that version's kept entities and its entries, which the writer holds)."""
        with self._lock:
            tracked = self._trackers.get(scope)
            if tracked is None or tracked[0] != before_digest or before_digest is None:
                tracker = EntityTracker()
                kept = (
                    load(files, before_digest, self._archive_below)
                    if before_digest is not None
                    else None
                )
                if kept is not None:
                    tracker.seed(active(before), kept.tracked)
                self._trackers[scope] = (before_digest, tracker)
        self.find(scope, after_digest, after, files)

    def forget(self, scope: str) -> None:
        with self._lock:
            self._trackers.pop(scope, None)
            self._found.pop(scope, None)


def _save(files: CacheFiles, data: bytes) -> None:
    parse_cache.write_file(files.entities, data)


def _cached_version(files: CacheFiles) -> bytes | None:
    """The version the parse cache stands for: entities are kept only beside it (a file
    too small for a parse cache gets none)."""
    mark = parse_cache.read_mark(files)
    return None if mark is None else mark.digest
