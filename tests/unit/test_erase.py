"""`chatmem erase`: a person's words are gone from every file and every database row,
and everyone else's are still there, on both backends."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.erasure.people import (
    GroupRow,
    Person,
    Traces,
    direct_scopes,
    erased_messages,
    group_scopes,
    kept_lines,
)
from memory_core.storage.sessions import NewMessage
from memory_core.storage.vectors.rows import text_hash
from tests.support import clean_cli_env, run_cli, sql, sql_write

ALICE_DM = ScopeKey("telegram:peer:42")
ALICE_ACCOUNT_DM = ScopeKey("telegram:7:peer:42")
BOB_DM = ScopeKey("telegram:peer:43")
GROUP = ScopeKey("group:telegram:-100")


class Canaries:
    """Unique words, one per place a person's words can land: lower case and one token
    each, so the index's terms are the words themselves."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.words: list[str] = []

    def __call__(self, place: str) -> str:
        word = f"zq{self.who}{place}canary"
        self.words.append(word)
        return word


async def plant(core: MemoryCore, clock: ManualClock, alice: Canaries, bob: Canaries) -> None:
    """Alice's and Bob's words everywhere they can land."""
    chat = core.conversation
    for scope, person, name in ((ALICE_DM, alice, "Alice"), (BOB_DM, bob, "Bob")):
        await chat.turn(scope, f"my locker code is {person('dmturn')} today", speaker=name)
        kept, _ = await core.memories.capture(scope, f"my cat is called {person('entity').title()}")
        archived, _ = await core.memories.capture(scope, f"used to live near {person('archived')}")
        await core.memories.archive(scope, archived.id)
        gone, _ = await core.memories.capture(scope, f"the old alarm pin was {person('forgotten')}")
        await core.memories.forget(scope, gone.id)
        await core.notes.append(scope, f"asked about {person('dmnote')} tickets")
        await core.snapshots.rebuild(scope)
        assert kept.id
    await chat.turn(
        ALICE_ACCOUNT_DM, f"second bot, same {alice('accountdm')} person", speaker="Alice"
    )
    # A block the parser cannot read: quarantined, kept verbatim in the file.
    path = core.memories.path(ALICE_DM)
    await core.memories.flush()
    with path.open("a", encoding="utf-8") as out:
        out.write(f"\n### [broken] nonsense header\n{alice('quarantined')} kept as is\n")
    await core.reindex()
    # The group: both speak; Alice asks the bot to remember; a note names her.
    await chat.turn(GROUP, f"my favourite band is {alice('groupturn')} forever", speaker="Alice")
    await chat.turn(GROUP, f"my favourite band is {bob('groupturn')} instead", speaker="Bob")
    await chat.chat.remember(GROUP, f"I sail a boat named {alice('groupentry')}", speaker="Alice")
    await chat.chat.remember(GROUP, f"I sail a kayak named {bob('groupentry')}", speaker="Bob")
    session = await core.history.current_session(GROUP)
    assert session is not None
    await core.history.add_message(
        NewMessage(
            GROUP,
            session.id,
            "assistant",
            f"Bob, Alice said {alice('quoted')}",
            clock(),
            indexed=True,
        )
    )
    await chat.archive(GROUP)  # an archive file of the group's lines
    await core.notes.append(GROUP, f"Alice mentioned {alice('groupnote')} at lunch")
    summaries = core.workspace.summary_dir(GROUP)
    summaries.mkdir(parents=True, exist_ok=True)
    (summaries / "2026-02.md").write_text(
        f"# 2026-02\n\n- Alice planned {alice('summary')}\n- Bob planned {bob('summary')}\n",
        encoding="utf-8",
    )
    await core.memories.flush()
    with core.memories.path(GROUP).open("a", encoding="utf-8") as out:
        out.write(f"\n### [torn] header\n(by Alice) {alice('groupquarantined')}\n")
    await core.notes.append(GROUP, f"Bob mentioned {bob('groupnote')} at lunch")
    await core.snapshots.rebuild(GROUP)
    # Another process's capture, not yet in the files (its owner still runs).
    journal = core.journal_db
    assert journal is not None
    await journal.autocommit(
        lambda conn: conn.execute(
            "INSERT INTO captures (owner, scope, payload) VALUES (?, ?, ?)",
            ("ghost", ALICE_DM.value, json.dumps({"content": alice("journal")})),
        )
    )
    # A dead process's outage spool (PostgreSQL's), waiting to be replayed.
    spool = core.workspace.state_dir / "spool"
    spool.mkdir(exist_ok=True)
    records = [
        {
            "kind": "message",
            "seq": seq,
            "scope": scope.value,
            "session_id": f"spooled-{seq}",
            "role": "user",
            "content": f"spooled {word}",
            "at": "2026-03-01T12:01:00Z",
            "speaker": name,
        }
        for seq, (scope, word, name) in enumerate(
            ((ALICE_DM, alice("spool"), "Alice"), (BOB_DM, bob("spool"), "Bob")), start=1
        )
    ]
    (spool / "ghost.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
    )
    # Records a replay set aside as malformed (no `kind`), kept for inspection.
    (spool / "quarantine").mkdir()
    (spool / "quarantine" / "old.jsonl").write_text(
        "".join(
            json.dumps({"scope": scope.value, "content": f"no kind {person('setaside')}"}) + "\n"
            for scope, person in ((ALICE_DM, alice), (BOB_DM, bob))
        ),
        encoding="utf-8",
    )
    # A vector made from Alice's turn (its bytes stand for what a model made of them).
    [(chunk, sid)] = await sql(
        core,
        "SELECT c.id, c.scope_id FROM chunks AS c JOIN scopes AS s ON s.id = c.scope_id"
        " WHERE s.key = ? AND c.kind = 'message' AND c.text LIKE ?",
        ALICE_DM.value,
        "%dmturn%",
    )
    digest = text_hash(alice("vector"))
    await sql_write(
        core,
        (
            "INSERT INTO embeddings (model, text_hash, vec) VALUES (?, ?, ?)",
            ("test-model", digest, alice.words[-1].encode() * 4),
        ),
        (
            "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash) VALUES (?, ?, ?, ?)",
            (chunk, sid, "test-model", digest),
        ),
    )
    clock.advance(timedelta(minutes=5))


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`chatmem ARGV` on a thread of its own (it runs its own event loop)."""
    return await asyncio.to_thread(run_cli, capsys, *argv)


def workspace_bytes(root: Path) -> dict[str, bytes]:
    """Every file of the workspace, databases and their WAL included, as bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file()
    }


