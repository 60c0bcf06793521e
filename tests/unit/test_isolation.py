"""Scope isolation under hostile input: crafted scope ids, FTS5 syntax as queries, paths
that try to leave the scope through memory_get, and concurrent chats."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.errors import ChatmemError, PathRefused
from memory_core.base.scope import MAIN, ScopeKey, scope_slug
from memory_core.base.text import tokenize
from memory_core.config import Config, load_config
from memory_core.conversation.tools import dispatch
from memory_core.engine import MemoryCore
from memory_core.recall.index import Hit
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import chunk_counts, database, index_message, sql

pytestmark = pytest.mark.storage

SCOPES = [
    MAIN,
    ScopeKey("peer:1"),
    ScopeKey("peer:2"),
    ScopeKey("group:telegram:-100"),
    ScopeKey('peer:"; DROP TABLE chunks; --'),
    ScopeKey("peer:' OR 1=1"),
    ScopeKey("group:x:*"),
    ScopeKey("peer:NEAR(a b)"),
    ScopeKey("../../etc"),
    ScopeKey("peer:../main"),
    ScopeKey("peer:用户😀 Ünïcödé\u200b"),
    ScopeKey("group:telegram:" + "长" * 95 + "z" * 200),
]
assert len(SCOPES[-1].value) == 310
SESSION = "shared-session"
"""Every scope uses the same session id: only the scope may tell their messages apart."""

HOSTILE_QUERIES = [
    "NEAR(a b)",
    '"',
    '"unterminated',
    "*",
    "a OR b",
    "-x",
    "a AND NOT b",
    "col:term",
    "tokens:term",
    "^start",
    "(((",
    ")))",
    "",
    "   \t\n",
    "the of and is",  # English stopwords only
    "的 了 是",  # Chinese stopwords only
    "NEAR",
    "AND",
    "OR NOT",
    "''; DROP TABLE chunks; --",
    "%_%",
    "\x00",
    "🙂🙂",
    "{tokens}: x",
    "x" * 5000,
]


def marker(scope: ScopeKey) -> str:
    """A word only this scope's memories contain (one token, never stemmed)."""
    return f"mk{SCOPES.index(scope):02d}zq"


def scope_prefix(core: MemoryCore, scope: ScopeKey) -> str:
    return core.workspace.relative(core.workspace.memory_dir(scope)) + "/"


def owned(core: MemoryCore, scope: ScopeKey, hit: Hit) -> bool:
    """Whether a hit is one of the scope's own files or sessions."""
    if hit.path.startswith("sessions/"):
        return True
    if scope.is_main:
        return hit.path == "MEMORY.md" or (
            hit.path.startswith("memory/") and not hit.path.startswith("memory/scopes/")
        )
    return hit.path.startswith(scope_prefix(core, scope))


def assert_own(core: MemoryCore, scope: ScopeKey, hits: list[Hit], query: object) -> None:
    others = {marker(s) for s in SCOPES if s != scope}
    for hit in hits:
        assert owned(core, scope, hit), (scope, query, hit)
        leaked = others & set(tokenize(hit.text))
        assert not leaked, f"{scope} searching {query!r} got {leaked}: {hit}"


async def populate(core: MemoryCore) -> None:
    """Every scope gets a long-term entry, two daily notes, a summary and a message."""
    assert core.guard.index is not None
    for number, scope in enumerate(SCOPES):
        word = marker(scope)
        await core.memories.capture(scope, f"secret long-term fact {word} of scope {number}")
        await core.notes.append(scope, f"daily note {word} written today")
        await core.notes.append(scope, f"older note {word}", now=START - timedelta(days=3))
        summary = core.workspace.summary_dir(scope)
        summary.mkdir(parents=True, exist_ok=True)
        (summary / "2026-02.md").write_text(
            f"# 2026-02\n\nFebruary summary {word}\n", encoding="utf-8"
        )
        await index_message(core, scope, SESSION, 1, "user", f"message {word}", START)
    await core.guard.index.sync_all()


@pytest.fixture(scope="module")
def populated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per module; each test works on a copy."""
    root = tmp_path_factory.mktemp("isolation") / "ws"
    root.mkdir()

    async def build() -> None:
        config = load_config(None, env={}, workspace=root)
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            await populate(core)

    asyncio.run(build())
    return root


@pytest.fixture
async def populated(
    populated_template: Path, config: Config, clock: ManualClock, storage_backend: str
) -> AsyncIterator[MemoryCore]:
    """A copy of the SQLite template; on PostgreSQL (whose rows are not in the copied
    workspace) the same scopes written afresh into the test's own schema."""
    if storage_backend == "sqlite":
        workspace = Path(config.workspace)
        shutil.rmtree(workspace)
        shutil.copytree(populated_template, workspace, symlinks=True)
    async with MemoryCore.open(config, clock=clock) as core:
        if storage_backend != "sqlite":
            await populate(core)
        yield core


