"""`pooled-zh`: many people's short Chinese first-person messages in ONE scope.

A stress set in the shape of the held-out Chinese daily-life data of issue 35 (many
people's statements about family, friends by name, places, items and dated events,
hundreds to thousands of messages in one scope, texts that nearly repeat across
people), built at run time from public material already in the project and never
copied into it:

* MADial-Bench zh (its `zh` folder, outside the repository): every memory of its users
  (Bart, Lisa) becomes a message that user sent on the memory's day (one session per
  user and day, from 12:00 for Bart and 13:00 for Lisa, a minute apart); each dialogue
  becomes a question: its pending line (`Dialogue.query`), wanting the memories the
  benchmark labels relevant (`relevant-id`). Near-repeats are kept (the merge that
  deduplicates long-term entries never sees messages).
* the labelled Chinese sets (`bench/data/recall_zh-*.json`): each conversation's user
  turns, under the user's name, at their own minutes; its questions want their labelled
  evidence turns. The assistant's turns are left out (the held-out messages are
  statements, not exchanges), and so are the few questions whose evidence is one.

Every source is moved in time by whole weeks (weekdays, and so "上周三", keep their
meaning) so that all of them end in the same weeks, as people writing at the same
time: each labelled conversation's first question and MADial's asking day (the day
after its newest memory) fall in the week up to the latest first question. All the
messages are recorded through `MemoryCore.record_session` into one group scope, as a
bot stores a group's talk (`history`), then archived by the bot's own archive pass at
the first question (`archived`); each question is asked at its own (moved) time, in
time order. A hit counts for the message it is anchored on, known by its second (each
labelled conversation's turns sit at their own second of the minute).
Types: a labelled question keeps its type; a MADial line is `open` (a chat line, not a
question).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path

from memory_core.base.clock import ManualClock
from memory_core.base.records import Hit, RecordedMessage
from memory_core.base.scope import DmScope, InboundContext, ScopeKey, resolve_scope
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from testkit.quality import labelled, madial
from testkit.quality.floor import Floor
from testkit.quality.labelled import Outcome, SetRun
from testkit.quality.metrics import found_turns, score
from testkit.quality.setup import RAW_FOREVER, Overrides, bench_config

NAME = "pooled-zh"
WEEK = timedelta(days=7)
MADIAL_HOURS = (12, 13)
"""The hour each MADial user's messages of a day start at (users in id order)."""


@dataclass(frozen=True, slots=True)
class Message:
    key: str
    """'<conversation>/<session>/<turn>' or 'madial/<memory id>'."""
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class PooledSession:
    id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class PooledQuestion:
    id: str
    type: str
    question: str
    recent: tuple[str, ...]
    asked_at: datetime
    evidence: tuple[str, ...]
    """Message keys."""


@dataclass(frozen=True, slots=True)
class PooledSet:
    name: str
    language: str
    sessions: tuple[PooledSession, ...]
    questions: tuple[PooledQuestion, ...]

    def limited(self, limit: int | None) -> PooledSet:
        return self if limit is None else replace(self, questions=self.questions[:limit])

    def messages(self) -> dict[str, Message]:
        return {m.key: m for s in self.sessions for m in s.messages}


