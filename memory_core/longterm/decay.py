"""The pass every merge begins and ends with: decay each entry to `now`, expire overdue
todos, then forget what fell below the forget line and record archive/restore transitions.

Pure. Apart from adding candidates because it runs over every entry of a file at every
merge (and alone in `decay_all`, a consolidation with nothing to add), so it is written
out for speed, while a candidate touches only the entries it resembles.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import compress, repeat
from operator import attrgetter, is_, is_not, not_, or_

from memory_core.base.entries import (
    CATEGORY_CLASSES,
    EntryFields,
    MemoryClass,
    MemoryEntry,
    build_entry,
    sort_entries,
)
from memory_core.base.merge_values import Change, ChangeKind, MergeResult, build_change
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm.scoring import Status, expire


def decay_all(
    entries: Sequence[MemoryEntry], now: datetime, policy: ScoringPolicy = DEFAULT_POLICY
) -> MergeResult:
    """Decay, expire, archive and forget as of `now`: consolidation with no candidates
    (what `merge.merge` gives for no candidates and no session)."""
    try:
        few = _decay_few(entries, now, policy)
    except (ArithmeticError, TypeError, ValueError):
        few = None  # the plain pass raises it as it always did
    if few is None:
        return _decay_every(entries, now, policy)
    kept, changes = few
    return MergeResult(entries=sort_entries(kept), changes=changes)


def _decay_few(
    entries: Sequence[MemoryEntry], now: datetime, policy: ScoringPolicy
) -> tuple[list[MemoryEntry], list[Change]] | None:
    """`decay_all` but its sort, looking closely only at the entries it may change; None
    when an id is there twice (every entry is then settled: `_decay_every`).

    At a close nearly every entry is left as it is: decay only changes an entry whose
    score is below the forget line (or NaN), that has an expiry, or whose days since
    its activation, past the grace days, outnumber those its score already paid for
    (`decayed_score`'s days > 0 is exactly that); pinned entries never decay. The others
    cost a look at a few fields, and no dict of them all is built (the ids' set in C is
    half its cost). The rest goes through `decay_into` and `settle` in the entries'
    order, so the changes come in the same order.
    """
    if len(set(map(_id_of, entries))) != len(entries):
        return None
    forget_below = policy.forget_below
    grace_days = policy.grace_days
    places: list[int] = []
    keep = places.append
    for place, entry in enumerate(entries):
        if not entry.score >= forget_below or entry.expires_at is not None:
            keep(place)
        elif not entry.pinned:
            last_activated = entry.last_activated
            accrued = (now - last_activated).days
            if accrued > grace_days and accrued > (entry.scored_at - last_activated).days:
                keep(place)
    some = [entries[place] for place in places]
    changes: list[Change] = []
    before_status: dict[str, Status] = {}
    decayed: dict[str, MemoryEntry] = {}
    decay_into(some, now, policy, before_status, decayed, changes)
    result = list(entries)
    # As in `_decay_every`: only an entry decay or expiry replaced, or one already below
    # the forget line, can be forgotten, archived or restored.
    moved: dict[str, MemoryEntry] = {}
    for place, entry, now_entry in zip(places, some, decayed.values(), strict=True):
        result[place] = now_entry
        if now_entry is not entry or before_status[entry.id] is _FORGOTTEN:
            moved[entry.id] = now_entry
    ids = list(moved)
    settle(moved, before_status, policy, changes)
    if len(moved) == len(ids):
        return result, changes
    forgotten = set(ids).difference(moved)
    gone = {place for place, entry in zip(places, some, strict=True) if entry.id in forgotten}
    return list(compress(result, map(not_, map(gone.__contains__, range(len(result)))))), changes


def _decay_every(
    entries: Sequence[MemoryEntry], now: datetime, policy: ScoringPolicy
) -> MergeResult:
    """`decay_all` entry by entry."""
    changes: list[Change] = []
    before_status: dict[str, Status] = {}
    by_id: dict[str, MemoryEntry] = {}
    decay_into(entries, now, policy, before_status, by_id, changes)
    if len(by_id) != len(entries):  # an id twice: every entry is settled
        settle(by_id, before_status, policy, changes)
        return MergeResult(entries=sort_entries(by_id.values()), changes=changes)
    # Without candidates only an entry decay or expiry replaced, or one already below the
    # forget line, can be forgotten, archived or restored (an unchanged entry keeps the
    # status it was noted with): only those are settled, found in C, in the same order.
    moved = map(
        or_,
        map(is_not, by_id.values(), entries),
        map(is_, before_status.values(), repeat(_FORGOTTEN)),
    )
    some = dict(compress(by_id.items(), moved))
    ids = list(some)
    settle(some, before_status, policy, changes)
    for entry_id in ids:
        if entry_id not in some:  # forgotten
            del by_id[entry_id]
    return MergeResult(entries=sort_entries(by_id.values()), changes=changes)


_id_of = attrgetter("id")
_ACTIVE = Status.ACTIVE
_ARCHIVED = Status.ARCHIVED
_FORGOTTEN = Status.FORGOTTEN
_DECAYED = ChangeKind.DECAYED


def decay_into(
    existing: Sequence[MemoryEntry],
    now: datetime,
    policy: ScoringPolicy,
    before_status: dict[str, Status],
    by_id: dict[str, MemoryEntry],
    changes: list[Change],
) -> None:
    """Note each entry's status, then decay it to `now` into `by_id` (the merge's first step).

    Per entry this is `status_of(entry)`, then `score_at(entry, now)` (`rescored` and a
    DECAYED change when the score moved), then `expire` for an expired todo, written out
    in one loop: it runs for every entry at every merge, and the calls, the policy
    look-ups and the frozen dataclasses' constructors were most of a merge's time.
    `tests/unit/test_merge_fast_paths.py` checks it against those functions.
    """
    forget_below = policy.forget_below
    archive_below = policy.archive_below
    grace_days = policy.grace_days
    category_rates = policy.category_decay
    daily_decay = policy.daily_decay
    class_factors = policy.class_factors()
    # scoring.ScoringPolicy.daily_factor, memoised per category and per class.
    factor_of_category: dict[str, float] = {}
    append = changes.append
    for entry in existing:
        score = entry.score
        archived = entry.archived
        if entry.pinned:
            # Pinned: never below a line by score, and no decay.
            before_status[entry.id] = _ACTIVE if archived is None else _ARCHIVED
            new_score = score
        else:
            if score < forget_below:
                before_status[entry.id] = _FORGOTTEN
            elif archived is not None or score < archive_below:
                before_status[entry.id] = _ARCHIVED
            else:
                before_status[entry.id] = _ACTIVE
            memory_class = entry.memory_class
            if memory_class is not None:
                rate = class_factors.get(memory_class, daily_decay)
            else:
                category = entry.category
                found = factor_of_category.get(category)
                if found is None:
                    found = category_rates.get(category)
                    if found is None:
                        default_class = CATEGORY_CLASSES.get(category, MemoryClass.FACT)
                        found = class_factors.get(default_class, daily_decay)
                    factor_of_category[category] = found
                rate = found
            last_activated = entry.last_activated
            # scoring.decayed_score: days accrued by now minus days already applied.
            accrued = (now - last_activated).days - grace_days
            applied = (entry.scored_at - last_activated).days - grace_days
            days = (accrued if accrued > 0 else 0) - (applied if applied > 0 else 0)
            new_score = score * rate**days if days > 0 else score
        result = entry
        if new_score != score:
            fields = EntryFields.of(entry)
            fields.score = new_score
            fields.scored_at = now
            fields.archived = archived
            result = build_entry(fields)
            append(
                build_change(_DECAYED, entry.id, score, new_score, entry.content, entry.category)
            )
        if (
            archived is None
            and entry.category == "todo"
            and entry.expires_at is not None
            and entry.expires_at <= now
        ):
            result = expire(result, policy)
        by_id[entry.id] = result


def settle(
    by_id: dict[str, MemoryEntry],
    before_status: dict[str, Status],
    policy: ScoringPolicy,
    changes: list[Change],
) -> None:
    """Forget what fell below the forget line, record archive/restore transitions.

    `status_of` written out inline for the same reason as in `decay_into`; forgotten
    entries are removed from `by_id`.
    """
    forget_below = policy.forget_below
    archive_below = policy.archive_below
    forgotten: list[str] = []
    for entry in by_id.values():
        score = entry.score
        pinned = entry.pinned
        if not pinned and score < forget_below:
            changes.append(
                build_change(
                    ChangeKind.FORGOTTEN,
                    entry.id,
                    score,
                    None,
                    entry.content,
                    entry.category,
                    "score below forget line",
                )
            )
            forgotten.append(entry.id)
            continue
        archived = entry.archived
        if archived is not None or (not pinned and score < archive_below):
            if before_status.get(entry.id) is _ACTIVE:
                reason = archived.value if archived else "score below archive line"
                changes.append(
                    build_change(
                        ChangeKind.ARCHIVED,
                        entry.id,
                        score,
                        score,
                        entry.content,
                        entry.category,
                        reason,
                    )
                )
        elif before_status.get(entry.id) is _ARCHIVED:
            changes.append(
                build_change(
                    ChangeKind.RESTORED,
                    entry.id,
                    score,
                    score,
                    entry.content,
                    entry.category,
                    "score back above archive line",
                )
            )
    for entry_id in forgotten:
        del by_id[entry_id]
