"""`chatmem export` / `chatmem import` through the core (memory_core/portable/), on both
backends: a round trip gives the same files and search results, a second import adds
nothing, foreign sources (a workspace-like folder, a mem0 export) land in the scopes
they name, and nothing a file says can write into another scope or outside."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.entries import Importance
from memory_core.base.errors import ChatmemError
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import ScopeKey
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.portable.records import ImportRefused
from memory_core.recall.request import SearchRequest
from memory_core.storage.sessions import NewMessage

pytestmark = pytest.mark.storage

MAIN = ScopeKey("main")
BOB = ScopeKey.parse("telegram:peer:bob")
GROUP = ScopeKey.parse("group:telegram:-100")
BAD_BLOCK = "### [broken header without pipes\nthis block cannot be parsed"
IDENTITY = "## Identity\n\nA hand-written identity: the family's assistant.\n"
QUERIES = ("green tea", "Rex the dog", "Alice cafe", "sushi dinner", "budget meeting")


@contextmanager
def other_config(
    tmp_path: Path, name: str, storage_backend: str, request: pytest.FixtureRequest
) -> Iterator[Config]:
    """A second workspace, on the test's backend (its own schema on PostgreSQL)."""
    root = tmp_path / name
    root.mkdir()
    if storage_backend == "sqlite":
        yield load_config(None, env={}, workspace=root)
        return
    server = request.getfixturevalue("postgres_server")
    with server.schema() as dsn:
        env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
        yield load_config(None, env=env, workspace=root)


