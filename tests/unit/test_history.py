"""Session history caps: the soft cap drops the oldest archived
messages first and never an unarchived or pending one; past the hard cap (messages or
bytes) the overflow is reported, recorded as a `history_overflow` event and an archive is
forced."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.storage.history import HistoryStore
from memory_core.storage.sessions import ArchiveState, NewMessage, StoredMessage
from tests.conftest import START
from tests.support import sql, sql_write

pytestmark = [pytest.mark.storage, pytest.mark.timeout(60)]

ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")


async def fill(
    history: HistoryStore, scope: ScopeKey, count: int, *, size: int = 0, start: int = 0
) -> list[StoredMessage]:
    """`count` messages one second apart; `size` pads each to that many content bytes."""
    session = await history.open_session(scope, START)
    out = []
    for i in range(start, start + count):
        text = f"message {i:04d} "
        if size:
            text = text.ljust(size, "x")
        out.append(
            await history.add_message(
                NewMessage(
                    scope,
                    session.id,
                    "user" if i % 2 == 0 else "assistant",
                    text,
                    START + timedelta(seconds=i),
                ),
            )
        )
    return out


async def set_state(
    core: MemoryCore, messages: Sequence[StoredMessage], state: ArchiveState
) -> None:
    await sql_write(
        core,
        *[("UPDATE messages SET archived = ? WHERE id = ?", (state.value, m.id)) for m in messages],
    )


async def remaining(core: MemoryCore, scope: ScopeKey) -> dict[int, str]:
    rows = await sql(
        core, "SELECT id, archived FROM messages WHERE scope = ? ORDER BY id", scope.value
    )
    return {int(r[0]): str(r[1]) for r in rows}


async def events(core: MemoryCore, scope: ScopeKey, kind: str) -> int:
    return len(await core.audit.events(scope, kind))


# --- the soft cap ---------------------------------------------------------------------------------


async def test_at_the_soft_cap_nothing_is_removed(core: MemoryCore) -> None:
    history = core.history
    messages = await fill(history, ALICE, 200)
    await set_state(core, messages, ArchiveState.TRUE)
    report = await history.enforce_caps(ALICE)
    assert (report.removed, report.over_soft, report.overflow) == ([], False, False)
    assert len(await remaining(core, ALICE)) == 200


async def test_soft_cap_removes_the_oldest_archived_first(core: MemoryCore) -> None:
    history = core.history
    messages = await fill(history, ALICE, 250)
    # Oldest 50 unarchived, then 100 archived, then 100 unarchived.
    await set_state(core, messages[50:150], ArchiveState.TRUE)
    report = await history.enforce_caps(ALICE)
    assert report.removed == [m.id for m in messages[50:100]]
    assert (report.over_soft, report.overflow) == (False, False)
    left = await remaining(core, ALICE)
    assert len(left) == 200
    assert all(m.id in left for m in messages[:50] + messages[150:])
    assert await history.counts(ALICE) == {"false": 150, "pending": 0, "true": 50}


async def test_only_unarchived_and_pending_may_exceed_the_soft_cap(core: MemoryCore) -> None:
    history = core.history
    messages = await fill(history, ALICE, 260)
    await set_state(core, messages[:60], ArchiveState.PENDING)
    report = await history.enforce_caps(ALICE)
    assert report.removed == []
    assert (report.over_soft, report.overflow) == (True, False)
    assert len(await remaining(core, ALICE)) == 260


async def test_archived_are_removed_but_never_the_pending_before_them(core: MemoryCore) -> None:
    history = core.history
    messages = await fill(history, ALICE, 240)
    await set_state(core, messages[:30], ArchiveState.PENDING)
    await set_state(core, messages[30:50], ArchiveState.TRUE)
    report = await history.enforce_caps(ALICE)
    assert report.removed == [m.id for m in messages[30:50]]  # all 20 archived, still over
    assert (report.over_soft, report.overflow) == (True, False)
    left = await remaining(core, ALICE)
    assert len(left) == 220
    assert all(left[m.id] == "pending" for m in messages[:30])


async def test_caps_count_per_scope(core: MemoryCore) -> None:
    history = core.history
    bobs = await fill(history, BOB, 250)
    await set_state(core, bobs, ArchiveState.TRUE)
    await fill(history, ALICE, 150)
    assert (await history.enforce_caps(ALICE)).removed == []
    assert len(await remaining(core, BOB)) == 250
    assert len((await history.enforce_caps(BOB)).removed) == 50


# --- the hard cap ---------------------------------------------------------------------------------


async def test_hard_cap_by_count_reports_overflow(core: MemoryCore) -> None:
    history = core.history
    messages = await fill(history, ALICE, 320)
    await set_state(core, messages[:10], ArchiveState.TRUE)
    report = await history.enforce_caps(ALICE)
    assert report.removed == [m.id for m in messages[:10]]
    assert (report.over_soft, report.overflow) == (True, True)
    assert len(await remaining(core, ALICE)) == 310


@pytest.fixture
def small_bytes_config(config: Config) -> Config:
    return config.model_copy(
        update={"history": config.history.model_copy(update={"hard_cap_bytes": 20_000})}
    )


async def test_hard_cap_by_bytes_removes_archived_first(
    small_bytes_config: Config, clock: ManualClock
) -> None:
    async with MemoryCore.open(small_bytes_config, clock=clock) as core:
        history = core.history
        messages = await fill(history, ALICE, 100, size=298)  # 300 bytes each with meta '{}'
        await set_state(core, messages[:50], ArchiveState.TRUE)
        report = await history.enforce_caps(ALICE)
        # 30 000 bytes → at most 20 000: the 34 oldest archived go, nothing else.
        assert report.removed == [m.id for m in messages[:34]]
        assert (report.over_soft, report.overflow) == (False, False)
        left = await remaining(core, ALICE)
        assert len(left) == 66
        assert all(m.id in left for m in messages[50:])


async def test_hard_cap_by_bytes_with_nothing_archived_overflows(
    small_bytes_config: Config, clock: ManualClock
) -> None:
    async with MemoryCore.open(small_bytes_config, clock=clock) as core:
        history = core.history
        await fill(history, ALICE, 80, size=298)
        report = await history.enforce_caps(ALICE)
        assert report.removed == []
        assert (report.over_soft, report.overflow) == (False, True)
        assert len(await remaining(core, ALICE)) == 80


async def test_overflow_after_a_turn_records_event_and_forces_archive(core: MemoryCore) -> None:
    history = core.history
    await fill(history, ALICE, 310)
    assert await core.conversation.archiver.due(ALICE, core.now())  # > 100 unarchived anyway
    await core.conversation.after_turn(ALICE)
    assert await events(core, ALICE, "history_overflow") == 1
    # The forced archive ran (offline: raw copies of these recent messages), then the caps
    # could drop the archived ones down to the soft cap.
    assert await history.counts(ALICE) == {"false": 0, "pending": 0, "true": 200}
    raw = list(core.workspace.memory_dir(ALICE).glob("2026-03-01-*.md"))
    assert len(raw) == 1
    text = raw[0].read_text(encoding="utf-8")
    assert "message 0000" in text and "message 0309" in text


async def test_over_soft_cap_archives_and_trims_without_overflow_event(core: MemoryCore) -> None:
    history = core.history
    messages = await fill(history, ALICE, 250)
    await core.conversation.after_turn(ALICE)
    assert await events(core, ALICE, "history_overflow") == 0
    assert await history.counts(ALICE) == {"false": 0, "pending": 0, "true": 200}
    assert list(await remaining(core, ALICE)) == [m.id for m in messages[50:]]
