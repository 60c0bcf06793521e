"""`chatmem erase --person` finds a member's group lines by the sender id their
messages and entries kept, not by the name the platform showed: two members with one
name, a member renamed, and older lines (no id) that still go by name."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter
from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.erasure.people import GroupRow, Traces, erased_messages, group_speakers
from tests.support import clean_cli_env, sql
from tests.unit.test_erase import cli, database_dump, holders, no_secure_delete, workspace_bytes

__all__ = ["no_secure_delete"]  # the fixture, used by name below

GROUP = ScopeKey("group:telegram:-100")
_ids = itertools.count(1)


def said(sender: str, name: str, text: str) -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        account_id="bot1",
        sender_id=sender,
        sender_name=name,
        chat_type="group",
        chat_id="-100",
        text=text,
        message_id=str(next(_ids)),
        timestamp=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        mentioned=True,
    )


async def in_the_group(core: MemoryCore, *lines: tuple[str, str, str]) -> None:
    """Each (sender id, name, text) said in the group, through the router as a bot gets it."""
    router = MessageRouter(core, bot_username="chatmem_bot")
    for sender, name, text in lines:
        await router.handle(said(sender, name, text))


async def erase(
    config: Config,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    person: str,
) -> str:
    """`chatmem erase --person PERSON`, its dry run first: the dry run's listing."""
    clean_cli_env(tmp_path, monkeypatch)
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    root = str(config.workspace_path)
    code, listing, err = await cli(
        capsys, "--workspace", root, "erase", "--person", person, "--dry-run"
    )
    assert code == 0, err
    code, _out, err = await cli(capsys, "--workspace", root, "erase", "--person", person, "--yes")
    assert code == 0, err
    return listing


def left(config: Config, storage_env: Mapping[str, str], words: list[str]) -> dict[str, list[str]]:
    """Where each word still is: the workspace's files and the database."""
    files = workspace_bytes(config.workspace_path)
    dump = database_dump(storage_env)
    return {word: holders(word, files, dump) for word in words}