@asynccontextmanager
async def opened(config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(config, clock=clock) as core:
        yield core


async def fill(core: MemoryCore, clock: ManualClock) -> None:
    """Something of every kind the export carries, in three scopes."""
    memories = core.memories
    await memories.capture(MAIN, "I like green tea in the morning", category="preference")
    kept, _ = await memories.capture(MAIN, "Budget meeting every Monday at 10", category="fact")
    await memories.capture(MAIN, "Dinner plan: sushi on Friday", importance=Importance.HIGH)
    await memories.capture(BOB, "My dog is called Rex", category="relationship")
    await memories.capture(GROUP, "The group meets at the cafe", category="fact")
    await memories.flush()
    await memories.set_pinned(MAIN, kept.id, True)
    await core.notes.append(MAIN, "Met Alice at the cafe\nshe recommended oolong")
    clock.advance(timedelta(hours=2))
    await core.notes.append(MAIN, "Alice sent the cafe address")
    await core.notes.append(BOB, "Rex had a vet visit")
    start = clock()
    await core.record_session(
        BOB,
        "s-bob-1",
        start,
        [
            RecordedMessage("user", "bob", "I walked Rex to the park", start),
            RecordedMessage("assistant", "", "Rex must love the park", start + timedelta(1)),
        ],
    )
    await core.snapshots.rebuild(MAIN)
    snapshot = core.snapshots.path(MAIN)
    edited = snapshot.read_text(encoding="utf-8").replace("## Identity\n", IDENTITY, 1)
    snapshot.write_text(edited, encoding="utf-8")


async def fill_the_rest(core: MemoryCore, clock: ManualClock) -> str:
    """What the first pass of export left out: a forgotten entry (its id returned), a
    message with metadata that compaction set aside, and the group's older talk archived
    into a raw file and summaries."""
    gone, _ = await core.memories.capture(MAIN, "Old locker code is 4711", category="fact")
    await core.memories.flush()
    await core.memories.forget(MAIN, gone.id)
    history = core.history
    aside = await history.add_message(
        NewMessage(
            BOB,
            "s-bob-1",
            "user",
            "Rex chewed a shoe",
            clock(),
            meta={"via": "voice"},
            indexed=True,
        )
    )
    await history.mark_compacted([aside.id])
    for days, text in ((2, "We planned the cafe quiz night"), (20, "Quiz prizes were books"),
                       (60, "The group was founded in winter")):  # fmt: skip
        when = clock() - timedelta(days=days)
        session = await history.open_session(GROUP, when)
        await history.add_message(NewMessage(GROUP, session.id, "user", text, when, indexed=True))
    report = await core.conversation.archive(GROUP)
    assert report.moved == 1 and report.summarized == 2
    return gone.id


async def quarantine_one(core: MemoryCore) -> None:
    """A block the parser cannot read, put in main's file as a person's edit would, and
    the file written once more by the core (which keeps the block in its quarantine)."""
    path = core.memories.path(MAIN)
    path.write_text(path.read_text(encoding="utf-8") + "\n" + BAD_BLOCK + "\n", encoding="utf-8")
    await core.memories.capture(MAIN, "Quarantine noticed on a Tuesday")
    await core.memories.flush()


def files_of(root: Path) -> dict[str, str]:
    """Every Markdown file of a workspace but the snapshot (rebuilt, so its build time
    differs), the `Last updated` stamp of the long-term files left out."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root).as_posix()
        if path.name == "SNAPSHOT.md" or path.name.endswith(".bak"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        found[relative] = "\n".join(x for x in lines if not x.startswith("<!-- Last updated"))
    return found


async def results(core: MemoryCore) -> list[Any]:
    found = []
    for scope in (MAIN, BOB, GROUP):
        for query in QUERIES:
            hits = await core.finder.search(scope, SearchRequest(query, limit=8))
            # A message hit's line is its row id, which each database numbers itself.
            found.append([(h.path, h.line_from if h.kind != "message" else 0, h.kind, h.text,
                           round(h.score, 9)) for h in hits])  # fmt: skip
    return found


async def messages_of(core: MemoryCore, *scopes: ScopeKey) -> list[tuple[Any, ...]]:
    """Every message of the scopes' sessions with what an import must keep of it."""
    found = []
    for scope in scopes:
        for item in await core.history.sessions_by_state(scope, limit=100):
            for m in await core.history.session_messages(item.session_id, include_compacted=True):
                found.append((m.scope, m.role, m.content, m.created_at, m.archived, m.compacted,
                              m.meta))  # fmt: skip
    return sorted(found, key=repr)


async def export_to(core: MemoryCore, path: Path, *scopes: ScopeKey) -> Path:
    return write_lines(path, [t async for t in core.export_lines(scopes)])


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_a_round_trip_gives_the_same_files_and_search_results(
    core: MemoryCore,
    clock: ManualClock,
    tmp_path: Path,
    storage_backend: str,
    request: pytest.FixtureRequest,
) -> None:
    await fill(core, clock)
    gone = await fill_the_rest(core, clock)
    await quarantine_one(core)
    assert [p.block.text for p in await core.memories.validate()] == [BAD_BLOCK]
    exported = await export_to(core, tmp_path / "export.jsonl")
    kinds = [json.loads(x)["kind"] for x in exported.read_text("utf-8").splitlines()]
    assert kinds[0] == "header"
    assert "vector" not in exported.read_text("utf-8")
    counts = {k: kinds.count(k) for k in set(kinds)}
    assert counts == {
        "header": 1,
        "entry": 6,
        "quarantined": 1,
        "forgotten": 1,
        "note": 3,
        "archive": 1,
        "summary": 2,
        "session": 2,
        "message": 6,
        "audit": counts["audit"],
        "snapshot": 1,
    }
    before = await results(core)
    kinds_found = {hit[2] for found in before for hit in found}
    assert {"long_term", "daily", "message"} <= {str(k) for k in kinds_found}
    with other_config(tmp_path, "copy", storage_backend, request) as config:
        async with opened(config, clock) as copy:
            form, report = await copy.import_from(exported)
            assert form == "chatmem"
            assert dict(report.added) == {
                "entry": 6,
                "forgotten": 1,
                "note": 3,
                "archive": 1,
                "summary": 2,
                "session": 2,
                "message": 6,
                "audit": counts["audit"],
            }
            assert report.quarantined == 1
            assert sum(report.present.values()) == 0
            assert files_of(config.workspace_path) == files_of(core.workspace.root)
            assert await results(copy) == before
            assert await messages_of(copy, BOB, GROUP) == await messages_of(core, BOB, GROUP)
            assert [p.block.text for p in await copy.memories.validate()] == [BAD_BLOCK]
            assert IDENTITY in copy.snapshots.path(MAIN).read_text(encoding="utf-8")
            written = {p: (config.workspace_path / p).read_bytes() for p in files_of(
                config.workspace_path)}  # fmt: skip

            _, again = await copy.import_from(exported)
            assert sum(again.added.values()) == again.quarantined == 0
            assert dict(again.present) == {**report.added, "quarantined": 1}
            assert {p: (config.workspace_path / p).read_bytes() for p in written} == written
            assert await results(copy) == before

            restored = await copy.memories.restore(MAIN, gone)
            assert restored.content == "Old locker code is 4711"


async def test_only_the_named_scopes_are_exported_and_imported(
    core: MemoryCore,
    clock: ManualClock,
    tmp_path: Path,
    storage_backend: str,
    request: pytest.FixtureRequest,
) -> None:
    await fill(core, clock)
    exported = await export_to(core, tmp_path / "bob.jsonl", BOB)
    scopes = {json.loads(x).get("scope") for x in exported.read_text("utf-8").splitlines()[1:]}
    assert scopes == {BOB.value}
    everything = await export_to(core, tmp_path / "all.jsonl")
    with other_config(tmp_path, "copy", storage_backend, request) as config:
        async with opened(config, clock) as copy:
            _, report = await copy.import_from(everything, [GROUP])
            assert report.scopes == [GROUP.value]
            assert await copy.known_scopes() == [MAIN, GROUP]
            assert await copy.memories.entries(MAIN) == []


OPENCLAW_MEMORY = """# Long-term memory

## Preferences
- Prefers dark mode in every editor
- Drinks oolong, never coffee

## People
* Alice is my sister
  she lives in Lisbon

Some loose paragraph the parser cannot place.

### [abc123] fact | 0.50 | 2026-01-01 | 1
Owns a bicycle
"""
OPENCLAW_DAY = """# 2026-01-15

- 09:30 Standup moved to 10:00
- Bought a new keyboard
Paragraph about the afternoon.
"""


def openclaw(tmp_path: Path) -> Path:
    folder = tmp_path / "openclaw"
    (folder / "memory").mkdir(parents=True)
    (folder / "MEMORY.md").write_text(OPENCLAW_MEMORY, encoding="utf-8")
    (folder / "memory" / "2026-01-15.md").write_text(OPENCLAW_DAY, encoding="utf-8")
    (folder / "memory" / "notes.txt").write_text("not a daily file\n", encoding="utf-8")
    (folder / "memory" / "2026-13-45.md").write_text("- not a date\n", encoding="utf-8")
    return folder


async def test_a_workspace_folder_is_read_leniently_and_nothing_is_dropped(
    core: MemoryCore, tmp_path: Path
) -> None:
    folder = openclaw(tmp_path)
    form, report = await core.import_from(folder, [BOB])
    assert form == "workspace"
    assert report.scopes == [BOB.value]
    entries = {e.content: e.category for e in await core.memories.entries(BOB)}
    assert entries == {
        "Prefers dark mode in every editor": "preference",
        "Drinks oolong, never coffee": "preference",
        "Alice is my sister\nshe lives in Lisbon": "fact",
        "Owns a bicycle": "fact",
    }
    quarantined = [p.block.text for p in await core.memories.validate()]
    assert report.quarantined == 2
    assert quarantined == ["# Long-term memory", "Some loose paragraph the parser cannot place."]
    notes = core.workspace.daily_path(BOB, core.notes.today(clock_day(core, "2026-01-15")))
    assert notes.read_text(encoding="utf-8").splitlines()[-3:] == [
        "- 09:30:00 Standup moved to 10:00",
        "- 00:00:00 Bought a new keyboard",
        "- 00:00:00 Paragraph about the afternoon.",
    ]
    assert await core.memories.entries(MAIN) == []  # the folder went to --scope alone
    hits = await core.finder.search(BOB, "keyboard")
    assert hits and "keyboard" in hits[0].text

    _, again = await core.import_from(folder, [BOB])
    assert sum(again.added.values()) == again.quarantined == 0
    assert dict(again.present) == {"entry": 4, "note": 3, "quarantined": 2}


def clock_day(core: MemoryCore, day: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(day + "T12:00:00").replace(tzinfo=core.notes.zone)


MEM0 = [
    {"id": "1", "user_id": "alice", "memory": "Likes hiking", "created_at": "2025-03-01T10:00:00Z",
     "categories": ["hobbies"]},
    {"id": "2", "user_id": "bob", "memory": "Allergic to peanuts",
     "created_at": "2025-04-01T09:00:00-07:00"},
    {"id": "3", "user_id": "alice", "memory": "Works as a nurse", "created_at": "not a date"},
]  # fmt: skip


async def test_a_mem0_export_keeps_each_user_in_their_own_scope(
    core: MemoryCore, tmp_path: Path
) -> None:
    source = tmp_path / "mem0.json"
    source.write_text(json.dumps(MEM0), encoding="utf-8")
    form, report = await core.import_from(source)
    assert form == "mem0"
    assert sorted(report.scopes) == ["peer:alice", "peer:bob"]
    alice = await core.memories.entries(ScopeKey("peer:alice"))
    bob = await core.memories.entries(ScopeKey("peer:bob"))
    assert sorted(e.content for e in alice) == ["Likes hiking", "Works as a nurse"]
    assert [e.content for e in bob] == ["Allergic to peanuts"]
    assert {e.content: e.created_at.isoformat() for e in alice}["Likes hiking"] == (
        "2025-03-01T10:00:00+00:00"
    )
    assert await core.memories.entries(MAIN) == []
    _, again = await core.import_from(source)
    assert sum(again.added.values()) == 0
    assert dict(again.present) == {"entry": 3}

    with pytest.raises(ImportRefused, match="holds 2 users"):
        await core.import_from(source, [ScopeKey("peer:carol")])
    assert ScopeKey("peer:carol") not in await core.known_scopes()
    one = tmp_path / "one.json"
    one.write_text(json.dumps(MEM0[1:2]), encoding="utf-8")
    _, moved = await core.import_from(one, [ScopeKey("telegram:peer:42")])
    assert moved.scopes == ["telegram:peer:42"]


def export_file(path: Path, *records: dict[str, Any]) -> Path:
    head = {"kind": "header", "format": "chatmem-export", "format_version": 1}
    path.write_text("\n".join(json.dumps(r) for r in (head, *records)) + "\n", "utf-8")
    return path


def entry(entry_id: str, text: str) -> dict[str, Any]:
    return {"id": entry_id, "content": text, "category": "fact", "score": 0.6,
            "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip


async def test_crafted_scope_keys_and_session_ids_never_reach_another_scope(
    core: MemoryCore, clock: ManualClock, tmp_path: Path
) -> None:
    await fill(core, clock)
    bob_messages = await core.history.session_messages("s-bob-1")
    source = export_file(
        tmp_path / "crafted.jsonl",
        {"kind": "entry", "scope": "../../outside", "entry": entry("e1", "traversal text")},
        {"kind": "entry", "scope": "peer:../../../etc", "entry": entry("e2", "etc text")},
        {"kind": "note", "scope": "main/../peer:bob", "date": "2026-01-02", "time": "",
         "text": "slash note"},
        {"kind": "session", "scope": "peer:mallory", "id": "s-bob-1",
         "started_at": "2026-01-01T00:00:00Z", "status": "closed"},
        {"kind": "message", "scope": "peer:mallory", "session": "s-bob-1", "role": "user",
         "content": "planted into bob's session", "at": "2026-01-01T00:00:00Z"},
    )  # fmt: skip
    outside = names(tmp_path)
    _, report = await core.import_from(source)
    assert report.refused == 2  # the session and its message: bob's session id
    assert await core.history.session_messages("s-bob-1") == bob_messages
    assert names(tmp_path) == outside
    for key, text in (("../../outside", "traversal text"), ("peer:../../../etc", "etc text")):
        scope = ScopeKey.parse(key)
        assert [e.content for e in await core.memories.entries(scope)] == [text]
        assert core.memories.path(scope).resolve().is_relative_to(core.workspace.root.resolve())
    everyone = [e.content for s in (MAIN, BOB, GROUP) for e in await core.memories.entries(s)]
    assert not {"traversal text", "etc text"} & set(everyone)
    assert "slash note" not in core.workspace.daily_path(BOB, clock().date()).read_text("utf-8")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"kind": "entry", "scope": "peer:\u202eevil", "entry": entry("e1", "x")},
         "line 2: a scope key cannot contain"),
        ({"kind": "entry", "entry": entry("e1", "x")}, "line 2: no scope key"),
        ({"kind": "vector", "scope": "main"}, "line 2: unknown kind 'vector'"),
        ({"kind": "note", "scope": "main", "date": "../2026", "time": "", "text": "x"},
         "line 2: bad note record"),
        ({"kind": "entry", "scope": "main", "entry": entry("../x", "x")},
         "line 2: bad entry record"),
    ],
)  # fmt: skip
async def test_a_bad_record_refuses_the_whole_file(
    core: MemoryCore, tmp_path: Path, record: dict[str, Any], message: str
) -> None:
    good = {"kind": "entry", "scope": "main", "entry": entry("e0", "a good entry first")}
    source = export_file(tmp_path / "bad.jsonl", record, good)
    with pytest.raises(ImportRefused, match=message):
        await core.import_from(source)
    assert await core.memories.entries(MAIN) == []


