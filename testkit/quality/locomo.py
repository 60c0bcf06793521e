"""LoCoMo (the public development split): long multi-session conversations between two
people, stored as a running bot stores a group chat, asked by the dataset's protocol.

The data is read from a directory outside the repository (`DEFAULT_DIR`, or the bench's
`--locomo DIR`) and never copied into the project
(CC BY-NC 4.0). Its README states the protocol, followed here to the letter:

* every turn goes through `core.conversation.turn` in a two-person group scope (role user, the
  sender's name as speaker, the session's date plus 30 s per turn; image captions are
  not text a bot sees), with no chat model, under the **default configuration**;
* the bot's own scheduler (`Runtime.tick`) runs on the simulated clock, every 60 s while
  messages arrive and every 15 minutes in quiet gaps, so sessions close and the archiver
  moves turns into archive files exactly as in production;
* each question is asked one day after the last session, through `search(limit=10)`
  (explicit) and `recall` (automatic);
* a hit counts for the one turn it is anchored on (the turn whose text it ranks, known
  here by its time: every turn has its own second), never for the neighbours it shows;
  "shown" (an evidence turn anywhere in the first 5 hits' text) is a diagnostic only.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.base.clock import ManualClock
from memory_core.base.records import Hit
from memory_core.base.scope import DmScope, InboundContext, ScopeKey, resolve_scope
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from testkit.quality.floor import Floor
from testkit.quality.labelled import Outcome, SetRun
from testkit.quality.metrics import finds, score
from testkit.quality.setup import Overrides, apply_overrides

DEFAULT_DIR = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "locomo-dev"
FILE = "locomo_dev.json"
TURN_SECONDS = 30
BUSY_TICK = timedelta(seconds=60)
QUIET_TICK = timedelta(minutes=15)
MODE = "group+scheduler"
"""The storage mode the report names: a group scope, archived by the bot's schedules."""
CATEGORIES = {1: "multi", 2: "temporal", 3: "open", 4: "single"}
"""LoCoMo's categories as the report's types; 5 (adversarial, unanswerable) is skipped."""

_WHEN = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) (\w+), (\d{4})")
_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    type: str
    question: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    sessions: tuple[tuple[Turn, ...], ...]
    questions: tuple[Question, ...]

    @property
    def asked_at(self) -> datetime:
        """One day after the last turn."""
        return self.sessions[-1][-1].at + timedelta(days=1)


@dataclass(frozen=True, slots=True)
class LocomoSet:
    name: str
    language: str
    conversations: tuple[Conversation, ...]

    def limited(self, limit: int | None) -> LocomoSet:
        if limit is None:
            return self
        kept = tuple(
            Conversation(c.id, c.sessions, c.questions[:limit]) for c in self.conversations
        )
        return LocomoSet(self.name, self.language, kept)


def session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' (UTC: the dataset names no zone)."""
    m = _WHEN.search(text)
    if m is None:
        raise ValueError(f"unreadable session time {text!r}")
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half == "pm" else 0)
    parsed = datetime.strptime(f"{day} {month} {year}", "%d %B %Y")
    return parsed.replace(hour=h, minute=int(minute), tzinfo=UTC)


def evidence_ids(raw: Sequence[str], known: set[str]) -> tuple[str, ...]:
    """'D8:6; D9:17' and 'D:11:26' normalised; ids that name no turn dropped."""
    out: list[str] = []
    for item in raw:
        for m in _ID.finditer(item):
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia in known and dia not in out:
                out.append(dia)
    return tuple(out)


def parse_conversation(sample: dict[str, Any]) -> Conversation:
    talk = sample["conversation"]
    sessions: list[tuple[Turn, ...]] = []
    numbers = sorted(
        int(k.split("_")[1]) for k in talk if re.fullmatch(r"session_\d+", k) and talk[k]
    )
    for n in numbers:
        start = session_time(talk[f"session_{n}_date_time"])
        sessions.append(
            tuple(
                Turn(
                    t["dia_id"],
                    t["speaker"],
                    t["text"],
                    start + timedelta(seconds=TURN_SECONDS * i),
                )
                for i, t in enumerate(talk[f"session_{n}"])
            )
        )
    known = {t.dia_id for s in sessions for t in s}
    questions = []
    for i, qa in enumerate(sample["qa"]):
        kind = CATEGORIES.get(int(qa["category"]))
        evidence = evidence_ids(qa.get("evidence", []), known)
        if kind is None or not evidence:
            continue
        questions.append(Question(f"{sample['sample_id']}-q{i}", kind, qa["question"], evidence))
    return Conversation(str(sample["sample_id"]), tuple(sessions), tuple(questions))


def load_set(root: Path = DEFAULT_DIR) -> LocomoSet:
    data = json.loads((root / FILE).read_text(encoding="utf-8"))
    return LocomoSet("locomo-dev", "en", tuple(parse_conversation(s) for s in data))