@pytest.mark.storage
@pytest.mark.usefixtures("no_secure_delete")
async def test_two_members_with_one_name_erasing_one_keeps_the_other(
    config: Config,
    clock: ManualClock,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await in_the_group(
            core,
            ("42", "Alice", "my locker code is zqaliceaturn today"),
            ("44", "Alice", "my bike lock is zqalicebturn now"),
            ("43", "Bob", "hello everyone zqbobturn here"),
            ("42", "Alice", "/remember I keep bees named zqaliceabees"),
            ("44", "Alice", "/remember I keep goats named zqalicebgoats"),
        )
        entries = await core.memories.entries(GROUP)
        assert {(e.speaker, e.speaker_id) for e in entries} == {("Alice", "42"), ("Alice", "44")}
        # As a session's extraction keeps it: the name alone, which both members use.
        await core.memories.capture(GROUP, "goes hiking on sundays zqaliceunsure", speaker="Alice")
        kept = await sql(core, "SELECT speaker, speaker_id FROM messages WHERE role = 'user'")
        assert sorted(tuple(r) for r in kept) == [("Alice", "42"), ("Alice", "44"), ("Bob", "43")]
        clock.advance(timedelta(days=40))
        await core.conversation.archive(GROUP)  # archive lines say "Alice: …" for both
    listing = await erase(config, storage_env, tmp_path, monkeypatch, capsys, "telegram:42")
    assert "group messages matched by sender id: 1, by name: 0" in listing
    assert "names another member also speaks under" in listing and "Alice" in listing
    assert "1 kept unsure shared name" in listing  # whose it is cannot be told: it stays

    gone = left(config, storage_env, ["zqaliceaturn", "zqaliceabees"])
    assert gone == {"zqaliceaturn": [], "zqaliceabees": []}
    words = ["zqalicebturn", "zqalicebgoats", "zqbobturn", "zqaliceunsure"]
    intact = left(config, storage_env, words)
    assert all(intact.values()), intact
    async with MemoryCore.open(config, clock=clock) as core:
        ids = sorted(str(e.speaker_id) for e in await core.memories.entries(GROUP))
        assert ids == ["44", "None"]
        rows = await sql(core, "SELECT speaker_id FROM messages WHERE role = 'user' ORDER BY id")
        assert [r[0] for r in rows] == ["44", "43"]


@pytest.mark.storage
@pytest.mark.usefixtures("no_secure_delete")
async def test_a_member_renamed_between_two_messages_loses_both(
    config: Config,
    clock: ManualClock,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await in_the_group(
            core,
            ("42", "Alice", "my locker code is zqrenamedfirst today"),
            ("43", "Bob", "hello everyone zqrenamedbob here"),
            ("42", "Alicia W", "my new locker is zqrenamedsecond now"),
        )
    listing = await erase(config, storage_env, tmp_path, monkeypatch, capsys, "telegram:42")
    assert "group messages matched by sender id: 2, by name: 0" in listing
    assert left(config, storage_env, ["zqrenamedfirst", "zqrenamedsecond"]) == {
        "zqrenamedfirst": [],
        "zqrenamedsecond": [],
    }
    assert all(left(config, storage_env, ["zqrenamedbob"]).values())


@pytest.mark.storage
@pytest.mark.usefixtures("no_secure_delete")
async def test_old_rows_without_an_id_still_go_by_name(
    config: Config,
    clock: ManualClock,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        chat = core.conversation
        # Their own chat tells their name; the group's older lines kept no id.
        await chat.turn(ScopeKey("telegram:peer:45"), "hi there zqcaroldm", speaker="Carol")
        await chat.turn(GROUP, "my old locker was zqcarololdline", speaker="Carol")
        await chat.turn(GROUP, "my old locker was zqdaveoldline", speaker="Dave")
        await in_the_group(
            core,
            ("45", "Carol", "my new locker is zqcarolnewline"),
            ("46", "Dave", "my new locker is zqdavenewline"),
        )
    listing = await erase(config, storage_env, tmp_path, monkeypatch, capsys, "telegram:45")
    assert "group messages matched by sender id: 1, by name: 1" in listing
    assert "group lines found by name: Carol" in listing
    words = ["zqcaroldm", "zqcarololdline", "zqcarolnewline"]
    assert left(config, storage_env, words) == {w: [] for w in words}
    assert all(left(config, storage_env, ["zqdaveoldline", "zqdavenewline"]).values())


def test_lines_are_matched_by_id_and_by_name_only_without_one() -> None:
    rows: list[GroupRow] = [
        (1, "s1", "user", "Alice", "42", "mine"),
        (2, "s1", "assistant", "", None, "reply to 42"),
        (3, "s1", "user", "Alice", "44", "the other Alice"),
        (4, "s1", "assistant", "", None, "reply to 44"),
        (5, "s1", "user", "Alice", None, "an old line"),
        (6, "s1", "user", "Ali", "42", "renamed"),
    ]
    traces = Traces(frozenset({"Alice"}), id="42")
    assert erased_messages(rows, traces) == [1, 2, 5, 6]
    speakers = group_speakers(rows, traces, [("Ann", "42"), ("Zed", "47")])
    assert speakers.own == {"Alice", "Ali", "Ann"} and speakers.shared == {"Alice", "Zed"}
    assert (speakers.by_id, speakers.by_name) == (2, 1)


async def test_an_export_and_import_keep_the_sender_ids(
    config: Config,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await in_the_group(
            core,
            ("42", "Alice", "my locker code is zqexportturn today"),
            ("42", "Alice", "/remember I keep bees named zqexportbees"),
        )
    clean_cli_env(tmp_path, monkeypatch)
    source, target = str(config.workspace_path), str(tmp_path / "target")
    code, out, err = await cli(capsys, "export", "--scope", GROUP.value, "--workspace", source)
    assert code == 0, err
    dump = tmp_path / "export.jsonl"
    dump.write_text(out, encoding="utf-8")
    assert (await cli(capsys, "init", "--workspace", target))[0] == 0
    code, _out, err = await cli(capsys, "import", str(dump), "--workspace", target)
    assert code == 0, err
    imported = load_config(None, env={}, workspace=Path(target))
    async with MemoryCore.open(imported, clock=clock) as core:
        assert [e.speaker_id for e in await core.memories.entries(GROUP)] == ["42"]
        rows = await sql(core, "SELECT speaker_id FROM messages WHERE role = 'user'")
        assert [r[0] for r in rows] == ["42"]
