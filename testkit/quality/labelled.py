"""The labelled sets (`bench/data/recall_*.json`): conversations a bot held with one
person over weeks, and questions asked later whose answers sit in known turns.

Each conversation is stored the way a running bot stores it (its sessions through
`MemoryCore.record_session`; in `archived` mode then moved to archive files by the
bot's own archive pass), and each question asked through the two recall paths, as of the
time it is asked.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.base.clock import ManualClock
from memory_core.base.records import Hit, RecordedMessage
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from testkit.quality.floor import Floor
from testkit.quality.metrics import Scores, found_turns, score
from testkit.quality.setup import RAW_FOREVER, Overrides, bench_config, peer_scope, zone_of

MODES = ("history", "archived")
PATHS = ("explicit", "automatic")
ASSISTANT_SPEAKER = ""
"""What the chat engine stores as an assistant message's speaker."""


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    started_at: datetime
    turns: tuple[Turn, ...]

    def at(self, index: int) -> datetime:
        """Turn i of a session is at started_at + i minutes."""
        return self.started_at + timedelta(minutes=index)


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    asked_at: datetime
    type: str
    question: str
    answer: str
    evidence: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    user: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    def evidence_texts(self, question: Question) -> list[str]:
        by_id = {s.id: s for s in self.sessions}
        return [by_id[sid].turns[i].text for sid, i in dict.fromkeys(question.evidence)]


@dataclass(frozen=True, slots=True)
class LabelledSet:
    name: str
    """The file's part ('en-a')."""
    language: str
    conversations: tuple[Conversation, ...]

    @property
    def questions(self) -> int:
        return sum(len(c.questions) for c in self.conversations)

    def limited(self, limit: int | None) -> LabelledSet:
        """The first `limit` questions (and only the conversations they need)."""
        if limit is None:
            return self
        kept: list[Conversation] = []
        left = limit
        for conv in self.conversations:
            if left <= 0:
                break
            questions = conv.questions[:left]
            left -= len(questions)
            kept.append(Conversation(conv.id, conv.user, conv.sessions, questions))
        return LabelledSet(self.name, self.language, tuple(kept))


def parse_set(data: Mapping[str, Any], name: str) -> LabelledSet:
    """A set from its JSON; a label naming a turn that does not exist is an error here,
    not a silent zero later."""
    conversations = []
    for conv in data["conversations"]:
        sessions = tuple(
            Session(
                id=s["id"],
                started_at=datetime.fromisoformat(s["started_at"]),
                turns=tuple(Turn(t["role"], t["text"]) for t in s["turns"]),
            )
            for s in conv["sessions"]
        )
        lengths = {s.id: len(s.turns) for s in sessions}
        questions = []
        for q in conv["questions"]:
            evidence = tuple((str(sid), int(i)) for sid, i in q["evidence"])
            for sid, i in evidence:
                if not 0 <= i < lengths.get(sid, 0):
                    raise ValueError(f"{name}: {q['id']} names no turn {sid}[{i}]")
            questions.append(
                Question(
                    id=q["id"],
                    asked_at=datetime.fromisoformat(q["asked_at"]),
                    type=q["type"],
                    question=q["question"],
                    answer=q.get("answer", ""),
                    evidence=evidence,
                )
            )
        conversations.append(Conversation(conv["id"], conv["user"], sessions, tuple(questions)))
    return LabelledSet(str(data.get("part") or name), str(data["language"]), tuple(conversations))


def load_set(path: Path) -> LabelledSet:
    data = json.loads(path.read_text(encoding="utf-8"))
    return parse_set(data, path.stem.removeprefix("recall_"))


def recorded(conv: Conversation, session: Session) -> list[RecordedMessage]:
    """A session's turns as a bot stores them: the user's under their name."""
    return [
        RecordedMessage(
            role=turn.role,
            speaker=conv.user if turn.role == "user" else ASSISTANT_SPEAKER,
            content=turn.text,
            at=session.at(i),
        )
        for i, turn in enumerate(session.turns)
    ]


@dataclass(slots=True)
class Outcome:
    """One question through one path."""

    question: str
    type: str
    path: str
    scores: Scores
    found: list[list[int]]
    kinds: list[str]


@dataclass(slots=True)
class SetRun:
    """One set in one storage mode with one variant."""

    outcomes: list[Outcome] = field(default_factory=list)
    ingest_s: float = 0.0
    query_s: float = 0.0
    stored: Counter[str] = field(default_factory=Counter)
    """What the index holds after storing: messages by archive state, archive files."""