async def test_every_scope_finds_its_own_marker(populated: MemoryCore) -> None:
    core = populated
    for scope in SCOPES:
        # The marker is in every chunk of the scope, so its idf is small: no floor.
        hits = await core.finder.search(
            scope, SearchRequest(marker(scope), limit=20, min_score=0.0)
        )
        assert {h.kind.value for h in hits} == {
            "long_term",
            "daily",
            "summary",
            "message",
        }, scope
        assert len(hits) == 5
        assert_own(core, scope, hits, marker(scope))
    rows = {r[1]: r[0] for r in await sql(core, "SELECT id, key FROM scopes")}
    assert {s.value for s in SCOPES} <= set(rows)
    if database(core).dialect.name == "sqlite":
        # One FTS table, each term keyed by its scope: no table per scope is left.
        tables = {
            r[0]
            for r in await sql(
                core,
                "SELECT name FROM sqlite_master WHERE name GLOB 'fts_*' AND type = 'table'",
            )
        }
        assert "fts_scoped" in tables
        assert not {f"fts_{rows[s.value]}" for s in SCOPES} & tables
    else:
        # One scope's posting keys are not another's: the same word hashes apart.
        ids = sorted(rows[s.value] for s in SCOPES)
        for a, b in itertools.pairwise(ids):
            [(shared,)] = await sql(
                core, "SELECT chatmem_postings(?, 'word') && chatmem_postings(?, 'word')", a, b
            )
            assert shared is False
    # The crafted key did nothing to the tables it names.
    [row] = await sql(core, "SELECT COUNT(*) FROM chunks")
    assert row[0] >= 5 * len(SCOPES)


async def test_no_scope_sees_another_scopes_marker(populated: MemoryCore) -> None:
    core = populated
    for reader, owner in itertools.permutations(SCOPES, 2):
        word = marker(owner)
        for query in (word, f"{word} {marker(reader)}", [word], f'"{word}"', f"{word}*"):
            hits = await core.finder.search(reader, SearchRequest(query, limit=50, min_score=0.0))
            assert_own(core, reader, hits, query)
        injection = await core.finder.recall(
            reader, f"do you remember {word}?", [f"还记得 {word} 吗"]
        )
        assert word not in injection.block
        for hit in injection.hits:
            assert owned(core, reader, hit)


async def test_fts_syntax_queries_never_raise_or_leak(populated: MemoryCore) -> None:
    core = populated
    for scope in SCOPES:
        own = marker(scope)
        others = [marker(s) for s in SCOPES if s != scope]
        probes = [
            *HOSTILE_QUERIES,
            f"NEAR({own} {others[0]})",
            f"{own} OR {others[0]}",
            f"{own} AND NOT {others[1]}",
            f"tokens:{others[2]}",
            f"^{others[0]}",
            f'"{own}" OR "{others[0]}"',
            f"{others[0]}* OR *",
            ['"', "NEAR(", others[0], "*"],
            [],
        ]
        for query in probes:
            hits = await core.finder.search(scope, SearchRequest(query, limit=20, min_score=0.0))
            assert_own(core, scope, hits, query)
            injection = await core.finder.recall(scope, query if isinstance(query, str) else "")
            for hit in injection.hits:
                assert owned(core, scope, hit)
    # Nothing was dropped or altered by any of it.
    for scope in SCOPES:
        assert (
            len(
                await core.finder.search(
                    scope, SearchRequest(marker(scope), limit=20, min_score=0.0)
                )
            )
            == 5
        )


async def test_degraded_search_is_isolated_too(populated: MemoryCore) -> None:
    core = populated
    core.guard.index = None  # as after an index failure: answers come from files
    for reader, owner in itertools.permutations(SCOPES[:6], 2):
        hits = await core.finder.search(
            reader, SearchRequest(marker(owner), limit=50, min_score=0.0)
        )
        assert hits == []
    for scope in SCOPES:
        hits = await core.finder.search(
            scope, SearchRequest(marker(scope), limit=20, min_score=0.0)
        )
        assert len(hits) == 4  # files only: messages live in the database
        assert_own(core, scope, hits, marker(scope))
        for query in HOSTILE_QUERIES:
            assert_own(
                core,
                scope,
                await core.finder.search(scope, SearchRequest(query, min_score=0.0)),
                query,
            )