def weeks_to(moment: datetime, target: datetime) -> timedelta:
    """The whole weeks that move `moment` into the week ending at `target`."""
    return WEEK * ((target - moment) // WEEK)


def _labelled_part(
    conv: labelled.Conversation, shift: timedelta, second: int
) -> tuple[list[PooledSession], list[PooledQuestion]]:
    """The conversation's user turns moved by `shift`, each at second `second` of its
    minute: two people's turns at the same minute stay two anchors."""
    shift += timedelta(seconds=second)
    sessions = []
    users: set[str] = set()
    for s in conv.sessions:
        messages = []
        for i, turn in enumerate(s.turns):
            if turn.role != "user":
                continue
            key = f"{conv.id}/{s.id}/{i}"
            users.add(key)
            messages.append(Message(key, conv.user, turn.text, s.at(i) + shift))
        sessions.append(PooledSession(f"{conv.id}-{s.id}", tuple(messages)))
    questions = []
    for q in conv.questions:
        evidence = tuple(dict.fromkeys(f"{conv.id}/{sid}/{i}" for sid, i in q.evidence))
        if all(e in users for e in evidence):
            questions.append(
                PooledQuestion(q.id, q.type, q.question, (), q.asked_at + shift, evidence)
            )
    return sessions, questions


def _madial_part(
    data: madial.MadialSet, target: datetime
) -> tuple[list[PooledSession], list[PooledQuestion]]:
    shift = weeks_to(data.asked_at(), target)
    names = {d.user: d.lines[1].speaker or f"user {d.user}" for d in data.dialogues}
    hours = dict(zip(sorted(names), MADIAL_HOURS, strict=False))
    days: dict[tuple[int, date], list[madial.Memory]] = {}
    for m in sorted(data.memories, key=lambda m: (m.day, m.id)):
        days.setdefault((m.user, m.day), []).append(m)
    sessions = []
    for (user, day), memories in days.items():
        start = datetime.combine(day, dtime(hours.get(user, 14)), tzinfo=UTC) + shift
        messages = tuple(
            Message(
                f"madial/{m.id}",
                names.get(user, f"user {user}"),
                m.text,
                start + timedelta(minutes=i),
            )
            for i, m in enumerate(memories)
        )
        sessions.append(PooledSession(f"madial-{user}-{day}", messages))
    questions = []
    for d in data.dialogues:
        pending, recent = d.query()
        evidence = tuple(dict.fromkeys(f"madial/{r}" for r in d.relevant))
        questions.append(
            PooledQuestion(
                f"madial-zh-{d.index}",
                "open",
                pending,
                tuple(recent),
                data.asked_at() + shift,
                evidence,
            )
        )
    return sessions, questions


def build(data: madial.MadialSet, sets: Sequence[labelled.LabelledSet]) -> PooledSet:
    """The pooled set from MADial zh and the labelled Chinese sets (pure)."""
    convs = [c for s in sets for c in s.conversations]
    firsts = [min(q.asked_at for q in c.questions) for c in convs if c.questions]
    target = max(firsts) if firsts else data.asked_at()
    sessions, questions = _madial_part(data, target)
    for n, conv in enumerate(convs, start=1):
        if conv.questions:
            shift = weeks_to(min(q.asked_at for q in conv.questions), target)
            part = _labelled_part(conv, shift, n)
            sessions.extend(part[0])
            questions.extend(part[1])
    sessions = [s for s in sessions if s.messages]
    sessions.sort(key=lambda s: (s.messages[0].at, s.id))
    questions.sort(key=lambda q: (q.asked_at, q.id))
    _check_seconds(sessions)
    return PooledSet(NAME, "zh", tuple(sessions), tuple(questions))


def _check_seconds(sessions: Sequence[PooledSession]) -> None:
    """Each message has its own second (the anchor a hit is known by)."""
    seen: Counter[datetime] = Counter(second(m.at) for s in sessions for m in s.messages)
    clashes = [at for at, n in seen.items() if n > 1]
    if clashes:
        raise ValueError(f"{NAME}: {len(clashes)} messages share a second, e.g. {clashes[0]}")


def second(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(microsecond=0)


def load_set(madial_root: Path, labelled_paths: Sequence[Path]) -> PooledSet:
    return build(madial.load_set(madial_root, "zh"), [labelled.load_set(p) for p in labelled_paths])


def group_scope() -> ScopeKey:
    """One group chat that every person writes in."""
    context = InboundContext(
        channel="bench", account_id="bench", peer_id="pool", chat_type="group", chat_id=NAME
    )
    return resolve_scope(context, DmScope.MAIN)


async def run_set(
    dataset: PooledSet,
    modes: Sequence[str],
    overrides: Overrides,
    workspace: Path,
    *,
    floor: bool = False,
) -> dict[str, SetRun]:
    """Store every session in one scope, ask (`history`), archive as the bot does at
    the first question, ask again (`archived`)."""
    config = bench_config(workspace, overrides, timezone="Etc/GMT-8", raw_days=RAW_FOREVER)
    first = dataset.sessions[0].messages[0].at
    clock = ManualClock(first)
    scope = group_scope()
    runs: dict[str, SetRun] = {}
    started = time.perf_counter()
    async with MemoryCore.open(config, clock=clock) as core:
        for session in dataset.sessions:
            clock.set(session.messages[-1].at + timedelta(minutes=1))
            await core.record_session(
                scope,
                session.id,
                session.messages[0].at,
                [RecordedMessage("user", m.speaker, m.text, m.at) for m in session.messages],
            )
        await core.vectors_ready()
        if "history" in modes:
            runs["history"] = await _ask(core, scope, dataset, clock, started, floor)
            started = time.perf_counter()
        if "archived" in modes:
            clock.set(dataset.questions[0].asked_at)
            report = await core.conversation.archive(scope)
            await core.vectors_ready()
            run = runs["archived"] = await _ask(core, scope, dataset, clock, started, floor)
            run.stored["archive files"] += len(report.files)
            run.stored["archived verbatim"] += report.moved
    return runs


async def _ask(
    core: MemoryCore,
    scope: ScopeKey,
    dataset: PooledSet,
    clock: ManualClock,
    started: float,
    floor: bool,
) -> SetRun:
    run = SetRun(ingest_s=time.perf_counter() - started)
    for state, count in (await core.history.counts_by_scope()).get(scope.value, {}).items():
        run.stored[f"messages {state}"] += count
    asking = time.perf_counter()
    messages = dataset.messages()
    anchors = {second(m.at): m.key for m in messages.values()}
    plain = await Floor.of(core, scope) if floor else None
    for q in dataset.questions:
        clock.set(max(clock(), q.asked_at))
        if plain is not None:
            explicit = automatic = plain.search(q.question)
        else:
            explicit = await core.finder.search(scope, SearchRequest(q.question, limit=10))
            injection = await core.finder.recall(scope, q.question, list(q.recent), now=q.asked_at)
            automatic = injection.hits
        for path, hits in (("explicit", explicit), ("automatic", automatic)):
            run.outcomes.append(outcome(q, path, hits, anchors, messages))
    run.query_s = time.perf_counter() - asking
    return run


def outcome(
    question: PooledQuestion,
    path: str,
    hits: Sequence[Hit],
    anchors: Mapping[datetime, str],
    messages: Mapping[str, Message],
) -> Outcome:
    """A hit counts for the message it is anchored on (known by its second)."""
    index = {key: i for i, key in enumerate(question.evidence)}
    found = [
        frozenset({index[a]})
        if h.created_at is not None and (a := anchors.get(second(h.created_at))) in index
        else frozenset()
        for h in hits
    ]
    wanted = [messages[key].text for key in question.evidence]
    shown = found_turns(wanted, [h.text for h in hits])
    return Outcome(
        question=question.id,
        type=question.type,
        path=path,
        scores=score(found, len(wanted), shown),
        found=[sorted(items) for items in found],
        kinds=[h.kind.value for h in hits],
    )
