"""Layer 3, the raw event log: typed events of a chat, append-only JSONL per scope and day,
whole after crashes and concurrent writers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.notes.event_log import (
    MAX_TEXT_CHARS,
    Event,
    EventKind,
    append_blocking,
    decision_events,
    message_events,
    read_blocking,
)
from testkit.openai_server import FakeOpenAI
from testkit.waiting import until_sync
from tests.conftest import START
from tests.unit.chat_support import fake_fixture, model_config  # noqa: F401  (the fake model fixture)

ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def kinds(events: list[Event]) -> list[str]:
    return [event.kind.value for event in events]


# --- the file ---------------------------------------------------------------------------


def test_events_round_trip_in_order(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-01.jsonl"
    first = message_events("user", "你好, is it sunny?", AT, "s1", "alice")
    append_blocking(path, first, root=tmp_path)
    append_blocking(
        path, message_events("assistant", "Sunny.", AT + timedelta(seconds=2), "s1"), root=tmp_path
    )
    log = read_blocking(path, root=tmp_path)
    assert log.unreadable == 0
    assert kinds(log.events) == ["input", "output"]
    assert log.events[0] == first[0]
    assert log.events[0].data == {"speaker": "alice", "text": "你好, is it sunny?"}
    assert log.events[1].at == AT + timedelta(seconds=2)
    assert all(line.startswith('{"at":') for line in path.read_text().splitlines())


def test_message_kinds() -> None:
    tool = message_events(
        "tool", '{"results": []}', AT, "s1", "memory_search", {"arguments": '{"query": "x"}'}
    )
    assert kinds(tool) == ["action", "result"]
    assert tool[0].data == {"tool": "memory_search", "arguments": '{"query": "x"}'}
    failed = message_events("assistant", "Sorry", AT, "s1", meta={"error": "HTTP 500"})
    assert kinds(failed) == ["error", "output"]
    assert failed[0].data == {"stage": "model", "detail": "HTTP 500"}
    assert message_events("summary", "a summary", AT, "s1") == []
    decided = decision_events("remember", [("add", "a1b2c3d4")], AT, None)
    assert [(e.kind, e.data["change"], e.data["entry"]) for e in decided] == [
        (EventKind.DECISION, "add", "a1b2c3d4")
    ]


def test_long_texts_are_cut(tmp_path: Path) -> None:
    path = tmp_path / "day.jsonl"
    append_blocking(
        path, message_events("user", "x" * (MAX_TEXT_CHARS * 3), AT, None), root=tmp_path
    )
    (event,) = read_blocking(path, root=tmp_path).events
    assert len(event.data["text"]) == MAX_TEXT_CHARS and event.data["text"].endswith("…")


def test_appends_never_rewrite_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "day.jsonl"
    seen = b""
    for n in range(20):
        append_blocking(path, message_events("user", f"message {n}", AT, "s"), root=tmp_path)
        now = path.read_bytes()
        assert now.startswith(seen) and len(now) > len(seen)
        seen = now
    assert [e.data["text"] for e in read_blocking(path, root=tmp_path).events] == [
        f"message {n}" for n in range(20)
    ]


def test_a_torn_line_is_kept_apart_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "day.jsonl"
    append_blocking(path, message_events("user", "before", AT, "s"), root=tmp_path)
    with path.open("ab") as torn:
        torn.write(b'{"at":"2026-03-01T12:00:01Z","type":"inp')
    append_blocking(path, message_events("user", "after", AT, "s"), root=tmp_path)
    log = read_blocking(path, root=tmp_path)
    assert [e.data["text"] for e in log.events] == ["before", "after"]
    assert log.unreadable == 1
    assert b'"type":"inp\n' in path.read_bytes()  # the torn bytes stay as they were


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "day.jsonl"

    def writer(name: str) -> None:
        for n in range(100):
            append_blocking(
                path, message_events("user", f"{name} {n} " + "y" * 3000, AT, name), root=tmp_path
            )

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log = read_blocking(path, root=tmp_path)
    assert log.unreadable == 0 and len(log.events) == 400
    for i in range(4):
        mine = [e.data["text"].split()[1] for e in log.events if e.session == f"w{i}"]
        assert mine == [str(n) for n in range(100)]


CRASHING_WRITER = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from memory_core.notes.event_log import append_blocking, message_events
path = Path(sys.argv[1])
n = 0
while True:
    append_blocking(path, message_events("user", f"note {n} " + "z" * 5000, datetime.now(UTC), "s"), root=path.parent)
    n += 1
    if n == 5:
        print("writing", flush=True)
"""


