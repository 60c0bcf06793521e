"""Finding memories: explicit search, the automatic recall of a prompt, memory_get.

Every read first writes the scope's staged captures (`flush`), so a caller always finds
what it just saved. The index may turn unusable during any await (another task's failed
call degrades it), so a method reads `guard.index` once and keeps what it read: a
degraded index is answered by the files, never by an AttributeError.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import date, datetime, tzinfo

from memory_core.chunking import ChunkKind
from memory_core.config import RecallSettings
from memory_core.errors import ChatmemError, IndexUnavailable
from memory_core.fallback import search_files
from memory_core.index import RANK_BUDGET, Hit
from memory_core.memory.guard import IndexGuard
from memory_core.reading import MemoryRead, read_memory_path
from memory_core.recall import (
    Injection,
    build_injection,
    day_bounds,
    has_recall_intent,
    recall_window,
)
from memory_core.scope import ScopeKey
from memory_core.text import extract_keywords
from memory_core.workspace import Workspace

log = logging.getLogger(__name__)

MESSAGE_CONTEXT_CHARS = 90
"""Each neighbouring message shown with a recalled message is cut to this length."""

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
    ) -> None:
        self.workspace = workspace
        self.guard = guard
        self.settings = settings
        self.zone = zone
        self.today = today
        self.flush = flush

    async def search(
        self,
        scope: ScopeKey,
        query: str | Sequence[str],
        *,
        limit: int = 10,
        kinds: Iterable[ChunkKind] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_score: float = 0.0,
        rank_budget: int = RANK_BUDGET,
    ) -> list[Hit]:
        """BM25 hits of the scope; from the files directly when the index is unusable.

        Explicit searches (a person, the memory_search tool) show every match; automatic
        recall passes `recall.min_score` so weak matches stay out of the prompt.
        """
        kind_list = list(kinds) if kinds is not None else None
        await self.flush(scope)
        index = await self.guard.revive(scope)
        if index is not None:
            try:
                await index.sync_if_stale(scope)
                return await index.search(
                    scope,
                    query,
                    limit=limit,
                    kinds=kind_list,
                    since=since,
                    until=until,
                    min_score=min_score,
                    rank_budget=rank_budget,
                )
            except sqlite3.DatabaseError as exc:
                # Damage degrades; a lock that outlasted every retry does not, but this
                # one search is still answered, from the files.
                self.guard.failed(exc)
        log.info("degraded search in scope %s (no usable index)", scope)
        dated = since is not None or until is not None
        hits = await asyncio.to_thread(
            search_files,
            self.workspace,
            scope,
            query,
            # The time window is applied here, so it must see every hit, not the top few.
            limit=sys.maxsize if dated else limit,
            kinds=kind_list,
            min_score=min_score,
            zone=self.zone,
            k1=self.settings.k1,
            b=self.settings.b,
        )
        return [h for h in hits if _within(h, since, until)][: max(limit, 0)]

    async def recall(
        self,
        scope: ScopeKey,
        pending: str,
        recent: Sequence[str] = (),
        *,
        now: datetime | None = None,
    ) -> Injection:
        """The memory block for a prompt: keywords, search, tiers, budget."""
        settings = self.settings
        keywords = extract_keywords(pending, recent, limit=settings.keywords)
        if not keywords:
            return Injection(keywords=[])
        kinds = [k for k in ChunkKind if k is not ChunkKind.MESSAGE]
        hits = await self.search(
            scope,
            keywords,
            limit=settings.max_hits * 4,
            kinds=kinds,
            min_score=settings.min_score,
            rank_budget=settings.rank_budget,
        )
        if has_recall_intent(pending):
            hits += await self._recalled_messages(scope, pending, keywords, now)
        return build_injection(
            keywords,
            hits,
            today=self.today(now),
            max_hits=settings.max_hits,
            token_budget=settings.token_budget,
            hit_chars=settings.hit_chars,
            recent_days=settings.recent_days,
        )

    async def _recalled_messages(
        self, scope: ScopeKey, pending: str, keywords: Sequence[str], now: datetime | None
    ) -> list[Hit]:
        """'What did we decide yesterday?': session messages of the day(s) the question
        names (any day when it names none), each with the messages around it, because the
        answer usually sits in the reply next to the matching line."""
        window = recall_window(pending, self.today(now))
        since, until = day_bounds(*window, self.zone) if window else (None, None)
        hits = await self.search(
            scope,
            keywords,
            limit=self.settings.max_hits,
            kinds=[ChunkKind.MESSAGE],
            since=since,
            until=until,
            min_score=self.settings.min_score,
            rank_budget=self.settings.rank_budget,
        )
        index = self.guard.index
        if index is None:
            return hits
        widened: list[Hit] = []
        for hit in hits:
            session_id = hit.path.removeprefix("sessions/")
            try:
                around = await index.message_context(scope, session_id, hit.line_from)
            except sqlite3.DatabaseError as exc:
                self.guard.failed(exc)
                around = []  # the hit alone still answers
            text = " / ".join(_clip(t, MESSAGE_CONTEXT_CHARS) for _, t in around) or hit.text
            widened.append(replace(hit, text=text))
        return widened

    async def read(
        self, scope: ScopeKey, path: str, start: int | None = None, lines: int | None = None
    ) -> MemoryRead:
        """memory_get: lines of one of the scope's files (or a stored message)."""
        await self.flush(scope)
        try:
            return await read_memory_path(
                self.workspace, self.guard.index, scope, path, start, lines
            )
        except sqlite3.DatabaseError as exc:  # session messages live in the index only
            if isinstance(exc, ChatmemError):
                raise
            self.guard.failed(exc)
            raise IndexUnavailable(f"cannot read {path}: the index failed: {exc}") from exc


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _within(hit: Hit, since: datetime | None, until: datetime | None) -> bool:
    if hit.created_at is None:
        return since is None and until is None
    return (since is None or hit.created_at >= since) and (until is None or hit.created_at < until)