async def test_a_newer_format_is_refused(core: MemoryCore, tmp_path: Path) -> None:
    source = tmp_path / "new.jsonl"
    head = {"kind": "header", "format": "chatmem-export", "format_version": 99}
    source.write_text(json.dumps(head) + "\n", encoding="utf-8")
    with pytest.raises(ImportRefused, match="version 99 is newer"):
        await core.import_from(source)


async def test_links_out_of_an_imported_folder_are_not_followed(
    core: MemoryCore, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("- 09:00 the secret outside\n", encoding="utf-8")
    folder = openclaw(tmp_path)
    (folder / "memory" / "2026-01-16.md").symlink_to(secret)
    _, report = await core.import_from(folder)
    assert report.added["note"] == 3  # the real day file's, not the link's
    (folder / "MEMORY.md").unlink()
    (folder / "MEMORY.md").symlink_to(secret)
    with pytest.raises(ChatmemError, match="outside"):
        await core.import_from(folder)


@pytest.mark.sqlite_only
async def test_without_the_database_nothing_half_is_exported_or_imported(
    config: Config, clock: ManualClock, tmp_path: Path
) -> None:
    """The history and audit live in the database: an export without them would look
    whole and not be, and an import of them would drop them silently."""
    async with opened(config, clock) as core:
        await fill(core, clock)
        exported = await export_to(core, tmp_path / "all.jsonl")
    damage(config.workspace_path / ".chatmem" / "index.sqlite3")
    async with opened(config, clock) as core:
        assert not core.has_database
        with pytest.raises(ChatmemError, match="the database is not open"):
            [t async for t in core.export_lines()]
        before = await core.memories.entries(MAIN)
        with pytest.raises(ImportRefused, match="holds audit, message, session records"):
            await core.import_from(exported)
        assert await core.memories.entries(MAIN) == before
        _, report = await core.import_from(openclaw(tmp_path))  # files alone still import
        assert report.added["entry"] == 4


def damage(path: Path) -> None:
    path.write_bytes(b"not a database" * 512)


async def test_two_spellings_of_one_key_are_refused_not_mixed(
    core: MemoryCore, tmp_path: Path
) -> None:
    """Keys are normalised where they enter (`ScopeKey.parse`): `peer:Ａｎｎ` is `peer:Ann`.
    Two people a source keeps apart must not become one scope silently."""
    source = export_file(
        tmp_path / "two.jsonl",
        {"kind": "entry", "scope": "peer:Ann", "entry": entry("e1", "Ann's fact")},
        {"kind": "entry", "scope": "peer:\uff21\uff4e\uff4e", "entry": entry("e2", "other")},
    )
    with pytest.raises(ImportRefused, match=r"line 3: scope keys 'peer:Ann' and .* one key now"):
        await core.import_from(source)
    mem0 = tmp_path / "mem0.json"
    users = [{"user_id": "Ann", "memory": "a"}, {"user_id": "\uff21\uff4e\uff4e", "memory": "b"}]
    mem0.write_text(json.dumps(users), encoding="utf-8")
    with pytest.raises(ImportRefused, match=r"item 2: user_ids 'Ann' and .* one scope key"):
        await core.import_from(mem0)
    assert await core.known_scopes() == [MAIN]