@pytest.mark.parametrize("round_", range(5))
def test_a_writer_killed_mid_append_loses_nothing_before_it(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "day.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_WRITER, str(path)], stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdout.readline() == b"writing\n"
    # Each round kills the writer further along: after `round_` more notes of 5 000 bytes.
    written = path.stat().st_size
    until_sync(lambda: path.stat().st_size >= written + round_ * 5000, what="more notes")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    log = read_blocking(path, root=tmp_path)
    # Each append is one write; the kernel may still stop a write between two pages when
    # the kill comes, so at most the last line is torn, and nothing before it is lost.
    assert log.unreadable <= 1
    numbers = [int(e.data["text"].split()[1]) for e in log.events]
    assert numbers == list(range(len(numbers))) and len(numbers) >= 5
    append_blocking(path, message_events("user", "after the crash", AT, "s"), root=tmp_path)
    after = read_blocking(path, root=tmp_path)
    assert after.events[-1].data["text"] == "after the crash"
    assert after.unreadable == log.unreadable and len(after.events) == len(numbers) + 1


# --- the chat writes it ---------------------------------------------------------------------


async def test_a_chat_turn_logs_its_facts_in_its_scope(
    fake: FakeOpenAI,
    workspace: Path,
    clock: ManualClock,
) -> None:
    async with MemoryCore.open(model_config(fake, workspace), clock=clock) as core:
        fake.reply_tool_calls([("memory_search", {"query": "tea"})])
        fake.reply_text("You like green tea.")
        turn = await core.conversation.turn(ALICE, "what do I drink?", speaker="alice")
        fake.fail(500, times=1, retry_after=0)
        await core.conversation.turn(ALICE, "and now?")
        await core.conversation.chat.remember(ALICE, "I drink green tea every morning")
        log = await core.event_log.read(ALICE, core.notes.today())
        assert log.unreadable == 0
        assert kinds(log.events) == [
            "input", "action", "result", "output",
            "input", "error", "output",
            "decision",
        ]  # fmt: skip
        assert log.events[0].data == {"speaker": "alice", "text": "what do I drink?"}
        assert log.events[0].session == turn.session_id
        assert json.loads(log.events[1].data["arguments"]) == {"query": "tea"}
        assert log.events[3].data["text"] == "You like green tea."
        assert "500" in log.events[5].data["detail"]
        assert log.events[-1].data["change"] == "add"
        (entry,) = await core.memories.entries(ALICE)
        assert log.events[-1].data == {"what": "remember", "change": "add", "entry": entry.id}
        assert (await core.event_log.read(BOB, core.notes.today())).events == []
        assert await core.event_log.days(ALICE) == [START.date()]
        assert core.workspace.memory_dir(ALICE).joinpath(f"{START.date()}.jsonl").exists()
        # A day without a log is empty, not an error.
        assert (await core.event_log.read(ALICE, date(2020, 1, 1))).events == []


async def test_a_failing_log_never_fails_the_turn(
    core: MemoryCore, caplog: pytest.LogCaptureFixture
) -> None:
    """The log records what happened; a disk that refuses it (here: a directory where the
    day's file should be) is said once, and the turn and its stored message go on."""
    log_file = core.workspace.memory_dir(ALICE) / f"{START.date()}.jsonl"
    log_file.mkdir(parents=True)
    with caplog.at_level("WARNING", logger="memory_core.notes.event_log"):
        first = await core.conversation.turn(ALICE, "hello there")
        await core.conversation.turn(ALICE, "and again")
    assert first.reply
    assert caplog.text.count("event log of scope peer:alice not written") == 1
    log_file.rmdir()
    with caplog.at_level("WARNING", logger="memory_core.notes.event_log"):
        await core.conversation.turn(ALICE, "now it works")
    assert "event log written again" in caplog.text
    assert [
        e.data["text"] for e in (await core.event_log.read(ALICE, core.notes.today())).events
    ] == ["now it works"]


def test_redaction_blanks_a_text_wherever_it_stands(tmp_path: Path) -> None:
    from memory_core.notes.event_log import PURGED, redact_blocking

    secret = 'my PIN is "4711"'
    day = tmp_path / "2026-03-01.jsonl"
    append_blocking(day, message_events("user", f"remember {secret}", AT, "s"), root=tmp_path)
    arguments = json.dumps({"content": secret, "target": "long-term"})
    append_blocking(
        day,
        message_events("tool", "{}", AT, "s", "memory_save", {"arguments": arguments}),
        root=tmp_path,
    )
    with day.open("ab") as torn:
        torn.write(json.dumps(secret)[1:-1].encode() + b" torn")
    other = tmp_path / "2026-03-02.jsonl"
    append_blocking(other, message_events("user", "nothing to see", AT, "s"), root=tmp_path)
    before = other.read_bytes()
    assert redact_blocking(tmp_path, tmp_path, [secret]) == 1
    raw = day.read_bytes().decode()
    assert "4711" not in raw and PURGED in raw
    log = read_blocking(day, root=tmp_path)
    assert log.events[0].data["text"] == f"remember {PURGED}"
    assert json.loads(log.events[1].data["arguments"])["content"] == PURGED
    assert other.read_bytes() == before
    assert redact_blocking(tmp_path, tmp_path, [secret]) == 0


async def test_purge_blanks_the_text_in_the_event_log_too(core: MemoryCore) -> None:
    await core.conversation.turn(ALICE, "remember my locker code is 4711")
    (entry,) = await core.memories.entries(ALICE)
    assert "4711" in json.dumps(
        [e.data for e in (await core.event_log.read(ALICE, core.notes.today())).events]
    )
    await core.memories.forget(ALICE, entry.id)
    await core.purge(ALICE, [entry.id])
    events = (await core.event_log.read(ALICE, core.notes.today())).events
    assert kinds(events) == ["input", "decision", "output"]
    assert "4711" not in json.dumps([e.data for e in events])
