"""The long-term memory entry, the small vocabularies around it, and the order entries are
kept in (`sort_entries`: MEMORY.md's sections, the prompt, merge results)."""

from __future__ import annotations

import secrets
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from itertools import compress, count, islice, repeat
from operator import add, attrgetter, eq, gt, is_


class Importance(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


CATEGORIES: tuple[str, ...] = (
    "preference",
    "fact",
    "experience",
    "workflow",
    "decision",
    "skill_usage",
    "todo",
)
"""The built-in categories; files may carry others (a person may invent one), which are kept."""


class MemoryClass(StrEnum):
    """How a memory ages : each class has its own decay rate."""

    FACT = "fact"
    """Stable knowledge about the user or the world; fades slowest (~87-day half-life)."""
    BELIEF = "belief"
    """An inference not stated outright; fades fast (~10 days) unless confirmed."""
    SUMMARY = "summary"
    """A consolidation's digest of several events (~28 days)."""
    EVENT = "event"
    """Something that happened once; fades fastest (~5 days), summaries outlive it."""


class Granularity(StrEnum):
    ATOMIC = "atomic"
    """One statement."""
    COMPOSITE = "composite"
    """Several statements folded together (a summary, a merged profile)."""


CATEGORY_CLASSES: dict[str, MemoryClass] = {category: MemoryClass.FACT for category in CATEGORIES}
"""The class an entry has when nothing gave it one. Every built-in category is durable
knowledge about the user (an "experience" is 经验/处理流程, a procedure learned, not a
thing that happened; a todo is archived by its expiry, not by fading), so each is a fact,
and so is a category a person invented: the slow rate loses nothing by surprise. Beliefs
and events come from extraction (the model's `memory_class`) or `chatmem capture
--class`, summaries from consolidation."""


def class_of(entry: MemoryEntry) -> MemoryClass:
    """The entry's own class, else its category's."""
    return entry.memory_class or CATEGORY_CLASSES.get(entry.category, MemoryClass.FACT)


def granularity_of(entry: MemoryEntry) -> Granularity:
    if entry.granularity is not None:
        return entry.granularity
    return Granularity.COMPOSITE if class_of(entry) is MemoryClass.SUMMARY else Granularity.ATOMIC


DEFAULT_CONFIDENCE: dict[MemoryClass, float] = {
    MemoryClass.FACT: 1.0,
    MemoryClass.BELIEF: 0.6,
    MemoryClass.SUMMARY: 0.9,
    MemoryClass.EVENT: 1.0,
}
"""Confidence of an entry that records none: stated things are sure, an inference is not."""


def confidence_of(entry: MemoryEntry) -> float:
    if entry.confidence is not None:
        return entry.confidence
    return DEFAULT_CONFIDENCE[class_of(entry)]


class ArchiveReason(StrEnum):
    """Why an entry sits in Archived although its score alone would not put it there."""

    MANUAL = "manual"
    EXPIRED = "expired"
    SUMMARIZED = "summarized"
    """A consolidation's summary covers it: the summary ranks in its place, and recall
    still finds the event itself."""


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One `### [id] category | score | last_activated | hits` block of MEMORY.md.

    `score` is the value as of `scored_at`; decay is always computed forward from that
    pair, so applying it twice at the same instant changes nothing.
    """

    id: str
    content: str
    category: str
    score: float
    created_at: datetime
    last_activated: datetime
    scored_at: datetime
    hits: int = 0
    source_session: str | None = None
    confidence: float | None = None
    expires_at: datetime | None = None
    pinned: bool = False
    archived: ArchiveReason | None = None
    sessions: tuple[str, ...] = field(default=())
    """Recent sessions that created or reinforced the entry, newest last (idempotency)."""
    memory_class: MemoryClass | None = None
    """Given by extraction or consolidation; None means the category's (`class_of`)."""
    granularity: Granularity | None = None
    importance: Importance | None = None
    """As extraction judged it, for the ranking's importance bonus; None for entries
    written before it was kept (the bonus then counts them medium)."""
    speaker: str | None = None
    """Who said it, in a group scope (the member's name); None elsewhere and for entries
    written before it was kept. Decides whose self-fact an entry is (longterm/claims.py)."""
    claim_on: str | None = None
    """The id of the member's self-fact this entry disputes: set, the entry is another
    member's claim (a belief shown as "(claim by <speaker>)"), never an update of it."""
    speaker_id: str | None = None
    """The platform id of the member who said it, in a group scope (`normalise_id`'s
    spelling), when the front end gave one: what `chatmem erase --person` finds the
    member's entries by. None elsewhere and for older entries."""

    def with_(self, **changes: object) -> MemoryEntry:
        return replace(self, **changes)  # type: ignore[arg-type]

    def rescored(self, score: float, when: datetime) -> MemoryEntry:
        """`with_(score=..., scored_at=...)` without `dataclasses.replace`'s introspection:
        decay rescores every entry at every merge, so this is the hot path."""
        fields = EntryFields.of(self)
        fields.score = score
        fields.scored_at = when
        return build_entry(fields)


class EntryFields:
    """`MemoryEntry`'s fields, settable: filled by plain attribute stores, then turned
    into the entry itself by `build_entry`. The one place besides `MemoryEntry` that lists
    them, instead of a 20-parameter constructor written out at every hot call.

    A frozen dataclass's `__init__` stores every field through `object.__setattr__`, a
    slow call per field (about 3 us per entry here), and decay builds one entry per
    decayed entry at every merge, the parser one per block of MEMORY.md. An instance of
    this class is filled with plain stores and then made a real `MemoryEntry` by
    assigning `__class__`, which CPython allows because both classes have exactly the
    same slots. The result is indistinguishable from one made by `MemoryEntry(...)`: same
    type, fields, equality and hash, still frozen. Its slots are MemoryEntry's own, so the
    layouts cannot drift apart; the annotations below only tell mypy the types. Every
    field must be set before `build_entry`: an unset one is an AttributeError when read.
    """

    __slots__ = MemoryEntry.__slots__
    id: str
    content: str
    category: str
    score: float
    created_at: datetime
    last_activated: datetime
    scored_at: datetime
    hits: int
    source_session: str | None
    confidence: float | None
    expires_at: datetime | None
    pinned: bool
    archived: ArchiveReason | None
    sessions: tuple[str, ...]
    memory_class: MemoryClass | None
    granularity: Granularity | None
    importance: Importance | None
    speaker: str | None
    claim_on: str | None
    speaker_id: str | None

    @staticmethod
    def blank() -> EntryFields:
        """Fields none of which is set yet (the parsers set them all)."""
        return _new_object(EntryFields)

    @staticmethod
    def of(entry: MemoryEntry) -> EntryFields:
        """A copy of `entry`'s fields, to change some and build a new entry (decay)."""
        fields = _new_object(EntryFields)
        fields.id = entry.id
        fields.content = entry.content
        fields.category = entry.category
        fields.score = entry.score
        fields.created_at = entry.created_at
        fields.last_activated = entry.last_activated
        fields.scored_at = entry.scored_at
        fields.hits = entry.hits
        fields.source_session = entry.source_session
        fields.confidence = entry.confidence
        fields.expires_at = entry.expires_at
        fields.pinned = entry.pinned
        fields.archived = entry.archived
        fields.sessions = entry.sessions
        fields.memory_class = entry.memory_class
        fields.granularity = entry.granularity
        fields.importance = entry.importance
        fields.speaker = entry.speaker
        fields.claim_on = entry.claim_on
        fields.speaker_id = entry.speaker_id
        return fields


_new_object = object.__new__
_set_attribute = object.__setattr__


def build_entry(fields: EntryFields) -> MemoryEntry:
    """`fields` made the `MemoryEntry` they describe (the same object, frozen from now
    on), about three times faster than `MemoryEntry(...)`. For the hot paths only (decay
    at every merge, parsing every block of MEMORY.md); see `EntryFields`."""
    _set_attribute(fields, "__class__", MemoryEntry)
    return fields  # type: ignore[return-value]


def new_entry_id(taken: Container[str] = frozenset()) -> str:
    """Short random hex id like `a1b2c3`, widened to 8 digits, never reused.

    `taken` only needs `in`: merge passes its dict's keys rather than copying them."""
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def is_valid_entry_id(value: str) -> bool:
    """1 to 32 characters, each alphanumeric or `-`/`_`.

    `str.isalnum` on the whole id answers the usual hex id in one call; only ids that
    contain something else are checked a character at a time."""
    return 1 <= len(value) <= 32 and (
        value.isalnum() or all(c.isalnum() or c in "-_" for c in value)
    )


SESSION_MEMORY = 8
"""How many recent session ids an entry remembers for idempotent re-extraction."""


_by_score = attrgetter("score")
_last_activated = attrgetter("last_activated")
_tzinfo = attrgetter("tzinfo")


def _sort_key(entry: MemoryEntry) -> tuple[float, float, str]:
    return (-entry.score, -entry.last_activated.timestamp(), entry.id)


def _tie_key(entry: MemoryEntry) -> tuple[float, str]:
    return (-entry.last_activated.timestamp(), entry.id)


def sort_entries(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """Highest score first; ties by most recently activated, then id for stability.

    The order of `sorted(entries, key=_sort_key)`, computed faster: most scores differ, so
    one sort on the score alone (a C-level key) places nearly everything, and only runs of
    equal scores need the full key, whose `timestamp()` call dominated the old cost. The
    runs (thousands in a big file: scores are rounded) are found in C, and most are
    already in order (the file was written sorted): only the others are sorted.
    """
    items = list(entries)
    ordered = sorted(items, key=_by_score, reverse=True)
    scores = list(map(_by_score, ordered))
    total = sum(scores)
    if total != total:
        # A NaN score (or +inf and -inf together) has no consistent place in the score-only
        # order; the full key gives the order this function always gave.
        return sorted(items, key=_sort_key)
    # k where the score at k equals the next one: k and k + 1 are in a run.
    tied = list(compress(count(), map(eq, scores, islice(scores, 1, None))))
    if not tied:
        return ordered
    start = end = -2
    in_order = True
    for index, fine in zip(tied, _in_order(ordered, tied), strict=True):
        if index != end - 1:  # a new run
            if not in_order:
                ordered[start:end] = sorted(ordered[start:end], key=_tie_key)
            start = index
            in_order = True
        end = index + 2
        in_order = in_order and fine
    if not in_order:
        ordered[start:end] = sorted(ordered[start:end], key=_tie_key)
    return ordered


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EARLIEST = _EPOCH - timedelta(seconds=2**33 - 1)
_LATEST = _EPOCH + timedelta(seconds=2**33 - 1)


def _in_order(ordered: list[MemoryEntry], tied: list[int]) -> Iterable[bool]:
    """For each k of `tied`: whether `_tie_key` surely puts `ordered[k]` before
    `ordered[k + 1]` (False when it cannot tell), compared in C.

    When every time is in UTC, `timestamp()` is the microseconds since 1970 divided by
    10**6, correctly rounded, and within 2**33 seconds of 1970 a later time is a greater
    float: a strictly later `last_activated` is a strictly smaller key, whatever the id.
    """
    earlier = list(map(_last_activated, map(ordered.__getitem__, tied)))
    later = list(map(_last_activated, map(ordered.__getitem__, map(add, tied, repeat(1)))))
    if (
        all(map(is_, map(_tzinfo, earlier), repeat(UTC)))
        and all(map(is_, map(_tzinfo, later), repeat(UTC)))
        and min(earlier) >= _EARLIEST
        and max(earlier) <= _LATEST
        and min(later) >= _EARLIEST
        and max(later) <= _LATEST
    ):
        return map(gt, earlier, later)
    return repeat(False, len(tied))
