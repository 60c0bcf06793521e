"""The consolidation (docs/lifecycle.md) as pure steps, no I/O and no clock.

The phases, in order: decay (the lifecycle), filter (which raw events of the Layer 3
log are worth extracting), extract (those events into Layer 2 memories), verify (beliefs
against later facts), summarize (a week's events into one summary that replaces them in
ranking) and snapshot (Layer 1). The runner (`consolidation/consolidator.py`) does the I/O
and keeps each phase's progress; the functions here decide, so each decision is tested
without files and a second run over the same state decides nothing new.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from memory_core.base.entries import (
    ArchiveReason,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    class_of,
    confidence_of,
)
from memory_core.base.merge_values import Change, ChangeKind
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.base.wording import counted
from memory_core.consolidation.phase_names import PHASES as PHASES  # re-exported
from memory_core.consolidation.phase_names import Phase as Phase
from memory_core.longterm.scoring import (
    Status,
    contradict_belief,
    importance_of,
    initial_score,
    score_at,
    status_of,
)
from memory_core.notes.event_log import Event, EventKind


@dataclass(frozen=True, slots=True)
class PhaseReport:
    """What one phase of a run did: how many entries (or inputs) it changed, in words."""

    phase: Phase
    changes: int
    detail: str


# --- filter --------------------------------------------------------------------------

MIN_INPUT_CHARS = 4
"""Below this many non-space characters ("ok", "嗯", "谢谢") a message holds nothing to keep."""
_QUESTION = re.compile(r"[?？吗呢]\s*$")
_SMALL_TALK = re.compile(
    r"^(?:hi|hello|hey|thanks?|thank you|ok(?:ay)?|good (?:morning|night)|bye|"
    r"你好|您好|谢谢|好的|嗯+|哈+|早上好|晚安|再见)[\s!！.。~～]*$",
    re.I,
)


@dataclass(frozen=True, slots=True, order=True)
class EventRef:
    """Where an event is: the day's log and its place among the day's readable events
    (0-based; the log is append-only, so a place never changes). Filter hands refs, not
    texts, to extract, so inputs waiting there leave no copy for `chatmem purge` to miss."""

    day: str
    line: int


def worth_extracting(event: Event) -> bool:
    """The offline filter: something the person said that is a statement, not a command,
    a question or small talk. (A question can still hold a fact, but the rules that turn
    text into memories only read statements, and the model's filter sees every input.)"""
    if event.kind is not EventKind.INPUT:
        return False
    text = str(event.data.get("text", "")).strip()
    if len("".join(text.split())) < MIN_INPUT_CHARS or text.startswith("/"):
        return False
    return not (_QUESTION.search(text) or _SMALL_TALK.match(text))


def inputs_to_consider(
    events: Iterable[tuple[EventRef, Event]],
    after: EventRef | None,
    done_sessions: Iterable[str],
    open_sessions: Iterable[str],
) -> tuple[list[tuple[EventRef, Event]], EventRef | None]:
    """The input events past `after` whose session has not reached long-term memory
    another way, and the cursor to resume from next time.

    A session already extracted (its `/new`, its idle close) is skipped: extracting it
    again would only restate what it gave. An open session is left for later, and the
    cursor stops before its first event so the next run sees it again once it closed.
    """
    done, still_open = set(done_sessions), set(open_sessions)
    chosen: list[tuple[EventRef, Event]] = []
    cursor = after
    held = False
    for ref, event in events:
        if after is not None and ref <= after:
            continue
        if event.session in still_open:
            held = True
        if not held:
            cursor = ref
        if (
            event.kind is not EventKind.INPUT
            or event.session in done
            or event.session in still_open
        ):
            continue
        chosen.append((ref, event))
    return chosen, cursor


# --- verify ---------------------------------------------------------------------------

SAME_SUBJECT = 0.5
"""Share of the smaller text's terms the two must have in common to speak of one thing."""
PROMOTE_AT = 0.9
"""A belief confirmed up to this confidence is a fact from then on."""
_NEGATION = re.compile(
    r"\b(?:not|no longer|never|don't|doesn't|didn't|isn't|aren't|wasn't|won't|stopped|quit)\b"
    r"|n't\b|不|没|别|戒了|再也",
    re.I,
)


class Verdict(StrEnum):
    CONFIRMED = "confirmed"
    CONTRADICTED = "contradicted"
    UNRELATED = "unrelated"


@dataclass(frozen=True, slots=True)
class Judgement:
    belief: str
    fact: str
    verdict: Verdict


def same_subject(a: set[str], b: set[str]) -> bool:
    return bool(a and b) and len(a & b) / min(len(a), len(b)) >= SAME_SUBJECT


def polarity_verdict(belief: str, fact: str) -> Verdict:
    """For two texts on one subject: opposite polarity ("likes" / "no longer likes")
    contradicts, the same confirms."""
    if bool(_NEGATION.search(belief)) != bool(_NEGATION.search(fact)):
        return Verdict.CONTRADICTED
    return Verdict.CONFIRMED


MAX_FACTS_PER_BELIEF = 20
"""The newest facts on a belief's subject that one run weighs it against."""
COMMON_POSTINGS = 50
"""A word in more facts than this (or a twentieth of them) is too common to find a
belief's subject by: a fact sharing only such words with a belief is not weighed."""


def verification_pairs(
    entries: Sequence[MemoryEntry],
    checked_through: datetime | None,
    when: datetime,
    terms: Callable[[str], list[str]],
) -> list[tuple[MemoryEntry, list[MemoryEntry]]]:
    """Each Active belief with the facts on its subject not weighed yet: created after
    it, after the previous run's instant and by `when`. A pair is weighed once.

    Facts are found through a term index, not by pairing every belief with every fact:
    a scope of 10 000 entries has millions of pairs and a handful on one subject."""
    beliefs = [
        e for e in entries if class_of(e) is MemoryClass.BELIEF and status_of(e) is Status.ACTIVE
    ]
    if checked_through is not None and checked_through > when:
        checked_through = None  # a run "as of" a later day happened: check all again
    facts = [
        e
        for e in entries
        if class_of(e) is MemoryClass.FACT
        and e.created_at <= when
        and (checked_through is None or e.created_at > checked_through)
    ]
    if not beliefs or not facts:
        return []
    fact_terms = {f.id: set(terms(f.content)) for f in facts}
    postings: dict[str, list[MemoryEntry]] = {}
    for fact in facts:
        for term in fact_terms[fact.id]:
            postings.setdefault(term, []).append(fact)
    common = max(COMMON_POSTINGS, len(facts) // 20)
    out = []
    for belief in beliefs:
        own = set(terms(belief.content))
        # Candidates come through the belief's rarer words ("user", "喜欢" name half the
        # scope): the exact test below then counts every shared word.
        rare = [t for t in own if len(postings.get(t, ())) <= common] or list(own)
        shared: dict[str, MemoryEntry] = {}
        for term in rare:
            for fact in postings.get(term, ()):
                if fact.created_at > belief.created_at and fact.id != belief.id:
                    shared[fact.id] = fact
        related = [f for f in shared.values() if same_subject(own, fact_terms[f.id])]
        if related:
            related.sort(key=lambda f: (f.created_at, f.id))
            out.append((belief, related[-MAX_FACTS_PER_BELIEF:]))
    return out


def apply_judgements(
    entries: Sequence[MemoryEntry],
    judgements: Iterable[Judgement],
    when: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
) -> tuple[list[MemoryEntry], list[Change]]:
    """A contradicted belief loses confidence; a confirmed one gains
    it as reinforcement gains score, and becomes a fact at `PROMOTE_AT`. Each (belief,
    fact) pair leaves a mark in the belief's sessions, so a run resumed after a crash
    does not apply it twice."""
    by_id = {e.id: e for e in entries}
    changes: list[Change] = []
    for judgement in judgements:
        belief = by_id.get(judgement.belief)
        mark = f"verify:{judgement.fact}"
        if (
            belief is None
            or judgement.verdict is Verdict.UNRELATED
            or mark in belief.sessions
            or class_of(belief) is not MemoryClass.BELIEF
        ):
            continue
        before = confidence_of(belief)
        if judgement.verdict is Verdict.CONTRADICTED:
            updated = contradict_belief(belief, policy)
        else:
            raised = round(before + (1.0 - before) * policy.reinforce_rate, 4)
            updated = belief.with_(confidence=raised)
            if raised >= PROMOTE_AT:
                updated = updated.with_(memory_class=MemoryClass.FACT)
        updated = updated.with_(sessions=(*belief.sessions, mark)[-_MARKS:])
        by_id[belief.id] = updated
        detail = (
            f"belief {judgement.verdict.value} by [{judgement.fact}]: confidence "
            f"{before:.2f} -> {confidence_of(updated):.2f}"
        )
        if updated.memory_class is MemoryClass.FACT:
            detail += ", now a fact"
        score = score_at(belief, when, policy)
        changes.append(
            Change(
                ChangeKind.EDITED, belief.id, score, score, belief.content, belief.category, detail
            )
        )
    return list(by_id.values()), changes


_MARKS = 16
"""Sessions and verification marks an entry keeps (the newest)."""

# --- summarize ---------------------------------------------------------------------------

MIN_EVENTS = 2
"""A week with a single event keeps it as it is: one event is its own summary."""
MAX_SUMMARY_CHARS = 1200
"""A summary longer than this is split: one entry stays one readable paragraph."""


@dataclass(frozen=True, slots=True)
class SummaryPlan:
    """A summary to add and the events it replaces in ranking."""

    id: str
    label: str
    covers: tuple[str, ...]
    text: str
    """The offline text (the events' own, joined); a model may write a better one."""


WINDOW = timedelta(days=7)
"""Events this close to the oldest one of a group are summarized together."""


def windows(events: Sequence[MemoryEntry]) -> list[list[MemoryEntry]]:
    """Events in runs of `WINDOW` from the oldest: a Sunday and the Monday after it are
    one stretch of life, which calendar weeks would cut apart."""
    ordered = sorted(events, key=lambda e: (e.created_at, e.id))
    groups: list[list[MemoryEntry]] = []
    for event in ordered:
        if groups and event.created_at < groups[-1][0].created_at + WINDOW:
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups


def plan_summaries(
    entries: Sequence[MemoryEntry],
    when: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
    min_age: timedelta | None = None,
) -> list[SummaryPlan]:
    """Group the events older than the grace period into windows of a week; each window
    with at least `MIN_EVENTS` becomes one summary (or a few, when long). Events their
    score alone archived are taken too (a summary keeps what they said in the ranking,
    at a slower rate); one archived by hand or already summarized is not, nor a pinned
    one. Events still in their grace period wait: their week may not be over."""
    age = min_age if min_age is not None else timedelta(days=policy.grace_days)
    due = [
        entry
        for entry in entries
        if class_of(entry) is MemoryClass.EVENT
        and not entry.pinned
        and entry.archived is None
        and status_of(entry, policy) is not Status.FORGOTTEN
        and entry.created_at <= when - age
    ]
    plans = []
    for window in windows(due):
        if len(window) < MIN_EVENTS:
            continue
        for group in _chunks(window, MAX_SUMMARY_CHARS):
            first, last = group[0].created_at.date(), group[-1].created_at.date()
            label = first.isoformat() if first == last else f"{first} to {last}"
            covers = tuple(e.id for e in group)
            text = f"{label}: " + "; ".join(
                f"{e.created_at.date().isoformat()} {e.content.strip()}" for e in group
            )
            plans.append(SummaryPlan(summary_id(covers), label, covers, text))
    return plans


def _chunks(events: list[MemoryEntry], limit: int) -> list[list[MemoryEntry]]:
    groups: list[list[MemoryEntry]] = [[]]
    size = 0
    for event in events:
        length = len(event.content) + 14
        if groups[-1] and size + length > limit:
            groups.append([])
            size = 0
        groups[-1].append(event)
        size += length
    # An event left alone by the cut joins its neighbour: every event is covered, and a
    # summary of one event would only restate it.
    joined: list[list[MemoryEntry]] = []
    for group in groups:
        if joined and (len(group) < MIN_EVENTS or len(joined[-1]) < MIN_EVENTS):
            joined[-1].extend(group)
        else:
            joined.append(group)
    return joined


def summary_id(covers: Sequence[str]) -> str:
    """Fixed by what it covers, so a repeated plan names the same summary."""
    digest = hashlib.sha1("\n".join(sorted(covers)).encode("utf-8")).hexdigest()
    return f"sum{digest[:8]}"


def apply_summaries(
    entries: Sequence[MemoryEntry],
    plans: Iterable[SummaryPlan],
    when: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
    texts: Mapping[str, str] | None = None,
) -> tuple[list[MemoryEntry], list[Change]]:
    """Add each summary and archive the events it covers, in one result: the file gets
    both or neither. The summary starts where its best event stands (never below a
    medium start), keeps their hits and sessions, and takes the highest importance."""
    by_id = {e.id: e for e in entries}
    changes: list[Change] = []
    for plan in plans:
        covered = [by_id[i] for i in plan.covers if i in by_id]
        if plan.id in by_id or len(covered) < MIN_EVENTS:
            continue
        current = [score_at(e, when, policy) for e in covered]
        importance = max(
            (importance_of(e) for e in covered),
            key=[Importance.LOW, Importance.MEDIUM, Importance.HIGH].index,
        )
        sessions = tuple(dict.fromkeys(s for e in covered for s in e.sessions))[-_MARKS:]
        content = (texts or {}).get(plan.id) or plan.text
        summary = MemoryEntry(
            id=plan.id,
            content=content,
            category="experience",
            score=max(max(current), initial_score(Importance.MEDIUM)),
            created_at=when,
            last_activated=when,
            scored_at=when,
            hits=sum(e.hits for e in covered),
            confidence=None,
            sessions=sessions,
            memory_class=MemoryClass.SUMMARY,
            granularity=Granularity.COMPOSITE,
            importance=importance,
        )
        by_id[summary.id] = summary
        changes.append(
            Change(
                ChangeKind.ADDED,
                summary.id,
                None,
                summary.score,
                summary.content,
                summary.category,
                f"summary of {counted(len(covered), 'event')}, {plan.label}",
            )
        )
        for entry, score in zip(covered, current, strict=True):
            by_id[entry.id] = entry.with_(
                score=score, scored_at=when, archived=ArchiveReason.SUMMARIZED
            )
            changes.append(
                Change(
                    ChangeKind.ARCHIVED,
                    entry.id,
                    score,
                    score,
                    entry.content,
                    entry.category,
                    f"summarized in [{summary.id}]",
                )
            )
    return list(by_id.values()), changes
