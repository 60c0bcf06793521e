"""One contract of the storage interfaces (memory_core/storage/interfaces.py), run against each
in-memory fake of testkit/storage.py and the real class it stands for, on the test's
database: a layer tested over a fake is only as good as the fake's likeness, so what a
caller relies on is checked on both, and a fake that drifts fails here.

`HistoryBackend`: the real one is the core's history store (`HistoryStore`; on PostgreSQL
the spooling variant of memory_core/storage/spool.py). `MemoryHistory` keeps no caps: its
`enforce_caps` never drops a message, so caps stay out of this contract (tests/unit/
test_history.py checks them on the real store). `AuditBackend`: the real one is the core's
audit log (`AuditLog`, or `SpoolingAudit` on PostgreSQL).

Marked `storage`: the real classes run on SQLite and on PostgreSQL; a fake has no
database, so it runs once (its PostgreSQL case is skipped).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memory_core.base.merge_values import Change, ChangeKind
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.storage.interfaces import AuditBackend, HistoryBackend
from memory_core.storage.sessions import SUMMARY_ROLE, ArchiveState, NewMessage, StoredMessage
from testkit.storage import MemoryAudit, MemoryHistory
from tests.conftest import START

pytestmark = [pytest.mark.storage, pytest.mark.timeout(60)]

ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")
CAROL = ScopeKey("peer:carol")

T0 = START
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def _implementation(request: pytest.FixtureRequest, storage_backend: str) -> str:
    """Which implementation the case runs: a fake once, the real class per backend."""
    kind = str(request.param)
    if kind == "fake" and storage_backend != "sqlite":
        pytest.skip("a fake has no database: it runs once")
    return kind


@pytest.fixture(params=["fake", "real"])
def history(request: pytest.FixtureRequest, storage_backend: str) -> HistoryBackend:
    if _implementation(request, storage_backend) == "fake":
        return MemoryHistory()
    core: MemoryCore = request.getfixturevalue("core")
    return core.history


@pytest.fixture(params=["fake", "real"])
def audit(request: pytest.FixtureRequest, storage_backend: str) -> AuditBackend:
    if _implementation(request, storage_backend) == "fake":
        return MemoryAudit()
    core: MemoryCore = request.getfixturevalue("core")
    return core.audit


async def talk(
    history: HistoryBackend, scope: ScopeKey, session_id: str, *texts: str, at: datetime = T0
) -> list[StoredMessage]:
    """One user message per text, a second apart from `at`."""
    return [
        await history.add_message(
            NewMessage(scope, session_id, "user", text, at + timedelta(seconds=i))
        )
        for i, text in enumerate(texts)
    ]


async def due(history: HistoryBackend, now: datetime, idle_before: datetime) -> list[str]:
    return [s.id for s in await history.sessions_due(now, idle_before)]


# --- sessions ---------------------------------------------------------------------------


async def test_opening_a_session_is_idempotent_per_scope(history: HistoryBackend) -> None:
    first = await history.open_session(ALICE, T0)
    again = await history.open_session(ALICE, T0 + MINUTE)
    other = await history.open_session(BOB, T0)
    assert again.id == first.id
    assert other.id != first.id
    assert (first.scope, first.status, first.started_at, first.last_at) == (
        ALICE.value,
        "open",
        T0,
        T0,
    )
    assert (first.extract_attempts, first.next_extract_at, first.flushed_at) == (0, None, None)
    current = await history.current_session(ALICE)
    assert current is not None and current.id == first.id
    assert await history.current_session(CAROL) is None
    assert await history.get_session(first.id) == first
    assert await history.get_session("no-such-session") is None


async def test_closing_ends_the_current_session(history: HistoryBackend) -> None:
    first = await history.open_session(ALICE, T0)
    bob = await history.open_session(BOB, T0)
    await history.close_session(first.id, T0 + HOUR)
    assert await history.current_session(ALICE) is None
    closed = await history.get_session(first.id)
    assert closed is not None and closed.status == "closed"
    second = await history.open_session(ALICE, T0 + 2 * HOUR)
    assert second.id != first.id
    assert {s.id for s in await history.open_sessions()} == {second.id, bob.id}


async def test_closing_leaves_an_ended_session_as_it_is(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    await history.close_session(session.id, T0 + MINUTE)
    await history.mark_extracted(session.id, {"added": 1})
    await history.close_session(session.id, T0 + HOUR)  # a late close from another path
    after = await history.get_session(session.id)
    assert after is not None and after.status == "extracted"


async def test_the_newest_open_session_is_current(history: HistoryBackend) -> None:
    await history.add_session(ALICE, "older", T0)
    await history.add_session(ALICE, "newer", T0 + HOUR)
    current = await history.current_session(ALICE)
    assert current is not None and current.id == "newer"
    assert (await history.open_session(ALICE, T0 + 2 * HOUR)).id == "newer"


async def test_a_recorded_session_keeps_its_id_and_status(history: HistoryBackend) -> None:
    # "s2": an id like the fake's own, which opening a session must not take over.
    await history.add_session(ALICE, "s2", T0 - HOUR, "closed")
    opened = await history.open_session(BOB, T0)
    assert opened.id != "s2"
    recorded = await history.get_session("s2")
    assert recorded is not None
    assert (recorded.scope, recorded.status, recorded.started_at) == (
        ALICE.value,
        "closed",
        T0 - HOUR,
    )
    # A recorded conversation's messages go to its session, open or not.
    [message] = await talk(history, ALICE, "s2", "from the export", at=T0 - HOUR)
    assert [m.id for m in await history.session_messages("s2")] == [message.id]


async def test_an_unknown_session_is_left_alone(history: HistoryBackend) -> None:
    """Marking a session no one stored changes nothing and fails nothing."""
    await history.close_session("no-such-session", T0)
    await history.mark_flushed("no-such-session", T0)
    await history.mark_extract_failed("no-such-session", T0 + HOUR)
    await history.mark_extracted("no-such-session", {})
    assert await history.get_session("no-such-session") is None
    assert await due(history, T0 + 2 * HOUR, T0 + 2 * HOUR) == []


async def test_flushing_is_recorded(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    await history.mark_flushed(session.id, T0 + MINUTE)
    flushed = await history.get_session(session.id)
    assert flushed is not None and flushed.flushed_at == T0 + MINUTE


# --- sessions due for extraction ----------------------------------------------------------


async def test_an_open_session_is_due_once_idle(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    assert await due(history, T0 + HOUR, T0) == []  # idle since exactly T0: not before it
    assert await due(history, T0 + HOUR, T0 + MINUTE) == [session.id]
    await talk(history, ALICE, session.id, "still here", at=T0 + 10 * MINUTE)
    touched = await history.get_session(session.id)
    assert touched is not None and touched.last_at == T0 + 10 * MINUTE
    assert await due(history, T0 + HOUR, T0 + 5 * MINUTE) == []
    assert await due(history, T0 + HOUR, T0 + 11 * MINUTE) == [session.id]


async def test_a_closed_session_is_due_until_extracted(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    await history.close_session(session.id, T0 + MINUTE)
    assert await due(history, T0 + MINUTE, T0 - HOUR) == [session.id]  # idle time aside
    await history.mark_extracted(session.id, {"added": 2})
    assert await due(history, T0 + 100 * HOUR, T0 + 100 * HOUR) == []
    assert await history.open_sessions() == []


async def test_a_failed_extraction_waits_for_its_retry_time(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    await history.close_session(session.id, T0 + MINUTE)
    await history.mark_extract_failed(session.id, T0 + HOUR)
    failed = await history.get_session(session.id)
    assert failed is not None
    assert (failed.status, failed.extract_attempts, failed.next_extract_at) == (
        "extract_failed",
        1,
        T0 + HOUR,
    )
    late = T0 + 100 * HOUR  # idle time does not matter to a retry
    assert await due(history, T0 + 30 * MINUTE, late) == []
    assert await due(history, T0 + HOUR, late) == [session.id]
    await history.mark_extract_failed(session.id, T0 + 3 * HOUR)
    again = await history.get_session(session.id)
    assert again is not None and again.extract_attempts == 2
    assert await due(history, T0 + 2 * HOUR, late) == []
    assert await due(history, T0 + 3 * HOUR, late) == [session.id]
    await history.mark_extracted(session.id, {})
    done = await history.get_session(session.id)
    assert done is not None and (done.status, done.next_extract_at) == ("extracted", None)
    assert await due(history, late, late) == []


async def test_sessions_due_come_oldest_first(history: HistoryBackend) -> None:
    alice = await history.open_session(ALICE, T0 + 2 * MINUTE)
    bob = await history.open_session(BOB, T0)
    carol = await history.open_session(CAROL, T0 + MINUTE)
    await history.close_session(carol.id, T0 + 5 * MINUTE)
    assert await due(history, T0 + HOUR, T0 + HOUR) == [bob.id, carol.id, alice.id]


# --- messages -----------------------------------------------------------------------------


async def test_messages_are_stored_in_order(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    other = await history.open_session(BOB, T0)
    first = await history.add_message(
        NewMessage(
            ALICE, session.id, "user", "the tent is blue", T0, speaker="alice", meta={"lang": "en"}
        )
    )
    second = await history.add_message(
        NewMessage(ALICE, session.id, "assistant", "noted", T0 + MINUTE)
    )
    await talk(history, BOB, other.id, "unrelated")
    assert second.id > first.id
    assert (first.scope, first.session_id, first.role, first.speaker, first.content) == (
        ALICE.value,
        session.id,
        "user",
        "alice",
        "the tent is blue",
    )
    assert (first.created_at, first.archived, first.archive_attempts) == (
        T0,
        ArchiveState.FALSE,
        0,
    )
    assert (first.archive_next_at, first.compacted, first.meta) == (None, False, {"lang": "en"})
    assert await history.session_messages(session.id) == [first, second]
    assert await history.last_message_at() == T0 + MINUTE


async def test_no_message_no_last_time(history: HistoryBackend) -> None:
    assert await history.last_message_at() is None
    await history.open_session(ALICE, T0)
    assert await history.last_message_at() is None


async def test_compacted_messages_leave_the_live_history(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    one, two, three = await talk(history, ALICE, session.id, "one", "two", "three")
    await history.mark_compacted([one.id, two.id])
    assert [m.id for m in await history.session_messages(session.id)] == [three.id]
    everything = await history.session_messages(session.id, include_compacted=True)
    assert [(m.id, m.compacted) for m in everything] == [
        (one.id, True),
        (two.id, True),
        (three.id, False),
    ]
    # By id: compacted ones too, oldest first, whatever order they are asked in.
    found = await history.messages_by_id([three.id, one.id, 10_000])
    assert [(m.id, m.content) for m in found] == [(one.id, "one"), (three.id, "three")]
    assert await history.messages_by_id([]) == []


async def test_a_turn_reads_the_newest_live_messages(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    other = await history.open_session(BOB, T0)
    await talk(history, BOB, other.id, "not in this session")
    texts = ["alpha", "bravo!", "charlie", "delta"]
    messages = await talk(history, ALICE, session.id, *texts)
    context = await history.turn_context(session.id, 2)
    assert [m.content for m in context.messages] == ["charlie", "delta"]
    assert context.chars == sum(len(t) for t in texts)
    whole = await history.turn_context(session.id, 10)
    assert [m.id for m in whole.messages] == [m.id for m in messages]
    none = await history.turn_context(session.id, 0)
    assert (none.messages, none.chars) == ([], sum(len(t) for t in texts))
    empty = await history.turn_context("no-such-session", 5)
    assert (empty.messages, empty.chars) == ([], 0)


async def test_a_turn_reads_the_summary_in_front(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    old = await talk(history, ALICE, session.id, "one", "two", "three")
    summary = await history.add_message(
        NewMessage(ALICE, session.id, SUMMARY_ROLE, "they counted", T0 + MINUTE)
    )
    await history.mark_compacted([m.id for m in old])
    await talk(history, ALICE, session.id, "four", "five", "six", at=T0 + 2 * MINUTE)
    narrow = await history.turn_context(session.id, 2)
    assert [m.content for m in narrow.messages] == ["they counted", "five", "six"]
    assert narrow.messages[0].id == summary.id
    assert narrow.chars == len("they counted") + len("fourfivesix")
    wide = await history.turn_context(session.id, 10)  # the summary once, in its place
    assert [m.content for m in wide.messages] == ["they counted", "four", "five", "six"]


# --- counts and archive state ----------------------------------------------------------------


async def test_counts_by_archive_state(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    other = await history.open_session(BOB, T0)
    await talk(history, ALICE, session.id, "a", "b")
    await history.add_message(
        NewMessage(ALICE, session.id, "user", "c", T0, archived=ArchiveState.TRUE)
    )
    await history.add_message(
        NewMessage(ALICE, session.id, "user", "d", T0, archived=ArchiveState.PENDING)
    )
    await talk(history, BOB, other.id, "e")
    assert await history.counts(ALICE) == {"false": 2, "pending": 1, "true": 1}
    assert await history.counts(CAROL) == {"false": 0, "pending": 0, "true": 0}
    assert await history.counts_by_scope() == {
        ALICE.value: {"false": 2, "pending": 1, "true": 1},
        BOB.value: {"false": 1, "pending": 0, "true": 0},
    }
    assert await history.counts_by_scope(BOB) == {BOB.value: {"false": 1, "pending": 0, "true": 0}}
    assert await history.counts_by_scope(CAROL) == {}  # only scopes with messages


async def test_unarchived_messages_by_scope(history: HistoryBackend) -> None:
    alice = await history.open_session(ALICE, T0)
    bob = await history.open_session(BOB, T0)
    await talk(history, ALICE, alice.id, "a", at=T0 + HOUR)
    await history.add_message(NewMessage(BOB, bob.id, "user", "b", T0, archived=ArchiveState.TRUE))
    assert set(await history.scopes_with_unarchived()) == {ALICE}
    assert await history.oldest_unarchived(ALICE) == T0 + HOUR
    assert await history.oldest_unarchived(BOB) is None
    # With whole sessions, an open session's messages wait for it to end.
    assert await history.oldest_unarchived(ALICE, whole_sessions=True) is None
    await history.close_session(alice.id, T0 + 2 * HOUR)
    assert await history.oldest_unarchived(ALICE, whole_sessions=True) == T0 + HOUR


async def test_an_archive_run_takes_what_is_due(history: HistoryBackend) -> None:
    ended = await history.open_session(ALICE, T0)
    old = await talk(history, ALICE, ended.id, "one", "two")
    await history.close_session(ended.id, T0 + MINUTE)
    live = await history.open_session(ALICE, T0 + HOUR)
    new = await talk(history, ALICE, live.id, "three", at=T0 + HOUR)
    bob = await history.open_session(BOB, T0)
    await talk(history, BOB, bob.id, "elsewhere")

    run_id, ids = await history.begin_archive_run(ALICE, T0 + 2 * HOUR, whole_sessions=True)
    assert ids == [m.id for m in old]  # the open session's message waits
    assert await history.counts(ALICE) == {"false": 1, "pending": 2, "true": 0}
    assert await history.counts(BOB) == {"false": 1, "pending": 0, "true": 0}
    run = await history.last_archive_run(ALICE)
    assert run is not None and (run.started_at, run.finished_at) == (T0 + 2 * HOUR, None)

    await history.mark_archived(ids)
    await history.finish_archive_run(run_id, T0 + 3 * HOUR, 2, 1, 0)
    archived = await history.messages_by_id(ids)
    assert {(m.archived, m.archive_next_at) for m in archived} == {(ArchiveState.TRUE, None)}
    run = await history.last_archive_run(ALICE)
    assert run is not None
    assert (run.started_at, run.finished_at, run.moved, run.summarized, run.failed) == (
        T0 + 2 * HOUR,
        T0 + 3 * HOUR,
        2,
        1,
        0,
    )
    assert await history.last_archive_run(BOB) is None

    _, rest = await history.begin_archive_run(ALICE, T0 + 4 * HOUR)  # not whole sessions
    assert rest == [m.id for m in new]


async def test_an_orphaned_pending_message_is_taken_again(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    messages = await talk(history, ALICE, session.id, "one", "two")
    _, first = await history.begin_archive_run(ALICE, T0 + HOUR)
    assert first == [m.id for m in messages]  # and the run dies before it marks them
    # The session is open: with whole sessions, its orphans go back to unarchived.
    _, none = await history.begin_archive_run(ALICE, T0 + 2 * HOUR, whole_sessions=True)
    assert none == []
    assert await history.counts(ALICE) == {"false": 2, "pending": 0, "true": 0}
    _, again = await history.begin_archive_run(ALICE, T0 + 3 * HOUR)
    assert again == first


async def test_a_failed_archive_waits_for_its_retry_time(history: HistoryBackend) -> None:
    session = await history.open_session(ALICE, T0)
    messages = await talk(history, ALICE, session.id, "one", "two")
    await history.close_session(session.id, T0 + MINUTE)
    _, ids = await history.begin_archive_run(ALICE, T0 + HOUR)
    await history.mark_archive_failed(ids, T0 + HOUR, T0 + 3 * HOUR)
    failed = await history.messages_by_id(ids)
    assert {(m.archived, m.archive_attempts, m.archive_next_at) for m in failed} == {
        (ArchiveState.FALSE, 1, T0 + 3 * HOUR)
    }
    assert await history.oldest_unarchived(ALICE) == messages[0].created_at  # still waiting
    [waiting] = await history.failed_archives(ALICE)
    assert (waiting.session_id, waiting.messages, waiting.attempts) == (session.id, 2, 1)
    assert (waiting.first_at, waiting.failed_at, waiting.next_at) == (
        T0,
        T0 + HOUR,
        T0 + 3 * HOUR,
    )
    assert await history.failed_archives(BOB) == []

    _, early = await history.begin_archive_run(ALICE, T0 + 2 * HOUR)
    assert early == []
    _, retry = await history.begin_archive_run(ALICE, T0 + 3 * HOUR)
    assert retry == ids
    await history.mark_archive_failed(retry, T0 + 3 * HOUR, T0 + 5 * HOUR)
    again = await history.messages_by_id(ids)
    assert {m.archive_attempts for m in again} == {2}
    _, last = await history.begin_archive_run(ALICE, T0 + 5 * HOUR)
    await history.mark_archived(last)
    assert await history.failed_archives(ALICE) == []


async def test_sessions_by_archive_state(history: HistoryBackend) -> None:
    first = await history.open_session(ALICE, T0)
    await talk(history, ALICE, first.id, "one", "two", "three")
    await history.close_session(first.id, T0 + MINUTE)
    _, ids = await history.begin_archive_run(ALICE, T0 + HOUR)
    await history.mark_archived(ids[:1])
    second = await history.open_session(ALICE, T0 + HOUR)
    await talk(history, ALICE, second.id, "four", at=T0 + HOUR)
    rows = await history.sessions_by_state(ALICE)
    assert [
        (r.session_id, r.first_at, r.status, r.unarchived, r.pending, r.archived) for r in rows
    ] == [
        (second.id, T0 + HOUR, "open", 1, 0, 0),
        (first.id, T0, "closed", 0, 2, 1),
    ]
    assert [r.session_id for r in await history.sessions_by_state(ALICE, limit=1)] == [second.id]
    assert await history.sessions_by_state(BOB) == []


# --- the audit log -------------------------------------------------------------------------


def change(
    kind: ChangeKind,
    entry_id: str,
    content: str = "likes tea",
    *,
    old: float | None = None,
    new: float | None = None,
) -> Change:
    return Change(kind, entry_id, old, new, content, "preference")


async def test_audit_records_each_change_but_decay(audit: AuditBackend) -> None:
    assert await audit.last_id() == 0
    written = await audit.record(
        ALICE,
        [
            change(ChangeKind.ADDED, "e1", new=0.5),
            change(ChangeKind.DECAYED, "e1", old=0.5, new=0.4),
            change(ChangeKind.REINFORCED, "e1", old=0.4, new=0.7),
        ],
        "extract",
        T0,
    )
    assert written == 2
    assert await audit.record(ALICE, [change(ChangeKind.DECAYED, "e1")], "merge", T0) == 0
    await audit.record(BOB, [change(ChangeKind.ADDED, "e1", "likes coffee")], "chat", T0)
    records = await audit.history(ALICE, "e1")
    assert [(r.action, r.old_score, r.new_score) for r in records] == [
        ("add", None, 0.5),
        ("reinforce", 0.4, 0.7),
    ]
    first = records[0]
    assert (first.at, first.scope, first.entry_id, first.source) == (
        T0,
        ALICE.value,
        "e1",
        "extract",
    )
    assert (first.category, first.content, first.detail) == ("preference", "likes tea", "")
    assert records[0].id < records[1].id
    assert await audit.history(ALICE, "e2") == []
    assert await audit.action_counts() == {"add": 2, "reinforce": 1}


async def test_audit_reads_newest_first(audit: AuditBackend) -> None:
    for n in range(4):
        await audit.record(ALICE, [change(ChangeKind.ADDED, f"e{n}")], "chat", T0 + n * MINUTE)
    await audit.record(BOB, [change(ChangeKind.EDITED, "b1")], "tui", T0 + HOUR)
    everything = await audit.recent()
    assert [r.entry_id for r in everything] == ["b1", "e3", "e2", "e1", "e0"]
    assert await audit.last_id() == everything[0].id
    assert [r.entry_id for r in await audit.recent(ALICE, limit=2)] == ["e3", "e2"]
    after = everything[3].id  # e1: a live view fetched up to it
    assert [r.entry_id for r in await audit.recent(ALICE, after_id=after)] == ["e3", "e2"]
    assert [r.entry_id for r in await audit.recent(after_id=after)] == ["b1", "e3", "e2"]


async def test_forgotten_entries_newest_first(audit: AuditBackend) -> None:
    await audit.record(ALICE, [change(ChangeKind.FORGOTTEN, "old", "the old phone")], "chat", T0)
    await audit.record(ALICE, [change(ChangeKind.FORGOTTEN, "new", "the new phone")], "chat", T0)
    for n in range(3):
        await audit.record(ALICE, [change(ChangeKind.ADDED, f"e{n}")], "chat", T0 + MINUTE)
    await audit.record(BOB, [change(ChangeKind.FORGOTTEN, "b1")], "chat", T0)
    forgotten = await audit.forgotten(ALICE)
    assert [(r.entry_id, r.content) for r in forgotten] == [
        ("new", "the new phone"),
        ("old", "the old phone"),
    ]
    # The limit counts forgotten entries, however many other changes came after them.
    assert [r.entry_id for r in await audit.forgotten(ALICE, limit=1)] == ["new"]


async def test_merged_sessions_are_remembered_per_scope(audit: AuditBackend) -> None:
    assert await audit.seen_sessions(ALICE) == frozenset()
    await audit.mark_session(ALICE, "s1", T0, {"added": 1})
    await audit.mark_session(ALICE, "s1", T0 + HOUR, {"added": 0})  # once is enough
    await audit.mark_session(ALICE, "s2", T0, {})
    await audit.mark_session(BOB, "s3", T0, {})
    assert await audit.seen_sessions(ALICE) == frozenset({"s1", "s2"})
    assert await audit.seen_sessions(BOB) == frozenset({"s3"})


async def test_scope_events_newest_first(audit: AuditBackend) -> None:
    await audit.add_event(ALICE, "history_overflow", T0, {"note": "forcing archive"})
    await audit.add_event(ALICE, "archive_backlog", T0 + MINUTE)
    await audit.add_event(BOB, "history_overflow", T0 + HOUR, {"count": 3})
    everything = await audit.events()
    assert [(e.scope, e.kind) for e in everything] == [
        (BOB.value, "history_overflow"),
        (ALICE.value, "archive_backlog"),
        (ALICE.value, "history_overflow"),
    ]
    [overflow] = await audit.events(ALICE, "history_overflow")
    assert (overflow.at, overflow.detail) == (T0, {"note": "forcing archive"})
    assert [e.detail for e in await audit.events(ALICE, limit=1)] == [{}]
    assert [e.scope for e in await audit.events(kind="history_overflow")] == [
        BOB.value,
        ALICE.value,
    ]