# --- memory_get -------------------------------------------------------------------------


async def refused(core: MemoryCore, scope: ScopeKey, path: str) -> None:
    with pytest.raises(ChatmemError):
        await core.finder.read(scope, path)
    result = json.loads(await dispatch(core.tool_context(scope), "memory_get", {"path": path}))
    assert set(result) == {"error"}, (scope, path, result)


def other_files(core: MemoryCore, owner: ScopeKey) -> list[str]:
    ws = core.workspace
    return [
        ws.relative(ws.long_term_path(owner)),
        ws.relative(ws.daily_path(owner, START.date())),
        ws.relative(ws.summary_dir(owner) / "2026-02.md"),
    ]


async def test_memory_get_refuses_other_scopes_files(populated: MemoryCore) -> None:
    core = populated
    for number, (reader, owner) in enumerate(itertools.permutations(SCOPES, 2)):
        for path in other_files(core, owner):
            if path == "MEMORY.md":
                continue  # every scope's own long-term file answers to that name
            with pytest.raises(PathRefused):
                await core.finder.read(reader, path)
            if number % 7 == 0:  # the other spellings and the tool, for a sample of pairs
                await refused(core, reader, f"{path}:1")
                await refused(core, reader, f"[{path}:1] text")
        # The same session id, another scope: none of the owner's messages.
        read = await core.finder.read(reader, f"sessions/{SESSION}:1")
        assert marker(owner) not in read.text
        assert marker(reader) in read.text


HOSTILE_PATHS = [
    "../x.md",
    "memory/../../etc/passwd",
    "memory/../../../x.md",
    "/etc/passwd",
    "/tmp/x.md",
    "~/x.md",
    "~root/x.md",
    "memory\\..\\x.md",
    "memory\\2026-03-01.md",
    "MEMORY.md\x00.txt",
    "memory/2026-03-01.md\x00",
    "MEMORY.md.bak",
    "memory/notes.txt",
    ".chatmem/index.sqlite3",
    "memory",
    "memory/",
    "",
    "   ",
    "sessions/",
    "sessions/../x",
    "sessions/a/b:1",
    "memory/dir.md",
    "memory/" + "a" * 300 + ".md",
    "memory/2026-03-01.md/inner.md",
    "memory/scopes",
]


async def test_memory_get_refuses_hostile_paths(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "a note")
    await core.memories.capture(MAIN, "a memory")
    await core.memories.flush()
    await core.memories.capture(MAIN, "another memory")
    await core.memories.flush()  # the second write leaves MEMORY.md.bak
    assert core.workspace.backup_path(MAIN).exists()
    (core.workspace.root / "memory" / "notes.txt").write_text("plain text", encoding="utf-8")
    (core.workspace.root / "memory" / "dir.md").mkdir()
    for path in HOSTILE_PATHS:
        await refused(core, MAIN, path)


async def test_memory_get_refuses_symlinks_out_of_the_scope(populated: MemoryCore) -> None:
    core = populated
    ws = core.workspace
    peer1, peer2 = ScopeKey("peer:1"), ScopeKey("peer:2")
    links = {
        peer1: {
            "to-peer2.md": ws.long_term_path(peer2),
            "to-main.md": ws.long_term_path(MAIN),
            "passwd.md": Path("/etc/passwd"),
        },
        MAIN: {
            "to-peer1.md": ws.long_term_path(peer1),
            "passwd.md": Path("/etc/passwd"),
        },
    }
    for scope, names in links.items():
        for name, target in names.items():
            link = ws.memory_dir(scope) / name
            link.symlink_to(target)
            await refused(core, scope, ws.relative(link))
    # A link that stays inside the scope is fine.
    inside = ws.memory_dir(peer1) / "alias.md"
    inside.symlink_to(ws.daily_path(peer1, START.date()))
    read = await core.finder.read(peer1, ws.relative(inside))
    assert marker(peer1) in read.text
    # Symlinked files are not indexed either.
    for scope in (peer1, MAIN):
        hits = await core.finder.search(
            scope, SearchRequest("mk02zq mk01zq mk00zq root", min_score=0.0)
        )
        assert_own(core, scope, hits, "links")