def group_scope(conv: Conversation) -> ScopeKey:
    """The scope a bot gives the two people's group chat."""
    context = InboundContext(
        channel="bench", account_id="bench", peer_id="a", chat_type="group", chat_id=conv.id
    )
    return resolve_scope(context, DmScope.MAIN)


def anchored(hits: Sequence[Hit], by_time: dict[datetime, str]) -> list[str | None]:
    """The turn each hit is anchored on (None for a hit that is no turn)."""
    out: list[str | None] = []
    for hit in hits:
        at = hit.created_at.astimezone(UTC).replace(microsecond=0) if hit.created_at else None
        out.append(by_time.get(at) if at is not None else None)
    return out


def outcome(
    question: Question,
    path: str,
    hits: Sequence[Hit],
    turns: dict[str, Turn],
    by_time: dict[datetime, str],
) -> Outcome:
    wanted = {dia: i for i, dia in enumerate(question.evidence)}
    found = [
        frozenset({wanted[a]}) if a in wanted else frozenset() for a in anchored(hits, by_time)
    ]
    shown = [
        frozenset(i for dia, i in wanted.items() if finds(turns[dia].text, hit.text))
        for hit in hits
    ]
    scores = score(found, len(wanted), shown)
    return Outcome(
        question=question.id,
        type=question.type,
        path=path,
        scores=scores,
        found=[sorted(items) for items in found],
        kinds=[h.kind.value for h in hits],
    )


@dataclass(slots=True)
class Ticker:
    """The bot's scheduler on the simulated clock: every 60 s while messages arrive, every
    15 minutes in quiet gaps."""

    core: MemoryCore
    clock: ManualClock
    next_at: datetime
    ticks: int = 0
    busy_until: datetime = field(default_factory=lambda: datetime.min.replace(tzinfo=UTC))

    async def until(self, when: datetime) -> None:
        runtime = self.core.conversation
        while self.next_at <= when:
            self.clock.set(self.next_at)
            await runtime.tick(self.next_at)
            self.ticks += 1
            step = BUSY_TICK if self.next_at < self.busy_until else QUIET_TICK
            self.next_at += step

    def message_at(self, when: datetime) -> None:
        self.busy_until = when + BUSY_TICK
        if self.next_at > when + BUSY_TICK:
            self.next_at = when + BUSY_TICK


async def run_set(
    dataset: LocomoSet, overrides: Overrides, root: Path, *, floor: bool = False
) -> SetRun:
    """With `floor`, the questions are ranked by the plain-BM25 floor over the stored
    chunks (one list for both paths)."""
    run = SetRun()
    for conv in dataset.conversations:
        part = await run_conversation(conv, overrides, root / conv.id, floor=floor)
        run.outcomes.extend(part.outcomes)
        run.ingest_s += part.ingest_s
        run.query_s += part.query_s
        run.stored.update(part.stored)
    return run


async def run_conversation(
    conv: Conversation, overrides: Overrides, workspace: Path, *, floor: bool = False
) -> SetRun:
    config = apply_overrides(Config(workspace=str(workspace), timezone="UTC"), overrides)
    first = conv.sessions[0][0].at
    clock = ManualClock(first)
    scope = group_scope(conv)
    turns = {t.dia_id: t for s in conv.sessions for t in s}
    by_time = {t.at: t.dia_id for t in turns.values()}
    run = SetRun()
    started = time.perf_counter()
    async with MemoryCore.open(config, clock=clock) as core:
        ticker = Ticker(core, clock, first)
        for session in conv.sessions:
            for turn in session:
                await ticker.until(turn.at)
                clock.set(turn.at)
                ticker.message_at(turn.at)
                await core.conversation.turn(scope, turn.text, speaker=turn.speaker)
        asked = conv.asked_at
        await ticker.until(asked)
        clock.set(asked)
        await core.vectors_ready()
        run.ingest_s = time.perf_counter() - started
        counts: Counter[str] = Counter()
        for state, count in (await core.history.counts_by_scope()).get(scope.value, {}).items():
            counts[f"messages {state}"] += count
        counts["ticks"] += ticker.ticks
        run.stored.update(counts)
        asking = time.perf_counter()
        plain = await Floor.of(core, scope) if floor else None
        for question in conv.questions:
            if plain is not None:
                explicit = automatic = plain.search(question.question)
            else:
                explicit = await core.finder.search(
                    scope, SearchRequest(question.question, limit=10)
                )
                injection = await core.finder.recall(scope, question.question, [], now=asked)
                automatic = injection.hits
            for path, hits in (("explicit", explicit), ("automatic", automatic)):
                run.outcomes.append(outcome(question, path, hits, turns, by_time))
        run.query_s = time.perf_counter() - asking
    return run
