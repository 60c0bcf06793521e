"""The merge's fast paths give what the plain rules give: a reference merge written from the
public rules, and hypothesis-made entries and candidates on which both must agree."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from memory_core.base.entries import (
    ArchiveReason,
    EntryFields,
    Importance,
    MemoryClass,
    MemoryEntry,
    build_entry,
    sort_entries,
)
from memory_core.base.merge_values import (
    Change,
    ChangeKind,
    MergeResult,
    Proposal,
    build_change,
)
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm import matching
from memory_core.longterm import merge as merge_module
from memory_core.longterm.decay import decay_all, decay_into, settle
from memory_core.longterm.fact_keys import Relation, relation, skeleton
from memory_core.longterm.matching import SKELETON_MAX, normalize_content
from memory_core.longterm.merge import merge
from memory_core.longterm.scoring import (
    Status,
    expire,
    initial_score,
    is_expired,
    score_at,
    status_of,
)
from tests.support import believed
from tests.unit.scoring_support import (
    T0,
    days,
    entry,
)

# --- the fast paths give what the plain rules give ----------------------------------------
#
# `merge` writes `status_of`, `score_at` and `expire` out in one loop, builds entries and
# changes without the frozen dataclasses' `__init__`, sorts in two steps and matches
# candidates through an index. `reference_merge` below is the merge as it was written
# before those speed-ups, from the public rules; the two must agree exactly.

ZONES: list[tzinfo] = [
    UTC,
    timezone(timedelta(hours=8)),
    timezone(-timedelta(hours=5, minutes=30)),
    ZoneInfo("Europe/Berlin"),
    ZoneInfo("America/New_York"),
]
DST_EDGES = [
    datetime(2026, 3, 29, 1, 30, tzinfo=UTC),  # Europe's spring-forward night
    datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # and its fall-back night
    datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # America/New_York's fall-back
]
WORDS = [
    "coffee", "tea", "Coffee!", "咖啡", "茶", "green", "tea,", " ", "x", "morning",
    "3", "4", "三", "Leo", "Max", "不", "not", "Monday",
]  # fmt: skip


def _reference_similar(a: str, b: str, threshold: float = 0.85) -> bool:
    if not a or not b:
        return False
    shorter, longer = sorted((len(a), len(b)))
    if shorter / longer < threshold:
        return False
    ga = frozenset({a[i : i + 2] for i in range(len(a) - 1)} or {a})
    gb = frozenset({b[i : i + 2] for i in range(len(b) - 1)} or {b})
    return len(ga & gb) / len(ga | gb) >= threshold


def _reference_sort(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    return sorted(entries, key=lambda e: (-e.score, -e.last_activated.timestamp(), e.id))


def reference_merge(
    existing: Sequence[MemoryEntry],
    candidates: Sequence[Proposal],
    now: datetime,
    session_id: str | None,
    policy: ScoringPolicy,
) -> MergeResult:
    changes: list[Change] = []
    before = {e.id: status_of(e, policy) for e in existing}
    by_id: dict[str, MemoryEntry] = {}
    for e in existing:
        score = score_at(e, now, policy)
        result = e
        if score != e.score:
            result = e.with_(score=score, scored_at=now)
            changes.append(Change(ChangeKind.DECAYED, e.id, e.score, score, e.content, e.category))
        if e.archived is None and e.category == "todo" and is_expired(e, now):
            result = expire(result, policy)
        by_id[e.id] = result
    by_norm: dict[str, str] = {}
    for e in by_id.values():
        by_norm.setdefault(normalize_content(e.content), e.id)
    for cand in candidates:
        content = cand.content.strip()
        if not content:
            continue
        for target in cand.contradicts:
            merge_module._contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        # Alike entries in the order they are looked at: named, same text, similar, same
        # skeleton.
        alike = [cand.matches] if cand.matches and cand.matches in by_id else []
        alike += [by_norm[norm]] if norm in by_norm else []
        alike += [
            e.id
            for e in by_id.values()
            if e.category == cand.category
            and _reference_similar(normalize_content(e.content), norm)
        ]
        if len(norm) <= SKELETON_MAX:
            alike += [
                e.id
                for e in by_id.values()
                if e.category == cand.category
                and len(normalize_content(e.content)) <= SKELETON_MAX
                and skeleton(e.content) == skeleton(content)
            ]
        relations = [(e_id, relation(by_id[e_id].content, content)) for e_id in alike]
        restated = [e_id for e_id, rel in relations if rel is Relation.RESTATES]
        updated = [e_id for e_id, rel in relations if rel is Relation.UPDATES]
        if restated:
            merge_module._reinforce(by_id, restated[0], now, session_id, policy, changes)
            continue
        new = MemoryEntry(
            id=merge_module.new_entry_id(set(by_id)),
            content=content,
            category=cand.category,
            score=initial_score(cand.importance),
            created_at=now,
            last_activated=now,
            scored_at=now,
            source_session=session_id,
            confidence=cand.confidence,
            expires_at=cand.expires_at,
            sessions=(session_id,) if session_id else (),
            memory_class=cand.memory_class,
            granularity=cand.granularity,
            importance=cand.importance,
        )
        if is_expired(new, now):
            continue
        detail = ""
        if updated:
            target = believed(updated, {i: by_id[i].score for i in updated})
            merge_module._contradict(by_id, target, now, policy, changes, f"updated by {new.id}")
            detail = f"updates {target}"
        by_id[new.id] = new
        by_norm.setdefault(norm, new.id)
        changes.append(
            Change(ChangeKind.ADDED, new.id, None, new.score, content, new.category, detail)
        )
    survivors = []
    for e in by_id.values():
        old, status = before.get(e.id), status_of(e, policy)
        if status is Status.FORGOTTEN:
            changes.append(
                Change(
                    ChangeKind.FORGOTTEN,
                    e.id,
                    e.score,
                    None,
                    e.content,
                    e.category,
                    "score below forget line",
                )
            )
            continue
        survivors.append(e)
        if old is Status.ACTIVE and status is Status.ARCHIVED:
            reason = e.archived.value if e.archived else "score below archive line"
            changes.append(
                Change(ChangeKind.ARCHIVED, e.id, e.score, e.score, e.content, e.category, reason)
            )
        elif old is Status.ARCHIVED and status is Status.ACTIVE:
            changes.append(
                Change(
                    ChangeKind.RESTORED,
                    e.id,
                    e.score,
                    e.score,
                    e.content,
                    e.category,
                    "score back above archive line",
                )
            )
    return MergeResult(entries=_reference_sort(survivors), changes=changes)


def _moment(rng: random.Random, zone: tzinfo | None) -> datetime:
    base = rng.choice(DST_EDGES) + timedelta(
        days=rng.randint(-60, 3), seconds=rng.randrange(86400) * rng.randint(0, 1)
    )
    if rng.random() < 0.3:
        base += timedelta(microseconds=rng.randrange(10**6))
    return base.replace(tzinfo=None) if zone is None else base.astimezone(zone)


def _random_entries(rng: random.Random, naive: bool) -> list[MemoryEntry]:
    out = []
    for number in range(rng.randint(0, 30)):
        zone = None if naive else rng.choice(ZONES)
        created = _moment(rng, zone)
        last = created + timedelta(hours=rng.randint(0, 2000)) if rng.random() < 0.7 else created
        if not naive and rng.random() < 0.3:
            last = last.astimezone(rng.choice(ZONES))  # another zone than created_at
        scored = last + timedelta(hours=rng.randint(0, 2000)) if rng.random() < 0.6 else last
        out.append(
            MemoryEntry(
                id=f"e{rng.randint(0, 40) if rng.random() < 0.05 else number}",
                content=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))),
                category=rng.choice(["fact", "todo", "preference", "made-up"]),
                score=rng.choice(
                    [rng.random(), 0.6, 0.04, 0.2, 0.19, 1.0, 0.0, round(rng.random(), 2)]
                ),
                created_at=created,
                last_activated=last,
                scored_at=scored,
                hits=rng.randint(0, 4),
                expires_at=_moment(rng, None if naive else rng.choice(ZONES)) + days(40)
                if rng.random() < 0.3
                else None,
                pinned=rng.random() < 0.1,
                archived=rng.choice(
                    [None, None, None, ArchiveReason.MANUAL, ArchiveReason.EXPIRED]
                ),
                sessions=tuple(rng.sample(["s1", "s2", "s3"], rng.randint(0, 2))),
                memory_class=rng.choice([None, None, *MemoryClass]),
            )
        )
    return out


def _random_candidates(rng: random.Random, existing: list[MemoryEntry]) -> list[Proposal]:
    out = []
    for _ in range(rng.randint(0, 5)):
        if existing and rng.random() < 0.4:
            content = rng.choice(existing).content + rng.choice(["", "!", " x", "  "])
        else:
            content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        out.append(
            Proposal(
                content=content,
                category=rng.choice(["fact", "todo", "preference"]),
                importance=rng.choice(list(Importance)),
                matches=rng.choice([None, None, "e1", "nope"]),
                contradicts=tuple(rng.sample(["e0", "e2", "zz"], rng.randint(0, 1))),
                memory_class=rng.choice([None, None, *MemoryClass]),
            )
        )
    return out


def _fields(items: Iterable[object]) -> list[str]:
    """repr, which tells 0.0 from -0.0, 1 from 1.0 and a tzinfo from another."""
    return [repr(item) for item in items]


def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """New entries get n0, n1, ... so two merges of the same input can be compared."""
    counter = itertools.count()
    monkeypatch.setattr(merge_module, "new_entry_id", lambda taken: f"n{next(counter)}")


POLICIES = [
    DEFAULT_POLICY,
    ScoringPolicy(category_decay={"todo": 0.9}, grace_days=0),
    ScoringPolicy(decay="flat", category_decay={"preference": 0.95}),
]
"""The policies the random merges and decays draw from: the default, per-category rates
without grace days, flat decay."""


@pytest.mark.parametrize("seed", range(40))
def test_merge_matches_the_plain_rules(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for round_ in range(15):
        naive = round_ % 10 == 9
        existing = _random_entries(rng, naive)
        candidates = _random_candidates(rng, existing)
        zone = None if naive else rng.choice(ZONES)
        now = _moment(rng, zone) + timedelta(days=rng.uniform(-5, 300))
        policy = rng.choice(POLICIES)
        session = rng.choice([None, "s1", "s9"])
        fixed_ids(monkeypatch)
        fast = merge(existing, candidates, now, session, policy)
        fixed_ids(monkeypatch)
        plain = reference_merge(existing, candidates, now, session, policy)
        assert _fields(fast.entries) == _fields(plain.entries)
        assert _fields(fast.changes) == _fields(plain.changes)
        assert all(type(e) is MemoryEntry for e in fast.entries)
        assert all(type(c) is Change for c in fast.changes)


@pytest.mark.parametrize("seed", range(20))
def test_sort_entries_matches_the_full_key(seed: int) -> None:
    rng = random.Random(seed)
    items = _random_entries(rng, naive=False)
    tied = [e.with_(score=rng.choice([0.5, 0.25, e.score])) for e in items]
    nan = [*tied, entry("nan", float("nan"))] if seed % 4 == 0 else tied
    for group in (items, tied, nan):
        assert _fields(sort_entries(group)) == _fields(_reference_sort(group))


def test_fuzzy_similarity_matches_the_set_formula() -> None:
    rng = random.Random(7)
    alphabet = "abcde咖啡茶"
    for _ in range(3000):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        b = a if rng.random() < 0.2 else "".join(rng.choice(alphabet) for _ in range(len(a)))
        if rng.random() < 0.5 and a:
            b = a[: rng.randrange(len(a))] + rng.choice(alphabet) + a[rng.randrange(len(a)) :]
        assert matching._similar(a, b) == _reference_similar(a, b)


def test_build_entry_is_an_ordinary_frozen_entry() -> None:
    plain = entry("e1", 0.6, sessions=("s1",), expires_at=T0 + days(3))
    fields = EntryFields.blank()
    for name in MemoryEntry.__slots__:
        setattr(fields, name, getattr(plain, name))
    fast = build_entry(fields)
    assert type(fast) is MemoryEntry
    assert fast == plain
    assert hash(fast) == hash(plain)
    assert repr(fast) == repr(plain)
    with pytest.raises(FrozenInstanceError):
        fast.score = 0.1  # type: ignore[misc]
    rescored = plain.rescored(0.3, T0 + days(9))
    assert rescored == plain.with_(score=0.3, scored_at=T0 + days(9))
    assert type(rescored) is MemoryEntry


def test_build_change_is_an_ordinary_frozen_change() -> None:
    args = (ChangeKind.DECAYED, "e1", 0.6, 0.5, "text", "fact", "why")
    fast, plain = build_change(*args), Change(*args)
    assert type(fast) is Change
    assert fast == plain
    assert hash(fast) == hash(plain)
    assert repr(fast) == repr(plain)
    with pytest.raises(FrozenInstanceError):
        fast.detail = "x"  # type: ignore[misc]
    assert build_change(*args[:6]) == Change(*args[:6])


@pytest.mark.parametrize("seed", range(20))
def test_decay_all_settles_what_settling_every_entry_settles(seed: int) -> None:
    """`decay_all` settles only the entries decay replaced or found below the forget
    line: the same entries and changes, in the same order, as settling every entry."""
    rng = random.Random(seed)
    for round_ in range(15):
        naive = round_ % 10 == 9
        existing = _random_entries(rng, naive)
        now = _moment(rng, None if naive else rng.choice(ZONES)) + timedelta(
            days=rng.uniform(-5, 300)
        )
        policy = rng.choice(POLICIES)
        plain = _plain_decay_all(existing, now, policy)
        fast = decay_all(existing, now, policy)
        assert _fields(fast.entries) == _fields(plain.entries)
        assert _fields(fast.changes) == _fields(plain.changes)


def _plain_decay_all(
    existing: Sequence[MemoryEntry], now: datetime, policy: ScoringPolicy
) -> MergeResult:
    """Decay every entry, then settle every entry: what `decay_all` stands for."""
    changes: list[Change] = []
    before: dict[str, Status] = {}
    by_id: dict[str, MemoryEntry] = {}
    decay_into(existing, now, policy, before, by_id, changes)
    settle(by_id, before, policy, changes)
    return MergeResult(entries=sort_entries(by_id.values()), changes=changes)


def _near_a_close(rng: random.Random, items: list[MemoryEntry], now: datetime) -> list[MemoryEntry]:
    """`items` as a file read at a close looks: most scored at an earlier close a few hours
    or days ago (some days roll over by `now`, most not), some scored after `now`, some
    activated within the grace days, a few odd scores."""
    out = []
    for item in items:
        scored = now - timedelta(hours=rng.uniform(-30, 80))
        last = scored - timedelta(
            days=rng.choice([0, 1, 3, 6, 7, 8, 20, 200]), hours=rng.uniform(0, 24)
        )
        if item.scored_at.tzinfo is None:
            scored, last = scored.replace(tzinfo=None), last.replace(tzinfo=None)
        elif rng.random() < 0.3:
            last = last.astimezone(rng.choice(ZONES))
        changed = item.with_(scored_at=scored, last_activated=last)
        if rng.random() < 0.1:
            changed = changed.with_(
                score=rng.choice([float("nan"), 0.05, 0.0499, -0.0, 0.2, float("inf")])
            )
        if rng.random() < 0.1:
            changed = changed.with_(
                category="todo", expires_at=now + timedelta(hours=rng.uniform(-50, 50))
            )
        out.append(changed if rng.random() < 0.8 else item)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_decay_all_skips_only_what_it_would_leave(seed: int) -> None:
    """`decay_all` looks closely only at the entries it may change: the same entries,
    changes and order as decaying and settling every entry, for entries near a close
    (days rolling over or not, within grace, scored after `now`), pinned, archived,
    expired todos, forgotten ones, NaN scores and ids twice."""
    rng = random.Random(seed)
    for round_ in range(30):
        naive = round_ % 10 == 9
        now = _moment(rng, None if naive else rng.choice(ZONES)) + timedelta(
            days=rng.uniform(-5, 300)
        )
        existing = _near_a_close(rng, _random_entries(rng, naive), now)
        policy = rng.choice(POLICIES)
        plain = _plain_decay_all(existing, now, policy)
        fast = decay_all(existing, now, policy)
        assert _fields(fast.entries) == _fields(plain.entries)
        assert _fields(fast.changes) == _fields(plain.changes)


def test_decay_all_fails_as_the_plain_pass_does() -> None:
    """Naive and aware times mixed: `decay_all` raises what decaying every entry raises,
    or gives what it gives (a pinned entry's times are never compared)."""
    aware = entry("a", 0.6)
    naive = entry("n", 0.6).with_(
        last_activated=T0.replace(tzinfo=None), scored_at=T0.replace(tzinfo=None)
    )
    for group in ([aware, naive], [naive.with_(pinned=True), aware]):
        try:
            plain: MergeResult | Exception = _plain_decay_all(group, T0 + days(30), DEFAULT_POLICY)
        except TypeError as error:
            plain = error
        if isinstance(plain, Exception):
            with pytest.raises(TypeError, match=str(plain)):
                decay_all(group, T0 + days(30))
        else:
            fast = decay_all(group, T0 + days(30))
            assert _fields(fast.entries) == _fields(plain.entries)
            assert _fields(fast.changes) == _fields(plain.changes)


@pytest.mark.parametrize("seed", range(20))
def test_sort_entries_in_utc_matches_the_full_key(seed: int) -> None:
    """Runs of equal scores already in order are left as they are only when that is the
    full key's order: UTC times (equal ones, a microsecond apart, far from 1970), runs in
    and out of order, input sorted or not, and a zone or a naive time among them."""
    rng = random.Random(seed)
    base = datetime(2026, 3, 1, tzinfo=UTC)
    far = [datetime(1600, 1, 1, tzinfo=UTC), datetime(2300, 1, 1, tzinfo=UTC)]
    for _ in range(30):
        items = []
        for number in range(rng.randint(0, 40)):
            last = base + timedelta(
                seconds=rng.choice([0, 1, 86400 * rng.randint(0, 30)]),
                microseconds=rng.choice([0, 1, 2]),
            )
            if rng.random() < 0.03:
                last = rng.choice(far) + timedelta(microseconds=rng.randint(0, 2))
            items.append(
                entry(
                    f"e{rng.randint(0, 9) if rng.random() < 0.2 else number}",
                    rng.choice([0.5, 0.25, 0.19, round(rng.random(), 2)]),
                    at=last,
                )
            )
        if items and rng.random() < 0.1:  # one time in another zone
            at = rng.randrange(len(items))
            moved = items[at].last_activated.astimezone(ZoneInfo("Europe/Berlin"))
            items[at] = items[at].with_(last_activated=moved)
        if rng.random() < 0.05:  # all naive
            items = [e.with_(last_activated=e.last_activated.replace(tzinfo=None)) for e in items]
        for group in (items, _reference_sort(items), list(reversed(_reference_sort(items)))):
            assert _fields(sort_entries(group)) == _fields(_reference_sort(group))


def test_sort_entries_far_from_1970_ties_by_id() -> None:
    """In 2300 two times a microsecond apart are the same float: the full key then ties
    them by id, though the datetimes differ."""
    later = datetime(2300, 1, 1, tzinfo=UTC) + timedelta(microseconds=2)
    earlier = later - timedelta(microseconds=1)
    assert later.timestamp() == earlier.timestamp()
    group = [entry("b", 0.5, at=later), entry("a", 0.5, at=earlier)]
    assert [e.id for e in sort_entries(group)] == ["a", "b"]
    assert _fields(sort_entries(group)) == _fields(_reference_sort(group))