async def test_memory_get_main_cannot_reach_scopes_directory(populated: MemoryCore) -> None:
    core = populated
    slug = scope_slug(ScopeKey("peer:1"))
    for path in (
        f"memory/scopes/{slug}/LONG_TERM.md",
        f"memory/scopes/{slug}/2026-03-01.md",
        f"memory/scopes/./{slug}/LONG_TERM.md",
        f"./memory/scopes/{slug}/LONG_TERM.md",
        f"memory//scopes/{slug}/LONG_TERM.md",
    ):
        await refused(core, MAIN, path)
    # A peer asking for MEMORY.md or LONG_TERM.md gets its own long-term file.
    for name in ("MEMORY.md", "LONG_TERM.md"):
        read = await core.finder.read(ScopeKey("peer:1"), name)
        assert marker(ScopeKey("peer:1")) in read.text
        assert read.path == f"memory/scopes/{slug}/LONG_TERM.md"
    read = await core.finder.read(MAIN, "LONG_TERM.md")
    assert read.path == "MEMORY.md" and marker(MAIN) in read.text


async def test_memory_get_accepted_forms(core: MemoryCore) -> None:
    entry, _ = await core.memories.capture(MAIN, "user prefers tea over coffee")
    await core.notes.append(MAIN, "line number 0")
    with (core.workspace.root / "memory" / "2026-03-01.md").open("a", encoding="utf-8") as f:
        f.writelines(f"- 12:00:00 line number {i}\n" for i in range(1, 500))
    day = "memory/2026-03-01.md"
    total = len((core.workspace.root / day).read_text(encoding="utf-8").splitlines())
    assert total == 502

    read = await core.finder.read(MAIN, "MEMORY.md")
    assert (read.path, read.start) == ("MEMORY.md", 1)
    assert read.text.startswith("# Agent Memory")
    assert not read.truncated and read.end == read.total_lines

    default = await core.finder.read(MAIN, day)
    assert (default.start, default.end, default.truncated) == (1, 40, True)
    assert len(default.text.splitlines()) == 40

    for form in (
        f"{day}:10",
        f"[{day}:10]",
        f"[{day}:10] - 12:00:00 line number 7",
        f"{day}:10-12",
    ):
        read = await core.finder.read(MAIN, form)
        assert (read.path, read.start, read.end) == (day, 10, 49), form
        assert read.text.splitlines()[0] == "- 12:00:00 line number 7"

    # An explicit start wins over the one in the location.
    assert (await core.finder.read(MAIN, f"{day}:10", 20, 1)).text == "- 12:00:00 line number 17"

    capped = await core.finder.read(MAIN, day, None, 1000)
    assert (capped.start, capped.end, capped.truncated) == (1, 300, True)
    assert len(capped.text.splitlines()) == 300

    tail = await core.finder.read(MAIN, day, 203, 300)
    assert (tail.end, tail.truncated) == (502, False)
    exact = await core.finder.read(MAIN, day, 463, 40)
    assert (exact.end, exact.truncated) == (502, False)
    before_end = await core.finder.read(MAIN, day, 462, 40)
    assert (before_end.end, before_end.truncated) == (501, True)

    # The location a search prints opens the hit.
    [hit] = await core.finder.search(MAIN, "tea coffee")
    read = await core.finder.read(MAIN, f"[{hit.location}]", lines=1)
    assert read.text == f"### [{entry.id}] fact | 0.60 | 2026-03-01 | 0"

    # Through the tool: `from` is the first line, `lines` is capped at 300.
    ctx = core.tool_context(MAIN)
    result = json.loads(await dispatch(ctx, "memory_get", {"path": day, "from": 5, "lines": 1000}))
    assert (result["from"], result["to"], result["truncated"]) == (5, 304, True)
    result = json.loads(await dispatch(ctx, "memory_get", {"path": f"[{day}:7]"}))
    assert (result["from"], result["to"], result["truncated"]) == (7, 46, True)
    with pytest.raises(ChatmemError):
        await core.finder.read(MAIN, day, 1, 0)
    with pytest.raises(ChatmemError):
        await core.finder.read(MAIN, "memory/2020-01-01.md")  # in scope, but no such file


async def test_memory_get_peer_reads_its_own_files(populated: MemoryCore) -> None:
    core = populated
    for scope in SCOPES:
        for path in other_files(core, scope):
            read = await core.finder.read(scope, path)
            assert marker(scope) in read.text, (scope, path)
            assert read.path == path
        with pytest.raises(PathRefused):
            await core.finder.read(scope, "../x.md")


# --- concurrent chats -------------------------------------------------------------------


