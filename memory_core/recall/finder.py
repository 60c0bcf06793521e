"""Finding memories: explicit search, the automatic recall of a prompt, memory_get.

Every read first writes the scope's staged captures (`flush`), so a caller always finds
what it just saved. The index may turn unusable during any await (another task's failed
call degrades it), so a method reads `guard.index` once and keeps what it read: a
degraded index is answered by the files, never by an AttributeError.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import date, datetime, tzinfo

from memory_core.base.clock import Monotonic
from memory_core.base.errors import (
    DatabaseBusy,
    DatabaseUnwritable,
    IndexUnavailable,
    StorageError,
)
from memory_core.base.inputs import all_storable, storable
from memory_core.base.meter import NO_METER, Meter
from memory_core.base.scope import ScopeKey
from memory_core.base.text import tokenize
from memory_core.base.workspace import Workspace
from memory_core.config.memory import RecallSettings
from memory_core.longterm.entities import Entity, expand_query
from memory_core.recall.cache import RecallCache
from memory_core.recall.fallback import search_files
from memory_core.recall.guard import IndexGuard
from memory_core.recall.index import Hit
from memory_core.recall.index.rank_settings import rank_settings
from memory_core.recall.injection import Injection, build_injection
from memory_core.recall.query import Query, build_query
from memory_core.recall.reading import MemoryRead, read_memory_path
from memory_core.recall.request import QueryInput, SearchRequest
from memory_core.storage.interfaces import CatchUp, Progress

log = logging.getLogger(__name__)

Flush = Callable[[ScopeKey], Awaitable[None]]


class Finder:
    def __init__(
        self,
        workspace: Workspace,
        guard: IndexGuard,
        settings: RecallSettings,
        zone: tzinfo,
        today: Callable[[datetime | None], date],
        flush: Flush,
        entities_of: Callable[[ScopeKey], Awaitable[list[Entity]]] | None = None,
        *,
        monotonic: Monotonic = time.monotonic,
        meter: Meter = NO_METER,
        searched: Callable[[ScopeKey], None] | None = None,
    ) -> None:
        """`searched(scope)` is told after each search is answered (the long-term memory's
        read-ahead starts then)."""
        self.searched = searched
        self.workspace = workspace
        self.meter = meter
        self.guard = guard
        self.settings = settings
        self.zone = zone
        self.today = today
        self.flush = flush
        self.entities_of = entities_of
        self._cache: RecallCache[Injection] = RecallCache(
            ttl_seconds=settings.cache_minutes * 60, monotonic=monotonic
        )

    async def search(self, scope: ScopeKey, asked: SearchRequest | QueryInput) -> list[Hit]:
        """Ranked hits of the scope; from the files directly when the index is unusable.

        The one ranking of every search and recall: `chatmem search`, `/search`, the TUI,
        the chat tool and MCP `memory_search` call this, and `recall` calls it too. A text
        query is read as recall reads a message (`query`: its words, the other names of
        the entities it mentions, its time and kind of answer), and ranked by words and
        vectors (when an embedder is configured: the index waits for the scope's vectors
        to catch up first, `SearchIndex.search`) through memory_core/recall/index/pipeline.py.
        What may differ between callers is only what they ask for (`SearchRequest`):
        `limit`, `kinds`, `since`/`until`, and for the recall of a chat turn `min_score`
        (weak matches stay out of the prompt: explicit searches show every match) and
        `exclude_paths` (the current session, already in the prompt). A request without
        its day is read on this finder's clock's day. A degraded search (no usable
        database) ranks by words alone, for search and recall alike: the vectors live in
        the database.
        """
        started = self.meter.monotonic()
        hits = await self._search(scope, SearchRequest.of(asked))
        self.meter.search(self.meter.monotonic() - started, len(hits))
        if self.searched is not None:
            self.searched(scope)
        return hits

    async def _search(self, scope: ScopeKey, request: SearchRequest) -> list[Hit]:
        today = request.today or self.today(None)
        query = request.query
        if isinstance(query, str):
            storable(query, "the query")
            query = await self._query(scope, query, (), today)
        elif not isinstance(query, Query):
            all_storable(query, "the query")
        request = replace(request, query=query, today=today)
        await self.flush(scope)
        index = await self.guard.revive(scope)
        if index is not None:
            try:
                await index.sync_if_stale(scope)
                return await index.search(scope, request)
            except StorageError as exc:
                # Damage degrades; a lock that outlasted every retry does not, but this
                # one search is still answered, from the files.
                self.guard.failed(exc)
        log.info("degraded search in scope %s (no usable index)", scope)
        return await asyncio.to_thread(
            search_files,
            self.workspace,
            scope,
            request,
            zone=self.zone,
            k1=self.settings.k1,
            b=self.settings.b,
            settings=rank_settings(self.settings),
        )

    async def make_vectors(
        self, scope: ScopeKey, *, most: int | None, progress: Progress | None = None
    ) -> CatchUp | None:
        """Make the scope's missing vectors now, unless the model would have to make more
        than `most` (`VectorSearch.catch_up`): what a one-shot command does before it
        searches, so that it ranks with the vectors a bot would have made. None when this
        core ranks by words alone anyway (no embedder, or no usable index)."""
        await self.flush(scope)
        index = await self.guard.revive(scope)
        if index is None or index.vectors is None:
            return None
        try:
            await index.sync_if_stale(scope)
            sid = await index.scope_id(scope, create=False)
            if sid is None:
                return CatchUp(missing=0, made=0, done=True)
            return await index.vectors.catch_up(sid, most=most, progress=progress)
        except StorageError as exc:
            self.guard.failed(exc)
            return None

    async def search_words(self, scope: ScopeKey, text: str, *, limit: int = 10) -> list[Hit]:
        """A person's search for words (`/search`): `search`'s hits, but only those that
        hold one of the query's terms (or fall in the time it names) and score above
        zero. The ranking also hands on a matching turn's neighbours and, with vectors,
        texts that mean the same: context a recall wants, noise to a person who asked for
        a word ("/search oolong" listing a turn without it)."""
        storable(text, "the query")
        query = await self.query(scope, text)
        hits = await self.search(scope, SearchRequest(query, limit=limit * 2))
        shown = await asyncio.to_thread(_holding_terms, hits, query)
        return shown[:limit]

    async def recall(
        self,
        scope: ScopeKey,
        pending: str,
        recent: Sequence[str] = (),
        *,
        now: datetime | None = None,
        session_id: str | None = None,
    ) -> Injection:
        """The memory block for a prompt: `search` of the message (its recent messages'
        words weighing less), over every kind of memory, the messages of earlier sessions
        included and the current session's (already in the prompt) left out, with
        `recall.min_score`; as many hits as the query's kind
        allows and the token budget holds. So its hits are the first of
        the same search's, less the weak ones. A repeat of the same recall in the session
        within `recall.cache_minutes`, with nothing written since, is answered from cache.
        """
        started = self.meter.monotonic()
        injection = await self._recall(scope, pending, recent, now=now, session_id=session_id)
        self.meter.recall(self.meter.monotonic() - started, len(injection.hits))
        return injection

    async def _recall(
        self,
        scope: ScopeKey,
        pending: str,
        recent: Sequence[str],
        *,
        now: datetime | None,
        session_id: str | None,
    ) -> Injection:
        storable(pending, "the message")
        all_storable(recent, "a recent message")
        settings = self.settings
        query = await self.query(scope, pending, recent, now=now)
        keywords = sorted(query.terms, key=lambda t: -query.terms[t])
        if not query.terms and query.window is None:
            return Injection(keywords=[])
        key = (scope.value, session_id or "", pending, tuple(recent), self.today(now))
        await self.flush(scope)  # a staged capture is a write: it must move the mark
        mark = await self._mark(scope, session_id)
        cached = self._cache.get(key, mark)
        if cached is not None:
            return cached
        budget = query.budget
        request = SearchRequest(
            query,
            limit=budget.rerank,
            min_score=settings.min_score,
            exclude_paths=[f"sessions/{session_id}"] if session_id else (),
            today=self.today(now),
        )
        hits = await self.search(scope, request)
        injection = build_injection(
            keywords,
            hits,
            max_hits=min(budget.final, settings.max_hits) if settings.max_hits else budget.final,
            token_budget=settings.token_budget,
            hit_chars=settings.hit_chars,
        )
        self._cache.put(key, mark, injection)
        return injection

    async def query(
        self,
        scope: ScopeKey,
        text: str,
        recent: Sequence[str] = (),
        *,
        now: datetime | None = None,
    ) -> Query:
        """What a search or a recall ranks with: the words of `text`, with the other names
        of the entities it mentions ("my cat" also asks for 小橘, and 小橘 for "my cat":
        memory_core.longterm.entities), then the recent messages' words at a lower weight (a
        recall's, a search has none)."""
        return await self._query(scope, text, recent, self.today(now))

    async def _query(self, scope: ScopeKey, text: str, recent: Sequence[str], today: date) -> Query:
        settings = self.settings
        asked = text
        if settings.entity_expansion and self.entities_of is not None:
            extra = expand_query(text, await self.entities_of(scope))
            asked = " ".join([text, *extra])
        return build_query(asked, recent, today=today, context_weight=settings.context_weight)

    async def _mark(self, scope: ScopeKey, session_id: str | None) -> tuple[int, ...] | None:
        """What must be unchanged for a cached recall to stand: this process's writes to
        the scope (less the current session's messages) and other processes' commits."""
        index = self.guard.index
        if index is None:
            return None
        try:
            version = await index.data_version()
        except StorageError:
            return None
        return (index.generation(scope, besides_session=session_id), version)

    async def read(
        self, scope: ScopeKey, path: str, start: int | None = None, lines: int | None = None
    ) -> MemoryRead:
        """memory_get: lines of one of the scope's files (or a stored message)."""
        storable(path, "the path")
        await self.flush(scope)
        try:
            return await read_memory_path(
                self.workspace, self.guard.index, scope, path, start, lines
            )
        except StorageError as exc:  # session messages live in the index only
            if isinstance(exc, (DatabaseBusy, DatabaseUnwritable)):
                raise  # no damage: this read failed, the index did not
            self.guard.failed(exc)
            raise IndexUnavailable(f"cannot read {path}: the index failed: {exc}") from exc


SHOWN_ZERO = 0.005
"""A score below this is shown as 0.00: nothing to list."""


def _holding_terms(hits: Sequence[Hit], query: Query) -> list[Hit]:
    """The hits that score above zero and hold a term of `query` (any hit, when the query
    names a time and no words). Blocking: tokenizing may load the dictionary."""
    terms = set(query.terms)
    return [
        hit
        for hit in hits
        if hit.score >= SHOWN_ZERO and (not terms or terms.intersection(tokenize(hit.text)))
    ]
