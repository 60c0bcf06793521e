"""Runs the consolidation phases over a scope, resumably.

Each phase decides with the pure functions of `memory_core.consolidation.phases` and writes with
one locked, atomic rewrite of the long-term file; what a phase hands to the next (event
positions, extracted candidates, how far beliefs were checked) is kept in the scope's
`consolidation.json`, written atomically after each step. A run cut at any point resumes
where it stopped, and a run over an unchanged scope changes nothing: the event cursor only
moves forward, a session once merged is not extracted again, a (belief, fact) pair is
judged once, and a summary's id is fixed by the events it covers.

With a model configured, filter, extract, verify and summarize ask it (prompts in
`memory_core/llm/prompts/`); a failed call leaves that phase's input in place for the next run.
Without one, the offline rules decide.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.clock import format_when, parse_when
from memory_core.base.entries import Importance, MemoryClass, MemoryEntry
from memory_core.base.errors import LLMError
from memory_core.base.locks import LockRegistry
from memory_core.base.merge_values import Change, Proposal
from memory_core.base.meter import Outcome
from memory_core.base.scope import ScopeKey
from memory_core.base.text import tokenize
from memory_core.base.wording import counted
from memory_core.config import Config
from memory_core.consolidation.phases import (
    MAX_SUMMARY_CHARS,
    PHASES,
    EventRef,
    Judgement,
    Phase,
    PhaseReport,
    SummaryPlan,
    Verdict,
    apply_judgements,
    apply_summaries,
    inputs_to_consider,
    plan_summaries,
    polarity_verdict,
    verification_pairs,
    worth_extracting,
)
from memory_core.llm.client import LLMClient, Message
from memory_core.llm.extract import (
    TranscriptLine,
    extract_with_llm,
    heuristic_candidates,
)
from memory_core.llm.prompts import load_prompt
from memory_core.memory_service import MemoryService
from memory_core.notes.event_log import Event
from memory_core.storage.interfaces import AuditBackend, HistoryBackend

log = logging.getLogger(__name__)

STATE_FILE = "consolidation.json"
SOURCE = "consolidate"


@dataclass(slots=True)
class _State:
    """What one phase leaves for the next, and how far the log and the facts were read."""

    cursor: EventRef | None = None
    pending: list[EventRef] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    checked_through: datetime | None = None

    def to_json(self) -> str:
        data = {
            "version": 1,
            "cursor": asdict(self.cursor) if self.cursor else None,
            "pending": [asdict(ref) for ref in self.pending],
            "candidates": self.candidates,
            "checked_through": format_when(self.checked_through) if self.checked_through else None,
        }
        return json.dumps(data, ensure_ascii=False, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> _State:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError("not a consolidation state of version 1")
        cursor = data.get("cursor")
        checked = data.get("checked_through")
        return cls(
            cursor=EventRef(**cursor) if cursor else None,
            pending=[EventRef(**ref) for ref in data.get("pending") or []],
            candidates=list(data.get("candidates") or []),
            checked_through=parse_when(checked) if checked else None,
        )


class Consolidator:
    def __init__(
        self,
        memory: MemoryService,
        history: HistoryBackend | None,
        audit: AuditBackend | None,
        llm: LLMClient | None,
        config: Config,
        locks: LockRegistry,
    ) -> None:
        self.memory = memory
        self.history = history
        self.audit = audit
        self.llm = llm if llm is not None and llm.configured else None
        self.config = config
        self.locks = locks

    def state_path(self, scope: ScopeKey) -> Path:
        return self.memory.long_term.workspace.memory_dir(scope) / STATE_FILE

    async def run(
        self, scope: ScopeKey, phases: Sequence[Phase] = PHASES, *, now: datetime | None = None
    ) -> list[PhaseReport]:
        """The phases in their fixed order (a subset keeps that order), one scope at a
        time in the whole workspace."""
        when = now or self.memory.now()
        wanted = [phase for phase in PHASES if phase in phases]
        reports = []
        lock = self.memory.long_term.workspace.lock_name(scope, "consolidate")
        async with self.locks.hold(lock):
            state = await self._load(scope)
            saved = state.to_json()
            try:
                with self.memory.meter.timed(self._ran):
                    for phase in wanted:
                        reports.append(await self._run_phase(phase, scope, state, when))
            finally:
                # Whatever the phases got through is kept, even when one failed: a
                # phase's work is written before its part of the state moves on.
                if state.to_json() != saved:
                    await self._save(scope, state)
        return reports

    def _ran(self, seconds: float, outcome: Outcome) -> None:
        self.memory.meter.consolidation(outcome)

    async def _run_phase(
        self, phase: Phase, scope: ScopeKey, state: _State, when: datetime
    ) -> PhaseReport:
        if phase is Phase.DECAY:
            result = await self.memory.long_term.consolidate(scope, now=when)
            moved = len(result.changes)
            return PhaseReport(phase, moved, f"{moved} scores moved, {dict(result.stats)}")
        if phase is Phase.FILTER:
            return await self._filter(scope, state)
        if phase is Phase.EXTRACT:
            return await self._extract(scope, state, when)
        if phase is Phase.VERIFY:
            return await self._verify(scope, state, when)
        if phase is Phase.SUMMARIZE:
            return await self._summarize(scope, when)
        if not self.config.snapshot.enabled:
            return PhaseReport(phase, 0, "snapshot.enabled is off")
        snapshot = await self.memory.snapshots.rebuild(scope, now=when)
        return PhaseReport(phase, 1, f"{snapshot.tokens} tokens")

    # --- state ------------------------------------------------------------------------
    async def _load(self, scope: ScopeKey) -> _State:
        path = self.state_path(scope)
        root = self.memory.long_term.workspace.root

        def read() -> _State:
            try:
                text = safe_files.read_text(root, path, safe_files.SNAPSHOT_BYTES)
            except (FileNotFoundError, NotADirectoryError):
                return _State()
            try:
                return _State.from_json(text)
            except (ValueError, TypeError, KeyError) as exc:
                # Kept, not overwritten: a person can see what was there.
                aside = path.with_name(f"{path.name}.unreadable")
                safe_files.inside(root, aside)
                path.replace(aside)
                log.warning("consolidation state %s unreadable (%s); moved to %s", path, exc, aside)
                return _State()

        return await asyncio.to_thread(read)

    async def _save(self, scope: ScopeKey, state: _State) -> None:
        path = self.state_path(scope)

        def write() -> None:
            self.memory.long_term.workspace.ensure_scope(scope)
            root = self.memory.long_term.workspace.root
            atomic_write_text(path, state.to_json(), root=root)

        await asyncio.to_thread(write)

    # --- filter -----------------------------------------------------------------------
    async def _filter(self, scope: ScopeKey, state: _State) -> PhaseReport:
        if self.history is None:
            # Only the history knows which sessions are still open: taking their inputs
            # blind would leave their /new nothing to learn.
            return PhaseReport(Phase.FILTER, 0, "no session history (no database), inputs wait")
        events = await self._events_from(scope, state.cursor)
        done = await self._done_sessions(scope)
        still_open = {session.id for session in await self.history.open_sessions()}
        chosen, cursor = inputs_to_consider(events, state.cursor, done, still_open)
        if self.llm is not None and chosen:
            try:
                kept = await self._filter_with_model(chosen)
            except LLMError as exc:
                log.warning("consolidation filter of scope %s waits for the model (%s)", scope, exc)
                return PhaseReport(Phase.FILTER, 0, f"model unreachable, {len(chosen)} wait")
        else:
            kept = [ref for ref, event in chosen if worth_extracting(event)]
        known = set(state.pending)
        state.pending.extend(ref for ref in kept if ref not in known)
        state.cursor = cursor
        return PhaseReport(
            Phase.FILTER, len(kept), f"{len(kept)} of {len(chosen)} new inputs kept to extract"
        )

    async def _filter_with_model(self, chosen: list[tuple[EventRef, Event]]) -> list[EventRef]:
        assert self.llm is not None
        lines = "\n".join(
            f"{n}. {event.data.get('text', '')}" for n, (_, event) in enumerate(chosen, 1)
        )
        data = await self.llm.complete_json(_messages(load_prompt("filter").format(lines=lines)))
        keep = data.get("keep") if isinstance(data, dict) else data
        numbers = {n for n in keep if isinstance(n, int)} if isinstance(keep, list) else set()
        return [ref for n, (ref, _) in enumerate(chosen, 1) if n in numbers]

    async def _events_from(
        self, scope: ScopeKey, after: EventRef | None
    ) -> list[tuple[EventRef, Event]]:
        found: list[tuple[EventRef, Event]] = []
        for day in await self.memory.events.days(scope):
            label = day.isoformat()
            if after is not None and label < after.day:
                continue
            log_of_day = await self.memory.events.read(scope, day)
            found.extend(
                (EventRef(label, line), event) for line, event in enumerate(log_of_day.events)
            )
        return found

    async def _done_sessions(self, scope: ScopeKey) -> frozenset[str]:
        return await self.audit.seen_sessions(scope) if self.audit is not None else frozenset()

    # --- extract ----------------------------------------------------------------------
    async def _extract(self, scope: ScopeKey, state: _State, when: datetime) -> PhaseReport:
        if not state.candidates and state.pending:
            by_session = await self._pending_lines(scope, state.pending)
            extracted: list[dict[str, Any]] = []
            entries = await self.memory.long_term.entries(scope)
            for session, lines in by_session.items():
                try:
                    found = await self._candidates(lines, entries, when)
                except LLMError as exc:
                    log.warning("consolidation extract of scope %s waits (%s)", scope, exc)
                    return PhaseReport(Phase.EXTRACT, 0, "model unreachable, inputs wait")
                extracted.extend(_candidate_record(session, c) for c in found)
            # The candidates are kept before any is merged: a run cut between two merges
            # merges the same ones again (a repeat within a session changes nothing).
            state.candidates = extracted
            state.pending = []
            await self._save(scope, state)
        merged = 0
        sessions: dict[str | None, list[Proposal]] = {}
        for record in state.candidates:
            sessions.setdefault(record.get("session"), []).append(_candidate_of(record))
        for session, candidates in sessions.items():
            result = await self.memory.long_term.merge_candidates(
                scope, candidates, session_id=session, source=SOURCE, now=when
            )
            merged += sum(1 for c in result.changes if c.kind.value in ("add", "reinforce"))
        count = len(state.candidates)
        state.candidates = []
        return PhaseReport(
            Phase.EXTRACT,
            merged,
            f"{counted(count, 'candidate')}, {counted(merged, 'entry')} changed",
        )

    async def _pending_lines(
        self, scope: ScopeKey, refs: Sequence[EventRef]
    ) -> dict[str | None, list[TranscriptLine]]:
        wanted: dict[str, set[int]] = {}
        for ref in refs:
            wanted.setdefault(ref.day, set()).add(ref.line)
        by_session: dict[str | None, list[TranscriptLine]] = {}
        for day in sorted(wanted):
            events = (await self.memory.events.read(scope, date.fromisoformat(day))).events
            for line, event in enumerate(events):
                if line in wanted[day]:
                    text = str(event.data.get("text", ""))
                    by_session.setdefault(event.session, []).append(TranscriptLine("user", text))
        return by_session

    async def _candidates(
        self, lines: list[TranscriptLine], entries: list[MemoryEntry], when: datetime
    ) -> list[Proposal]:
        if self.llm is not None:
            return await extract_with_llm(
                self.llm, lines, entries, when, self.memory.long_term.policy
            )
        return heuristic_candidates(lines)

    # --- verify -----------------------------------------------------------------------
    async def _verify(self, scope: ScopeKey, state: _State, when: datetime) -> PhaseReport:
        entries = await self.memory.long_term.entries(scope)
        pairs = await asyncio.to_thread(
            verification_pairs, entries, state.checked_through, when, tokenize
        )
        if self.llm is not None and pairs:
            try:
                judgements = await self._judge_with_model(pairs)
            except LLMError as exc:
                log.warning("consolidation verify of scope %s waits (%s)", scope, exc)
                return PhaseReport(Phase.VERIFY, 0, "model unreachable, beliefs wait")
        else:
            judgements = [
                Judgement(belief.id, fact.id, polarity_verdict(belief.content, fact.content))
                for belief, facts in pairs
                for fact in facts
            ]
        policy = self.memory.long_term.policy
        changes = await self.memory.long_term.rewrite(
            scope,
            lambda current, at: apply_judgements(current, judgements, at, policy),
            source=SOURCE,
            now=when,
        )
        checked = state.checked_through
        if checked is None or checked > when or any(e.created_at > checked for e in entries):
            # Moved only when something new was there to weigh: a quiet scope's state
            # (and file) stays as it is.
            state.checked_through = when
        weighed = sum(len(facts) for _, facts in pairs)
        return PhaseReport(
            Phase.VERIFY, len(changes), f"{weighed} belief/fact pairs, {len(changes)} changed"
        )

    async def _judge_with_model(
        self, pairs: list[tuple[MemoryEntry, list[MemoryEntry]]]
    ) -> list[Judgement]:
        assert self.llm is not None
        judgements = []
        for belief, facts in pairs:
            listing = "\n".join(f"[{f.id}] {f.content}" for f in facts)
            prompt = load_prompt("verify_belief").format(belief=belief.content, facts=listing)
            data = await self.llm.complete_json(_messages(prompt))
            verdicts = data.get("verdicts") if isinstance(data, dict) else data
            known = {f.id for f in facts}
            for item in verdicts if isinstance(verdicts, list) else []:
                if not isinstance(item, dict) or item.get("fact") not in known:
                    continue
                try:
                    verdict = Verdict(str(item.get("verdict", "")).lower())
                except ValueError:
                    continue
                judgements.append(Judgement(belief.id, str(item["fact"]), verdict))
        return judgements

    # --- summarize --------------------------------------------------------------------
    async def _summarize(self, scope: ScopeKey, when: datetime) -> PhaseReport:
        policy = self.memory.long_term.policy
        texts: dict[str, str] = {}
        if self.llm is not None:
            # The model writes the texts first; the write plans again on what is on disk
            # then, and a plan the model wrote nothing for keeps the events' own texts.
            entries = await self.memory.long_term.entries(scope)
            try:
                texts = await self._summaries_with_model(
                    entries, plan_summaries(entries, when, policy)
                )
            except LLMError as exc:
                log.warning("consolidation summaries of scope %s wait (%s)", scope, exc)
                return PhaseReport(Phase.SUMMARIZE, 0, "model unreachable, events wait")

        def plan(
            current: list[MemoryEntry], at: datetime
        ) -> tuple[list[MemoryEntry], list[Change]]:
            return apply_summaries(current, plan_summaries(current, at, policy), at, policy, texts)

        changes = await self.memory.long_term.rewrite(scope, plan, source=SOURCE, now=when)
        added = sum(1 for c in changes if c.kind.value == "add")
        return PhaseReport(
            Phase.SUMMARIZE,
            added,
            f"{counted(added, 'summary')} over {counted(len(changes) - added, 'event')}",
        )

    async def _summaries_with_model(
        self, entries: list[MemoryEntry], plans: list[SummaryPlan]
    ) -> dict[str, str]:
        assert self.llm is not None
        by_id = {e.id: e for e in entries}
        texts = {}
        for plan in plans:
            events = "\n".join(
                f"- {by_id[i].created_at.date().isoformat()} {by_id[i].content}"
                for i in plan.covers
                if i in by_id
            )
            prompt = load_prompt("generate_summary").format(
                period=plan.label, events=events, max_chars=MAX_SUMMARY_CHARS
            )
            data = await self.llm.complete_json(_messages(prompt))
            text = data.get("summary") if isinstance(data, dict) else None
            if isinstance(text, str) and text.strip():
                texts[plan.id] = f"{plan.label}: {text.strip()[:MAX_SUMMARY_CHARS]}"
        return texts


def _messages(prompt: str) -> list[Message]:
    return [
        {"role": "system", "content": "You consolidate a user's memories and answer only JSON."},
        {"role": "user", "content": prompt},
    ]


def _candidate_record(session: str | None, candidate: Proposal) -> dict[str, Any]:
    return {
        "session": session,
        "content": candidate.content,
        "category": candidate.category,
        "importance": candidate.importance.value,
        "matches": candidate.matches,
        "contradicts": list(candidate.contradicts),
        "expires_at": format_when(candidate.expires_at) if candidate.expires_at else None,
        "confidence": candidate.confidence,
        "memory_class": candidate.memory_class.value if candidate.memory_class else None,
    }


def _candidate_of(record: dict[str, Any]) -> Proposal:
    expires = record.get("expires_at")
    kind = record.get("memory_class")
    return Proposal(
        content=str(record["content"]),
        category=str(record.get("category") or "fact"),
        importance=Importance(record.get("importance") or "medium"),
        matches=record.get("matches"),
        contradicts=tuple(record.get("contradicts") or ()),
        expires_at=parse_when(expires) if expires else None,
        confidence=record.get("confidence"),
        memory_class=MemoryClass(kind) if kind else None,
    )