async def run_set(
    dataset: LabelledSet,
    modes: Sequence[str],
    overrides: Overrides,
    root: Path,
    *,
    summaries: bool = False,
    floor: bool = False,
) -> dict[str, SetRun]:
    """Every conversation in a fresh workspace under `root` with a fresh core; with
    `floor`, the questions are ranked by the plain-BM25 floor over the stored chunks."""
    runs = {mode: SetRun() for mode in modes}
    for conv in dataset.conversations:
        part = await _run_conversation(conv, modes, overrides, root / conv.id, summaries, floor)
        for mode, run in part.items():
            total = runs[mode]
            total.outcomes.extend(run.outcomes)
            total.ingest_s += run.ingest_s
            total.query_s += run.query_s
            total.stored.update(run.stored)
    return runs


async def _run_conversation(
    conv: Conversation,
    modes: Sequence[str],
    overrides: Overrides,
    workspace: Path,
    summaries: bool,
    floor: bool,
) -> dict[str, SetRun]:
    """Store the sessions, ask in `history` mode, then archive as the bot does and ask
    again in `archived` mode: one core for both, as one bot's life."""
    first = conv.sessions[0].started_at
    config = bench_config(
        workspace,
        overrides,
        timezone=zone_of(first),
        raw_days=None if summaries else RAW_FOREVER,
    )
    clock = ManualClock(first)
    scope = peer_scope(conv.id)
    runs: dict[str, SetRun] = {}
    started = time.perf_counter()
    async with MemoryCore.open(config, clock=clock) as core:
        for session in conv.sessions:
            clock.set(session.at(len(session.turns)))
            await core.record_session(
                scope, f"{conv.id}-{session.id}", session.started_at, recorded(conv, session)
            )
        # A bot answers questions days later, every turn embedded by then; a bench waits.
        await core.vectors_ready()
        if "history" in modes:
            runs["history"] = await _ask(core, scope, conv, clock, started, floor)
            started = time.perf_counter()
        if "archived" in modes:
            # The bot's own archive pass, run when the first question is asked.
            clock.set(min(q.asked_at for q in conv.questions))
            report = await core.conversation.archive(scope)
            await core.vectors_ready()
            run = runs["archived"] = await _ask(core, scope, conv, clock, started, floor)
            run.stored["archive files"] += len(report.files)
            run.stored["archived verbatim"] += report.moved
            run.stored["summarised"] += report.summarized
    return runs


def anchor_of(hit: Hit, anchors: Mapping[datetime, tuple[str, int]]) -> tuple[str, int] | None:
    if hit.created_at is None:
        return None
    return anchors.get(hit.created_at.astimezone(UTC).replace(second=0, microsecond=0))


def turn_times(conv: Conversation) -> dict[datetime, tuple[str, int]]:
    return {
        s.at(i).astimezone(UTC).replace(second=0, microsecond=0): (s.id, i)
        for s in conv.sessions
        for i in range(len(s.turns))
    }


async def _ask(
    core: MemoryCore,
    scope: ScopeKey,
    conv: Conversation,
    clock: ManualClock,
    started: float,
    floor: bool,
) -> SetRun:
    """Every question of the conversation through both paths, as of its time (or
    through the plain-BM25 floor, the same list for both paths)."""
    run = SetRun(ingest_s=time.perf_counter() - started)
    for state, count in (await core.history.counts_by_scope()).get(scope.value, {}).items():
        run.stored[f"messages {state}"] += count
    asking = time.perf_counter()
    anchors = turn_times(conv)
    plain = await Floor.of(core, scope) if floor else None
    for question in conv.questions:
        clock.set(question.asked_at)
        wanted = conv.evidence_texts(question)
        if plain is not None:
            explicit = automatic = plain.search(question.question)
        else:
            explicit = await core.finder.search(scope, SearchRequest(question.question, limit=10))
            injection = await core.finder.recall(
                scope, question.question, [], now=question.asked_at
            )
            automatic = injection.hits
        for path, hits in (("explicit", explicit), ("automatic", automatic)):
            run.outcomes.append(_outcome(question, path, wanted, hits, anchors))
    run.query_s = time.perf_counter() - asking
    return run


def _outcome(
    question: Question,
    path: str,
    wanted: Sequence[str],
    hits: Sequence[Hit],
    anchors: Mapping[datetime, tuple[str, int]],
) -> Outcome:
    """A hit counts for the turn it is anchored on (known by its time: each turn has its
    own minute); the turns it shows beside it count only as "shown"."""
    index = {turn: i for i, turn in enumerate(dict.fromkeys(question.evidence))}
    found = [
        frozenset({index[a]}) if (a := anchor_of(h, anchors)) in index else frozenset()
        for h in hits
    ]
    shown = found_turns(wanted, [h.text for h in hits])
    return Outcome(
        question=question.id,
        type=question.type,
        path=path,
        scores=score(found, len(wanted), shown),
        found=[sorted(items) for items in found],
        kinds=[h.kind.value for h in hits],
    )
