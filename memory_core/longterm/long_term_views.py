"""What is read out of a scope's long-term file: the prompt block, entities, status,
problems, and the forgotten entries beside it (what can be restored, which id a prefix names).

These views write nothing; `LongTermMemory` hands them out, apart from its writes. Each is
derived from the store's parse of the file, and the costly ones (the ranked entries, the
prompt block, the entities) are kept until the file changes: the store hands out the same
parse object until then, so "same parse" is the cache's whole test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatch
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import EntryNotFound, FileRefused
from memory_core.base.policy import ScoringPolicy
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.longterm.entities import Entity
from memory_core.longterm.forgotten_keeper import ForgottenKeeper
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.prompt import render_prompt_memories, select_prompt_entries_until
from memory_core.longterm.scoring import Status, score_at, status_of
from memory_core.longterm.settled_store import SettledStore

HOT_PATH_MAX_AGE = 1.0
"""Seconds a chat turn may reuse the last check that MEMORY.md is unchanged on disk."""


@dataclass(frozen=True, slots=True)
class ScopeStatus:
    scope: ScopeKey
    active: list[MemoryEntry]
    archived: list[MemoryEntry]
    quarantined: list[QuarantinedBlock]
    daily_files: int
    path: str


@dataclass(frozen=True, slots=True)
class ValidationProblem:
    scope: ScopeKey
    path: str
    block: QuarantinedBlock


class LongTermViews:
    """The read-only views of every scope's long-term file, cached per version of it."""

    def __init__(
        self,
        config: Config,
        workspace: Workspace,
        store: SettledStore,
        kept: ForgottenKeeper,
        policy: ScoringPolicy,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.store = store
        self.kept = kept
        self.policy = policy
        self._ranked_cache: dict[ScopeKey, tuple[ParsedMemory, list[MemoryEntry]]] = {}
        self._entities: dict[str, tuple[ParsedMemory | bytes | None, list[Entity]]] = {}
        self._entity_locks: dict[str, asyncio.Lock] = {}
        # Per scope: the ranked entries a prompt block was made from, the instants it holds
        # for (from, until) and the block itself.
        self._prompt_cache: dict[ScopeKey, tuple[list[MemoryEntry], datetime, datetime, str]] = {}

    async def entities(self, scope: ScopeKey) -> list[Entity]:
        """The entities the scope's Active memories name (best first), found again only
        when the file changed: the store hands out the same parse until then."""
        async with self._entity_locks.setdefault(scope.value, asyncio.Lock()):
            digest, parsed = await self.store.current(scope)
            cached = self._entities.get(scope.value)
            if cached is not None and (
                cached[0] is parsed if digest is None else cached[0] == digest
            ):
                return cached[1]
            keeper = self.store.files.entities
            files = self.store.files.cache_files(scope)
            # A version's entities are kept beside its parse cache (`entity_keeper.py`):
            # a new process reads them, without loading or scanning the entries.
            found = None
            if digest is not None:
                found = await asyncio.to_thread(keeper.read, scope.value, digest, files)
            if found is None:
                if parsed is None:
                    parsed = await self.store.load(scope)
                # By difference from the last version's (a write changes a few entries
                # of what may be 100 000): one tracker per scope, one version at a time.
                found = await asyncio.to_thread(
                    keeper.find, scope.value, digest, parsed.entries, files
                )
            self._entities[scope.value] = (parsed if digest is None else digest, found)
            return found

    async def prompt_memories(self, scope: ScopeKey, when: datetime) -> str:
        """The prompt's memory block, rendered once per version of the long-term file and
        reused until a score it depends on can change (a day boundary of an entry)."""
        settings = self.config.prompt
        ranked = await self._ranked_entries(scope)
        cached = self._prompt_cache.get(scope)
        if cached is not None and cached[0] is ranked and cached[1] <= when < cached[2]:
            return cached[3]
        chosen, until = select_prompt_entries_until(
            ranked,
            when,
            min_score=settings.min_score,
            top_k=settings.top_k,
            policy=self.policy,
            ranked=True,
        )
        block = render_prompt_memories(chosen, settings.max_tokens)
        self._prompt_cache[scope] = (ranked, when, until, block)
        return block

    async def _ranked_entries(self, scope: ScopeKey) -> list[MemoryEntry]:
        """Entries by stored score, highest first, sorted once per version of the file."""
        parsed = await self.store.load(scope, max_age=HOT_PATH_MAX_AGE)
        cached = self._ranked_cache.get(scope)
        if cached is not None and cached[0] is parsed:
            return cached[1]
        ranked = sorted(parsed.entries, key=lambda e: -e.score)
        self._ranked_cache[scope] = (parsed, ranked)
        return ranked

    async def status(self, scope: ScopeKey, when: datetime) -> ScopeStatus:
        """The scope's entries scored as of `when`, Active apart from the rest."""
        parsed = await self.store.load(scope)
        current = [
            e.with_(score=score_at(e, when, self.policy), scored_at=when) for e in parsed.entries
        ]
        active = [e for e in current if status_of(e, self.policy) is Status.ACTIVE]
        archived = [e for e in current if status_of(e, self.policy) is not Status.ACTIVE]
        daily_files = await asyncio.to_thread(
            _count_daily, self.workspace.root, self.workspace.memory_dir(scope)
        )
        return ScopeStatus(
            scope=scope,
            active=sorted(active, key=lambda e: -e.score),
            archived=sorted(archived, key=lambda e: -e.score),
            quarantined=list(parsed.quarantined),
            daily_files=daily_files,
            path=self.workspace.relative(self.store.path(scope)),
        )

    async def problems(self, scopes: list[ScopeKey]) -> list[ValidationProblem]:
        """Every quarantined block in the long-term file of each of `scopes`."""
        problems: list[ValidationProblem] = []
        for scope in scopes:
            parsed = await self.store.load(scope)
            rel = self.workspace.relative(self.store.path(scope))
            problems.extend(ValidationProblem(scope, rel, block) for block in parsed.quarantined)
        return problems

    # --- forgotten entries and ids --------------------------------------------------
    async def restorable(self, scope: ScopeKey, when: datetime) -> list[MemoryEntry]:
        """The scope's forgotten entries that `restore` can still bring back as of `when`,
        newest first; each one's `scored_at` is when it was forgotten."""
        kept = await self.kept.live(scope, when)
        if not kept:
            return kept
        live = {e.id for e in (await self.store.load(scope)).entries}
        return [e for e in kept if e.id not in live]

    async def forgotten_entries(
        self, scope: ScopeKey, ids: Collection[str], when: datetime
    ) -> list[MemoryEntry]:
        """The kept forgotten entries with these ids; EntryNotFound names the first id that
        is not one (and says so when it is a live entry, which must be forgotten first)."""
        kept = {e.id: e for e in await self.restorable(scope, when)}
        for entry_id in ids:
            if entry_id not in kept:
                if any(e.id == entry_id for e in (await self.store.load(scope)).entries):
                    raise EntryNotFound(
                        f"entry {entry_id!r} of scope {scope} is not forgotten:"
                        f" forget it first (chatmem forget {entry_id})"
                    )
                raise EntryNotFound(f"no forgotten entry {entry_id!r} in scope {scope}")
        return [kept[entry_id] for entry_id in dict.fromkeys(ids)]

    async def match_id(self, scope: ScopeKey, text: str, when: datetime) -> str:
        """The id of the entry (live or kept forgotten) that `text` names: the whole id, or
        a prefix of exactly one. An ambiguous prefix is an error listing the candidates."""
        wanted = text.strip()
        ids = [e.id for e in (await self.store.load(scope)).entries]
        ids += [e.id for e in await self.restorable(scope, when) if e.id not in ids]
        if wanted in ids:
            return wanted
        matches = [i for i in ids if wanted and i.startswith(wanted)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise EntryNotFound(f"no entry {text!r} in scope {scope}")
        shown = ", ".join(matches[:10]) + (", …" if len(matches) > 10 else "")
        raise EntryNotFound(
            f"id prefix {text!r} matches {len(matches)} entries of scope {scope}: {shown}"
        )


def _count_daily(root: Path, directory: Path) -> int:
    """Daily files of the folder; 0 when it is missing or leads outside the workspace."""
    try:
        with safe_files.scan_dir(root, directory) as listing:
            return sum(1 for e in listing if fnmatch(e.name, "????-??-??.md"))
    except (OSError, FileRefused):
        return 0
