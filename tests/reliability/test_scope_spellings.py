"""Issue 34, finding 3: one person, one scope, whatever spelling an id arrives in.

Platform ids and names come in several Unicode spellings of one text: composed or
decomposed (NFC/NFD), full-width (an East Asian keyboard), with U+00A0 or U+3000 for a
space. Every spelling of one id maps to one scope on every path (the adapters, `--as`,
`--group`, `--scope`, MCP's `--scope` and `mcp.clients`); a zero-width or other format
character is refused with one line. Scopes stored before this (look-alikes) are found
by `validate` and folded by `scopes --merge` without loss, on both backends.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import bots, build_parser, commands, main  # noqa: F401  (registered)
from adapters.console import console_message
from adapters.inbound import InboundMessage
from adapters.mcp_server import token_scopes
from adapters.settings import load_app_config as load_config
from memory_core.base.clock import ManualClock
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import ConfigError, ScopeError
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import (
    InboundContext,
    ScopeKey,
    lookalike_groups,
    normalise_id,
    resolve_scope,
)
from memory_core.base.workspace import Workspace
from memory_core.config import Config, env_bindings
from memory_core.engine import MemoryCore
from memory_core.scope_merge import merged_entries
from tests.support import clean_cli_env
from tests.support import run_cli as run

ROOT = Path(__file__).resolve().parents[2]

IDS = [
    "Ann",
    "Ann Lee",
    "Zoë",
    "José María",
    "Đặng Thu",
    "Müller 7",
    "李雷",
    "李 雷",
    "user_4211",
    "u-99:x",
    "Ωmega",
    "ann.lee+2",
]
"""Names and ids as platforms and people send them (NFC where a text is typed)."""


def full_width(text: str) -> str:
    return "".join(
        chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else "\u3000" if ch == " " else ch for ch in text
    )


SPELLINGS: dict[str, Callable[[str], str]] = {
    "nfc": lambda t: unicodedata.normalize("NFC", t),
    "nfd": lambda t: unicodedata.normalize("NFD", t),
    "full-width": full_width,
    "u+00a0": lambda t: t.replace(" ", "\u00a0") + "\u00a0",
    "u+3000": lambda t: "\u3000" + t.replace(" ", "\u3000"),
    "nfd full-width": lambda t: full_width(unicodedata.normalize("NFD", t)),
}
"""The families a spelling of one id arrives in; every one is the same scope."""

INVISIBLE = {
    "zero-width space": "\u200b",
    "zero-width non-joiner": "\u200c",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "soft hyphen": "\u00ad",
    "variation selector": "\ufe0f",
    "braille pattern blank": "\u2800",
    "hangul filler": "\u3164",
    "halfwidth hangul filler": "\uffa0",
    "hangul choseong filler": "\u115f",
    "hangul jungseong filler": "\u1160",
}
"""Characters that make one id look like another: refused, never silently dropped."""


def message(channel: str, sender: str, chat_type: str, chat: str) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        account_id="bot",
        sender_id=sender,
        sender_name=sender,
        chat_type=chat_type,  # type: ignore[arg-type]
        chat_id=chat,
        text="hi",
        message_id="1",
        timestamp=datetime(2026, 3, 1, tzinfo=UTC),
    )


def console_scope(flag: str, spelling: str) -> ScopeKey:
    """`chatmem chat --as S` / `--group S` through the real parser, as the console
    resolves it (per-channel-peer, so that the name is in the key)."""
    args = build_parser().parse_args(["chat", flag, spelling])
    return console_message("", args.user, args.group, "").scope("per-channel-peer")


def scope_option(spelling: str) -> ScopeKey:
    """`--scope peer:S`, as `running.run_command` reads it."""
    args = build_parser().parse_args(["capture", "x", "--scope", f"peer:{spelling}"])
    return ScopeKey.parse(args.scope)


PATHS: dict[str, Callable[[str], ScopeKey]] = {
    "telegram direct": lambda s: message("telegram", s, "direct", "1").scope("per-peer"),
    "telegram group": lambda s: message("telegram", "1", "group", s).scope("main"),
    "dingtalk direct": lambda s: message("dingtalk", s, "direct", "1").scope(
        "per-account-channel-peer"
    ),
    "telegram topic": lambda s: resolve_scope(
        InboundContext("telegram", "b", "1", "group", "-100", s), topic_scope=True
    ),
    "console --as": lambda s: console_scope("--as", s),
    "console --group": lambda s: console_scope("--group", s),
    "--scope": scope_option,
    "mcp.clients": lambda s: token_scopes("", {"t" * 20: f"peer:{s}"}, ScopeKey("main"))["t" * 20],
}


def test_every_spelling_of_an_id_is_one_scope_on_every_path() -> None:
    extra = 0
    for name, path in PATHS.items():
        for id_ in IDS:
            keys = {path(spell(id_)) for spell in SPELLINGS.values()}
            assert len(keys) == 1, (name, id_, keys)
            extra += len(keys) - 1
    cases = len(PATHS) * len(IDS) * len(SPELLINGS)
    print(f"\n{len(IDS)} ids x {len(SPELLINGS)} spellings x {len(PATHS)} paths = {cases}")
    print(f"extra scopes: {extra}")
    assert extra == 0


def test_every_path_agrees_on_the_key() -> None:
    """The console's per-peer key and `--scope`'s key of one person are the same text."""
    for id_ in IDS:
        from_telegram = PATHS["telegram direct"](full_width(id_))
        assert scope_option(unicodedata.normalize("NFD", id_)) == from_telegram
        assert from_telegram.value == "peer:" + " ".join(unicodedata.normalize("NFKC", id_).split())


@pytest.mark.parametrize("name", sorted(INVISIBLE))
def test_format_characters_are_refused_with_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = f"An{INVISIBLE[name]}n"
    refused = 0
    for path in PATHS.values():
        with pytest.raises((ScopeError, SystemExit)):
            path(odd)
        refused += 1
    capsys.readouterr()
    code, out, err = run(
        capsys, "capture", "x", "--scope", f"peer:{odd}", "--workspace", str(tmp_path)
    )
    assert (code, out) == (2, "")
    assert err.startswith("chatmem: error: a scope key cannot contain")
    assert "invisible format characters" in err and len(err.splitlines()) == 1
    code, out, err = run(capsys, "chat", "--as", odd, "--workspace", str(tmp_path))
    assert code == 2 and "the name cannot contain" in err and len(err.splitlines()) == 1
    config = tmp_path / "chatmem.toml"
    config.write_text(f'[mcp.clients]\n"{"t" * 20}" = {json.dumps("peer:" + odd)}\n')
    with pytest.raises(ConfigError, match="invisible format characters"):
        load_config(config, env={})
    assert refused == len(PATHS)


def test_case_is_kept_and_spaces_are_trimmed() -> None:
    """Platform ids are case-sensitive: `Ann` and `ann` stay two ids."""
    assert normalise_id("Ann", "id") != normalise_id("ann", "id")
    assert normalise_id("  Ann \u3000 Lee\u00a0", "id") == "Ann Lee"
    assert ScopeKey.parse(" ｐｅｅｒ：Ａｎｎ ").value == "peer:Ann"
    with pytest.raises(ScopeError, match="empty part"):
        ScopeKey.parse("peer:\u3000")


# --- the command line: regression tests for the finding ----------------------------------


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


def test_console_as_a_full_width_name_is_the_same_person() -> None:
    """`chatmem chat --as Ann` and `--as Ａｎｎ` were two people."""
    assert console_scope("--as", "Ann") == console_scope("--as", "Ａｎｎ")
    assert console_scope("--group", "team 1") == console_scope("--group", "ｔｅａｍ\u30001")


def test_scopes_lists_one_row_per_person(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(tmp_path / "W")
    assert run(capsys, "init", "--workspace", ws)[0] == 0
    people = IDS[:4]
    for id_ in people:
        for family, spell in SPELLINGS.items():
            code, _, err = run(
                capsys,
                "capture",
                f"{id_} {family}",
                "--scope",
                f"peer:{spell(id_)}",
                "--workspace",
                ws,
            )
            assert code == 0, err
    code, out, err = run(capsys, "scopes", "--json", "--workspace", ws)
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 1 + len(people), [r["scope"] for r in rows]
    assert all(r["active"] == len(SPELLINGS) for r in rows[1:])


def test_capture_names_a_new_scope(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capture --scope mian` printed `saved new [...]` without naming the scope."""
    ws = str(tmp_path / "W")
    assert run(capsys, "init", "--workspace", ws)[0] == 0
    code, out, _ = run(capsys, "capture", "likes tea", "--scope", "mian", "--workspace", ws)
    assert code == 0 and out.startswith("saved new [") and " in scope mian (new scope): " in out
    code, out, _ = run(capsys, "capture", "likes cake", "--scope", "mian", "--workspace", ws)
    assert " in scope mian: " in out and "new scope" not in out
    code, out, _ = run(capsys, "capture", "likes rain", "--workspace", ws)
    assert "in scope" not in out
    code, out, _ = run(capsys, "capture", "x y", "--scope", "mia", "--json", "--workspace", ws)
    assert json.loads(out)["scope"] == "mia" and json.loads(out)["new_scope"] is True
    code, out, _ = run(capsys, "append", "a note", "--scope", "mina", "--workspace", ws)
    assert code == 0 and out.rstrip().endswith(".md:3 (new scope mina)")
    code, out, _ = run(capsys, "append", "a note", "--scope", "mina", "--workspace", ws)
    assert code == 0 and "new scope" not in out