def memory_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files a person's words are kept in, but for what any open writes to: the
    databases, the lock files, and a dead process's spool (replayed into the database)."""
    opened = (".chatmem/locks", ".chatmem/owners", ".chatmem/spool")
    return {
        name: data
        for name, data in files.items()
        if ".sqlite3" not in name and not name.startswith(opened)
    }


def database_dump(storage_env: Mapping[str, str]) -> list[bytes]:
    """Every value of every table of the test's PostgreSQL schema, as bytes, and the
    server's files of those tables, their TOAST tables and their indexes (where old row
    versions stay until a `VACUUM FULL`); none on SQLite (its files are read whole)."""
    dsn = storage_env.get("CHATMEM_POSTGRES_DSN")
    if not dsn:
        return []
    values: list[bytes] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # what the buffers hold, on disk
        [(data_dir,)] = conn.execute("SHOW data_directory").fetchall()
        files = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class AS c"
            " WHERE c.relnamespace = current_schema()::regnamespace"
            " OR c.oid IN (SELECT reltoastrelid FROM pg_class"
            "   WHERE relnamespace = current_schema()::regnamespace)"
            " OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT reltoastrelid"
            "   FROM pg_class WHERE relnamespace = current_schema()::regnamespace))"
        ).fetchall()
        for (relative,) in files:
            if relative:
                for segment in Path(data_dir).glob(f"{relative}*"):
                    values.append(segment.read_bytes())
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        ).fetchall()
        assert len(tables) > 10
        for (table,) in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"').fetchall():
                for value in row:
                    if isinstance(value, (bytes, bytearray, memoryview)):
                        values.append(bytes(value))
                    elif value is not None:
                        values.append(str(value).encode("utf-8"))
    return values


def holders(word: str, files: Mapping[str, bytes], dump: list[bytes]) -> list[str]:
    """Where `word` is, in any case (an entity's name is capitalised)."""
    needle = word.lower().encode()
    found = [name for name, data in files.items() if needle in data.lower()]
    if any(needle in value.lower() for value in dump):
        found.append("<database>")
    return found