async def test_concurrent_chats_only_see_their_own_notes(
    config: Config, clock: ManualClock
) -> None:
    eager = config.model_copy(
        update={"recall": config.recall.model_copy(update={"sync_min_interval_seconds": 0.0})}
    )
    alice, bob = ScopeKey("peer:alice"), ScopeKey("peer:bob")
    async with MemoryCore.open(eager, clock=clock) as core:
        seen: dict[ScopeKey, set[str]] = {alice: set(), bob: set()}

        async def chat(scope: ScopeKey, number: int) -> None:
            tag = "alicetok" if scope == alice else "bobtok"
            await core.notes.append(scope, f"{tag} note n{number}x")
            await asyncio.sleep(0)
            hits = await core.finder.search(
                scope, SearchRequest(f"{tag} n{number}x", limit=100, min_score=0.0)
            )
            assert any(f"n{number}x" in h.text for h in hits), (scope, number)
            for hit in hits:
                assert tag in hit.text, (scope, hit)
                seen[scope].add(hit.text)

        tasks = [chat(scope, n) for n in range(50) for scope in (alice, bob)]
        await asyncio.gather(*tasks)

        for scope, tag in ((alice, "alicetok"), (bob, "bobtok")):
            assert all(tag in text for text in seen[scope])
            hits = await core.finder.search(scope, SearchRequest(tag, limit=200, min_score=0.0))
            # Every note indexed exactly once: no note lost, none doubled by a sync racing
            # the append.
            assert sorted(h.text for h in hits) == sorted(f"{tag} note n{n}x" for n in range(50))
            assert core.guard.index is not None
            assert await chunk_counts(core, scope) == {"daily": 50}
            path = core.workspace.daily_path(scope, START.date())
            assert path.read_text(encoding="utf-8").count(tag) == 50
        # A fresh sync of the files finds nothing the incremental path missed.
        stats = await core.guard.index.sync_scope(alice, force=True)
        assert stats.chunks_added == stats.chunks_removed == 50


@pytest.mark.dense
async def test_vectors_never_cross_scopes(core: MemoryCore) -> None:
    """Two scopes hold the same sentences word for word (the nearest vectors of any
    query are in both); a scope's search and recall show only its own chunks, with the
    vectors in place and after the other scope's chunks changed under them."""
    index = core.guard.index
    assert index is not None and index.vectors is not None, "the local model is installed"
    texts = [
        "my daughter Lily starts swimming lessons on Saturday",
        "we adopted a grey rescue greyhound called Pepper",
        "我下个月要去成都出差三天",
    ]
    scopes = [ScopeKey("peer:alice"), ScopeKey("peer:bob"), ScopeKey("peer:' OR 1=1")]
    for number, scope in enumerate(scopes):
        for text in texts:
            await core.notes.append(scope, f"{text} [{scope_slug(scope)}-{number}]")
    await core.vectors_ready()
    for number, scope in enumerate(scopes):
        own = f"[{scope_slug(scope)}-{number}]"
        for query in ("kid's swim class", "what dog did we get", "出差去哪", "weekend plans"):
            for hit in await core.finder.search(scope, SearchRequest(query, limit=20)):
                assert own in hit.text and owned(core, scope, hit), (scope, query, hit)
            injection = await core.finder.recall(scope, query)
            for hit in injection.hits:
                assert own in hit.text, (scope, query, hit)
    # Chunks of one scope rewritten (new ids, new texts): the others still see only theirs.
    await core.notes.append(scopes[0], "Pepper the greyhound loves the beach")
    await core.vectors_ready()
    for hit in await core.finder.search(
        scopes[1], SearchRequest("greyhound at the beach", limit=20)
    ):
        assert "[" + scope_slug(scopes[1]) in hit.text


@pytest.mark.dense
async def test_dense_recall_finds_a_paraphrase_words_miss(core: MemoryCore) -> None:
    """No word of the question is in the memory: BM25 alone finds nothing, the fused
    ranking finds it by meaning."""
    await core.notes.append(MAIN, "Mochi is a ragdoll, she sheds everywhere")
    await core.notes.append(MAIN, "the boiler was serviced on Monday")
    await core.vectors_ready()
    query = "what breed is my kitty"
    hits = await core.finder.search(MAIN, SearchRequest(query, limit=3))
    assert hits and "ragdoll" in hits[0].text
    index = core.guard.index
    assert index is not None
    vectors, index.vectors = index.vectors, None
    try:
        assert not [h for h in await core.finder.search(MAIN, query) if "ragdoll" in h.text]
    finally:
        index.vectors = vectors