def test_mcp_refuses_an_unknown_scope_unless_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`chatmem mcp --scope mainn` served a new, empty scope."""
    ws = str(tmp_path / "W")
    assert run(capsys, "init", "--workspace", ws)[0] == 0
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "adapters.cli", "mcp", "--scope", "mainn", "--workspace", ws]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("chatmem: error: no memories in scope mainn")
    assert "--create" in done.stderr and len(done.stderr.splitlines()) == 1
    served = subprocess.run(
        [*argv, "--create"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert served.returncode == 0, served.stderr
    assert "Traceback" not in served.stderr


# --- look-alikes stored before: validate, and merge ---------------------------------------

ANN = ScopeKey("peer:Ann")
OLD_SPELLINGS = [ScopeKey("peer:Ａｎｎ"), ScopeKey("peer:An\u200bn"), ScopeKey("peer:Ann\u00a0")]


def test_lookalike_groups_are_the_keys_made_today() -> None:
    keys = [ScopeKey("main"), ANN, *OLD_SPELLINGS, ScopeKey("peer:ann"), ScopeKey("ｍａｉｎ")]
    assert lookalike_groups(keys) == [
        [ScopeKey("main"), ScopeKey("ｍａｉｎ")],
        sorted([ANN, *OLD_SPELLINGS], key=lambda k: k.value),
    ]


def test_merged_entries_keep_both_texts_of_one_id_and_never_double() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    mine = MemoryEntry("a1", "likes tea", "fact", 0.6, at, at, at)
    theirs = MemoryEntry("a1", "likes coffee", "fact", 0.6, at, at, at)
    same = MemoryEntry("b2", "rides a bike", "fact", 0.6, at, at, at)
    gone = MemoryEntry("c3", "likes rain", "fact", 0.6, at, at, at)
    entries, changes, renamed = merged_entries([theirs, same, gone], [mine, same], ANN, {"c3"})
    assert [e.content for e in entries] == [
        "likes tea",
        "rides a bike",
        "likes coffee",
        "likes rain",
    ]
    assert list(renamed) == ["a1", "c3"]  # c3: the id of one of B's forgotten entries
    assert [e.id for e in entries[2:]] == [renamed["a1"], renamed["c3"]]
    assert len({e.id for e in entries}) == len(entries)
    assert [c.entry_id for c in changes] == [renamed["a1"], renamed["c3"]]
    assert "merged from scope peer:Ann (was [a1])" in changes[0].detail


async def fill(core: MemoryCore, scope: ScopeKey, word: str, clock: ManualClock) -> list[str]:
    """A scope with what a person leaves: entries (one forgotten), a note, a chat."""
    kept, _ = await core.memories.capture(scope, f"the {word} violin lesson is on friday")
    gone, _ = await core.memories.capture(scope, f"the {word} locker code is 4411")
    await core.memories.forget(scope, gone.id)
    await core.notes.append(scope, f"a {word} note about the harbour")
    at = core.now()
    said = [RecordedMessage("user", "Ann", f"my {word} kayak is yellow", at)]
    await core.record_session(scope, f"s-{word}", at, said)
    return [kept.id, gone.id]


async def rows(core: MemoryCore, sql: str, *params: object) -> list[Any]:
    return await core.database.read(lambda conn: conn.execute(sql, params).fetchall())


@pytest.mark.storage
async def test_merge_folds_a_lookalike_scope_without_loss(
    config: Config, clock: ManualClock
) -> None:
    old = OLD_SPELLINGS[0]
    async with MemoryCore.open(config, clock=clock) as core:
        old_ids = await fill(core, old, "blue", clock)
        new_ids = await fill(core, ANN, "green", clock)
        assert lookalike_groups(await core.known_scopes()) == [[ANN, old]]
        audit_before = await rows(core, "SELECT COUNT(*) FROM audit WHERE scope = ?", old.value)
        [(chunk, sid_old)] = await rows(
            core,
            "SELECT c.id, c.scope_id FROM chunks AS c JOIN scopes AS s ON s.id = c.scope_id"
            " WHERE s.key = ? AND c.kind = 'message'",
            old.value,
        )
        await core.database.write(  # the vector a serving process made of the message
            lambda conn: conn.execute(
                "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash)"
                " VALUES (?, ?, 'test-model', 'h1')",
                (chunk, sid_old),
            )
        )
        report = await core.merge_scopes(old, ANN)

        assert old not in await core.known_scopes()
        assert lookalike_groups(await core.known_scopes()) == []
        live = {e.id: e.content for e in await core.memories.entries(ANN)}
        assert {old_ids[0], new_ids[0]} <= set(live)
        forgotten = {e.id for e in await core.memories.restorable(ANN)}
        assert {old_ids[1], new_ids[1]} <= forgotten
        for word in ("violin", "harbour", "kayak"):
            found = {h.text for h in await core.finder.search(ANN, f"blue {word}")}
            assert any("blue" in text for text in found), (word, found)
        assert await rows(core, "SELECT scope FROM messages WHERE scope = ?", old.value) == []
        assert len(await rows(core, "SELECT id FROM messages WHERE scope = ?", ANN.value)) == 2
        assert len(await rows(core, "SELECT id FROM sessions WHERE scope = ?", ANN.value)) == 2
        assert await rows(core, "SELECT id FROM audit WHERE scope = ?", old.value) == []
        moved = await rows(
            core, "SELECT action, detail FROM audit WHERE scope = ? AND source = 'merge'", ANN.value
        )
        assert [a for a, _ in moved] == ["add"]
        assert "merged from scope peer:Ａｎｎ" in moved[0][1]
        assert report.rows["audit"] == audit_before[0][0]
        events = await core.audit.events(ANN, "scope_merged")
        assert events and events[0].detail["from"] == old.value
        assert report.message_chunks == 1
        [(sid_ann,)] = await rows(core, "SELECT id FROM scopes WHERE key = ?", ANN.value)
        vector = await rows(core, "SELECT scope_id FROM chunk_vectors WHERE chunk_id = ?", chunk)
        assert vector == [(sid_ann,)]
        note = core.workspace.daily_path(ANN, core.notes.today()).read_text(encoding="utf-8")
        assert "blue note" in note and "green note" in note
        assert report.set_aside is not None
        aside = core.workspace.root / report.set_aside
        assert "blue violin" in (aside / "LONG_TERM.md").read_text(encoding="utf-8")

    async with MemoryCore.open(config, clock=clock) as core:  # a reindex keeps it all
        await core.reindex()
        assert {h.text for h in await core.finder.search(ANN, "blue kayak")}
        assert old not in await core.known_scopes()


@pytest.mark.storage
async def test_an_id_both_scopes_use_is_given_anew_with_its_history(
    config: Config, clock: ManualClock
) -> None:
    old = OLD_SPELLINGS[2]
    async with MemoryCore.open(config, clock=clock) as core:
        theirs, _ = await core.memories.capture(old, "plays the oboe on sundays")
        mine, _ = await core.memories.capture(ANN, "plays chess on mondays")
        await core.memories.flush()
        path = core.workspace.long_term_path(old)  # a file copied by hand once: one id, two texts
        text = path.read_text(encoding="utf-8").replace(f"[{theirs.id}]", f"[{mine.id}]")
        path.write_text(text, encoding="utf-8")
        await core.database.write(
            lambda conn: conn.execute(
                "UPDATE audit SET entry_id = ? WHERE scope = ? AND entry_id = ?",
                (mine.id, old.value, theirs.id),
            )
        )
        report = await core.merge_scopes(old, ANN)
        new_id = report.renamed[mine.id]
        entries = {e.id: e.content for e in await core.memories.entries(ANN)}
        assert entries == {mine.id: "plays chess on mondays", new_id: "plays the oboe on sundays"}
        history = await rows(
            core,
            "SELECT entry_id, content FROM audit WHERE scope = ? AND action = 'add' ORDER BY id",
            ANN.value,
        )
        by_id: dict[str, set[str]] = {}
        for entry_id, content in history:
            by_id.setdefault(entry_id, set()).add(content)
        assert by_id == {
            mine.id: {"plays chess on mondays"},
            new_id: {"plays the oboe on sundays"},
        }


def test_merge_refusals_are_one_line(config: Config, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(config.workspace_path)

    async def make() -> None:
        async with MemoryCore.open(config, create=True) as core:
            await core.memories.capture(ANN, "likes tea")
            await core.memories.capture(OLD_SPELLINGS[1], "likes cake")

    asyncio.run(make())
    code, out, err = run(capsys, "validate", "--workspace", ws)
    assert code == 1 and "peer:Ann, peer:An\\u200bn" in out
    assert "chatmem scopes --merge 'peer:An\\u200bn' 'peer:Ann'" in out
    code, out, err = run(capsys, "scopes", "--workspace", ws)
    assert code == 0 and "note: 1 group of these scopes look alike" in err
    cases = {
        ("peer:Ann", "peer:Ann"): "into itself",
        ("peer:Ann", "peer:Bob"): "no scope 'peer:Bob'",
        ("main", "peer:Ann"): "main scope cannot be merged away",
    }
    for (source, target), said in cases.items():
        code, out, err = run(capsys, "scopes", "--merge", source, target, "--workspace", ws)
        assert (code, out) == (2, ""), (source, target)
        assert said in err and len(err.splitlines()) == 1, err
    long_term = Workspace.at(ws).long_term_path(OLD_SPELLINGS[1])
    with long_term.open("a", encoding="utf-8") as handle:
        handle.write("\n### [zz] not | a | valid | header\nmended by hand\n")
    code, out, err = run(
        capsys, "scopes", "--merge", "peer:An\\u200bn", "peer:Ann", "--workspace", ws
    )
    assert code == 0, err
    assert out.startswith("merged scope peer:An\\u200bn into peer:Ann: 1 entry")
    assert "(1 unreadable block of its long-term file kept there, not merged" in out
    aside = next((Path(ws) / ".chatmem" / "merged").iterdir())
    assert "mended by hand" in (aside / "LONG_TERM.md").read_text(encoding="utf-8")
    code, out, err = run(capsys, "validate", "--workspace", ws)
    assert code == 0 and out.strip() == "all memory files are valid"