@pytest.fixture
def no_secure_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite as built upstream: a deleted row's bytes stay in its free page (Debian's
    build overwrites them, which would hide a missing VACUUM)."""
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)


@pytest.mark.storage
@pytest.mark.usefixtures("no_secure_delete")
async def test_erasing_a_person_leaves_none_of_their_words(
    config: Config,
    clock: ManualClock,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, bob = Canaries("alice"), Canaries("bob")
    async with MemoryCore.open(config, clock=clock) as core:
        await plant(core, clock, alice, bob)
    root = config.workspace_path
    before = workspace_bytes(root)
    dump = database_dump(storage_env)
    for word in (*alice.words, *bob.words):
        assert holders(word, before, dump), f"{word} was never planted"

    clean_cli_env(tmp_path, monkeypatch)
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    code, out, err = await cli(
        capsys, "--workspace", str(root), "erase", "--person", "telegram:42", "--dry-run"
    )
    assert code == 0, err
    assert "would erase for telegram:42:" in out
    assert f"{ALICE_DM} (whole scope)" in out and f"{ALICE_ACCOUNT_DM} (whole scope)" in out
    assert f"{GROUP} (their lines)" in out and "found by name: Alice" in out
    assert memory_files(workspace_bytes(root)) == memory_files(before)  # a dry run writes none
    code, out, err = await cli(capsys, "--workspace", str(root), "erase", "--person", "telegram:42")
    assert (code, out) == (2, "")
    # The refusal is one line; the lines before it are the log records of the journal row
    # planted unreadable above, which every open reports.
    refusal = [line for line in err.splitlines() if "chatmem: error:" in line]
    assert refusal == err.splitlines()[-1:]
    assert refusal[0].startswith("chatmem: error: erase needs --yes")
    assert "Traceback" not in err
    code, out, err = await cli(
        capsys, "--workspace", str(root), "erase", "--person", "telegram:42", "--yes", "--by", "dpo"
    )
    assert code == 0, err
    print(out)

    after = workspace_bytes(root)
    dump = database_dump(storage_env)
    left = {word: holders(word, after, dump) for word in alice.words}
    assert {w: where for w, where in left.items() if where} == {}
    for word in bob.words:
        assert holders(word, after, dump), f"{word} of Bob was erased too"
    print(f"canaries: {len(alice.words)} of Alice gone, {len(bob.words)} of Bob intact")

    async with MemoryCore.open(config, clock=clock) as core:
        assert [s.value for s in await core.known_scopes()] == ["main", GROUP.value, BOB_DM.value]
        assert {e.speaker for e in await core.memories.entries(GROUP)} == {"Bob"}
        assert [h.text for h in await core.finder.search(BOB_DM, bob.words[0])]
        assert not await core.finder.search(GROUP, alice.words[-1])
        erased = await sql(
            core,
            "SELECT scope, entry_id, source, content FROM audit WHERE action = 'erase'"
            " ORDER BY scope, entry_id",
        )
        assert {r[0] for r in erased} == {ALICE_DM.value, ALICE_ACCOUNT_DM.value, GROUP.value}
        assert all(r[2] == "dpo" and r[3] is None for r in erased)
        assert ("telegram:peer:42", "messages") in {(r[0], r[1]) for r in erased}


@pytest.mark.storage
@pytest.mark.usefixtures("no_secure_delete")
async def test_erasing_one_scope_keeps_the_others(
    config: Config,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    storage_env: Mapping[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.capture(BOB_DM, "prefers the aisle seat zqbobseat")
        await core.memories.capture(ALICE_DM, "prefers the window seat zqaliceseat")
        await core.conversation.turn(ALICE_DM, "book me zqalicetrain", speaker="Alice")
    clean_cli_env(tmp_path, monkeypatch)
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    root = str(config.workspace_path)
    code, out, err = await cli(
        capsys, "--workspace", root, "erase", "--scope", "peer:nobody", "--yes"
    )
    assert code == 2 and err.startswith("chatmem: error: no scope peer:nobody to erase")
    code, out, err = await cli(capsys, "--workspace", root, "erase", "--yes")
    assert code == 2 and "erase takes --person CHANNEL:ID or --scope KEY" in err
    for argv, said in (
        (("--person", "telegram:99"), "nothing is kept of telegram:99"),
        (("--person", "42"), "--person takes CHANNEL:ID"),
        (("--scope", BOB_DM.value, "--name", "Bob"), "--name needs --person"),
    ):
        code, out, err = await cli(capsys, "--workspace", root, "erase", *argv, "--yes")
        assert (code, out, err.count("\n")) == (2, "", 1) and said in err, err
    code, out, err = await cli(
        capsys, "--workspace", root, "--json", "erase", "--scope", ALICE_DM.value, "--yes"
    )
    assert code == 0, err
    [done] = json.loads(out)["scopes"]
    assert done["scope"] == ALICE_DM.value and done["counts"]["memories"] == 1
    assert done["counts"]["messages"] >= 1
    after = workspace_bytes(config.workspace_path)
    dump = database_dump(storage_env)
    assert holders("zqaliceseat", after, dump) == []
    assert holders("zqalicetrain", after, dump) == []
    assert holders("zqbobseat", after, dump)


async def test_at_a_terminal_erase_asks_first(
    config: Config,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.capture(ALICE_DM, "prefers the window seat zqaliceseat")
    clean_cli_env(tmp_path, monkeypatch)
    answers = iter(["n", "yes"])
    monkeypatch.setattr("adapters.cli.erase._interactive", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    root = str(config.workspace_path)
    code, out, err = await cli(capsys, "--workspace", root, "erase", "--person", "telegram:42")
    assert code == 0, err
    assert out.splitlines()[-1] == "nothing was erased"
    assert f"{ALICE_DM} (whole scope): 1 memories" in out
    assert holders("zqaliceseat", workspace_bytes(config.workspace_path), [])
    code, out, err = await cli(capsys, "--workspace", root, "erase", "--person", "telegram:42")
    assert code == 0, err
    assert "erased for telegram:42:" in out
    assert holders("zqaliceseat", workspace_bytes(config.workspace_path), []) == []


# --- the rules, pure ------------------------------------------------------------------


def test_a_persons_direct_scopes_under_every_dm_scope() -> None:
    known = [
        ScopeKey(k)
        for k in (
            "main",
            "peer:42",
            "telegram:peer:42",
            "telegram:7:peer:42",
            "telegram:peer:421",
            "dingtalk:peer:42",
            "group:telegram:-100",
            "group:dingtalk:9",
        )
    ]
    person = Person.parse("telegram:42")
    assert [k.value for k in direct_scopes(person, known)] == [
        "peer:42",
        "telegram:7:peer:42",
        "telegram:peer:42",
    ]
    assert [k.value for k in group_scopes("telegram", known)] == ["group:telegram:-100"]
    with pytest.raises(Exception, match="CHANNEL:ID"):
        Person.parse("42")


def test_group_lines_go_with_the_replies_to_them() -> None:
    traces = Traces(frozenset({"Alice"}))
    rows: list[GroupRow] = [
        (1, "s1", "user", "Alice", None, "hello"),
        (2, "s1", "assistant", "", None, "hi Alice"),
        (3, "s1", "tool", "memory_search", None, "{}"),
        (4, "s1", "user", "Bob", None, "hey"),
        (5, "s1", "assistant", "", None, "hi Bob"),
        (6, "s2", "assistant", "", None, "a new session"),
    ]
    assert erased_messages(rows, traces) == [1, 2, 3]
    archive = (
        "# 2026-03-01\n"
        "12:00:00 Alice: my band is great\n"
        "12:00:01 assistant: noted\n"
        "  more of the reply\n"
        "12:01:00 Bob: mine too\n"
        "12:01:01 assistant: ok\n"
    )
    kept, dropped = kept_lines(archive, traces.with_texts(["my secret phrase"]))
    assert dropped == 2
    assert kept == "# 2026-03-01\n12:01:00 Bob: mine too\n12:01:01 assistant: ok\n"
    notes = "- 09:00 Malice aforethought\n- 09:01 ALICE was here\n- 09:02 said my secret phrase\n"
    assert kept_lines(notes, traces.with_texts(["my secret phrase"])) == (
        "- 09:00 Malice aforethought\n",
        2,
    )
