"""Hostile text at every entry point: kept byte for byte, or refused with one clear line.

Carriage returns (CRLF, a lone CR) are text: an acknowledged memory reads back exactly,
from the core, from a fresh process and over MCP. Lone surrogates (what Python makes of
bytes that are not UTF-8 on a command line or stdin, or a `"\\ud800"` through the API)
cannot be stored as UTF-8: each entry point refuses them with one `InputRefused` line,
stores nothing and never shows a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from mcp import Client

from adapters.mcp_server import build_server
from memory_core.base.entries import Importance, MemoryClass
from memory_core.base.errors import InputRefused
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tests.functional.test_console import clean_env
from tests.reliability.support import REPO
from tests.support import clean_cli_env, recent_messages, run_cli

pytestmark = pytest.mark.storage

KEPT = [
    "line one\r\nline two\rline three",
    "a lone\rcarriage return",
    "blank lines\r\n\r\nbetween\r\r\nthem",
    "intro\r### [abcd1234] fact | 0.50 | 2026-01-01 | 0",
    "intro\r<!-- chatmem: {} -->\r## Archived Memories",
    "separators \u2028 \u2029 \x85 \x0b \x0c kept",
    "emoji 🎉\r\n中文\r-->\r<!--",
]
"""Texts to keep exactly (each with a word of its own, for finding it again)."""

HALF_BYTES = [b"\xff", b"caf\xe9 au lait", b"half \xe4\xb8"]
"""Arguments that are not UTF-8."""

SURROGATES = ["\ud800", "left \udcff right", "a pair \ud83d\ude00 of halves", "end \udfff"]


def marked(text: str, number: int) -> str:
    return f"{text} zq{number}x"


def assert_no_traceback(*outputs: str) -> None:
    for output in outputs:
        assert "Traceback" not in output, output


async def test_the_core_keeps_every_capture_exactly(core: MemoryCore, config: Config) -> None:
    texts = [marked(text, n) for n, text in enumerate(KEPT)]
    acknowledged = {}
    for text in texts:
        entry, _ = await core.memories.capture(MAIN, text)
        assert entry.content == text
        acknowledged[entry.id] = text
    await core.memories.flush()
    assert {e.id: e.content for e in await core.memories.entries(MAIN)} == acknowledged
    for n, text in enumerate(texts):
        hits = await core.finder.search(MAIN, f"zq{n}x")
        assert hits, text
    assert await fresh_entries(config) == acknowledged


async def test_the_core_refuses_lone_surrogates_and_stores_nothing(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "a memory before")
    await core.memories.flush()
    before = (await core.long_term_text(MAIN), await core.memories.entries(MAIN))
    for text in SURROGATES:
        with pytest.raises(InputRefused, match="lone surrogate"):
            await core.memories.capture(MAIN, text)
        with pytest.raises(InputRefused):
            await core.memories.capture(MAIN, "fine", category=text)
        with pytest.raises(InputRefused):
            await core.memories.capture(MAIN, "fine", source=text)
        with pytest.raises(InputRefused):
            await core.finder.search(MAIN, text)
        with pytest.raises(InputRefused):
            await core.finder.search(MAIN, ["fine", text])
        with pytest.raises(InputRefused):
            await core.finder.recall(MAIN, text)
        with pytest.raises(InputRefused):
            await core.notes.append(MAIN, text)
        with pytest.raises(InputRefused):
            await core.conversation.turn(MAIN, text)
        with pytest.raises(InputRefused):
            await core.conversation.turn(MAIN, "hello", speaker=text)
        with pytest.raises(InputRefused):
            await core.conversation.chat.remember(MAIN, text)
        with pytest.raises(InputRefused):
            await core.finder.read(MAIN, text)
    await core.memories.flush()
    assert (await core.long_term_text(MAIN), await core.memories.entries(MAIN)) == before
    assert await recent_messages(core, MAIN, 10) == []


async def test_labels_are_taken_as_enum_or_string_alike(core: MemoryCore) -> None:
    by_string, _ = await core.memories.capture(MAIN, "went to the dentist", memory_class="event")
    by_enum, _ = await core.memories.capture(
        MAIN, "likes oolong", importance="high", memory_class=MemoryClass.FACT
    )
    assert by_string.memory_class is MemoryClass.EVENT
    assert by_enum.importance is Importance.HIGH and by_enum.score == pytest.approx(0.8)
    for bad in ({"memory_class": "events"}, {"importance": "urgent"}):
        with pytest.raises(InputRefused, match="must be one of"):
            await core.memories.capture(MAIN, "never stored", **bad)  # type: ignore[arg-type]
    assert "never stored" not in await core.long_term_text(MAIN)


async def fresh_entries(config: Config) -> dict[str, str]:
    """The scope's entries as another process reads them from the file."""
    async with MemoryCore.open(config) as other:
        return {e.id: e.content for e in await other.memories.entries(MAIN)}


async def test_the_chat_engine_keeps_messages_and_memories_exactly(
    core: MemoryCore, config: Config
) -> None:
    for n, text in enumerate(KEPT):
        await core.conversation.turn(MAIN, marked(text, n))
    stored = [m.content for m in await recent_messages(core, MAIN, 50) if m.role == "user"]
    assert stored == [marked(text, n) for n, text in enumerate(KEPT)]
    asked = "my locker code\r\nis in the\rblue notebook"
    await core.conversation.chat.remember(MAIN, asked)
    await core.memories.flush()
    assert asked in [e.content for e in await core.memories.entries(MAIN)]
    assert asked in (await fresh_entries(config)).values()


async def test_mcp_memory_save_keeps_or_refuses(core: MemoryCore, config: Config) -> None:
    async with Client(build_server(core, MAIN)) as client:
        saved = {}
        for n, text in enumerate(KEPT):
            result = await client.call_tool(
                "memory_save", {"content": marked(text, n), "target": "long-term"}
            )
            assert not result.is_error, result
            assert result.structured_content is not None
            saved[result.structured_content["id"]] = marked(text, n)
        listed = await client.call_tool("memory_list", {"limit": 200})
        assert listed.structured_content is not None
        entries = listed.structured_content["entries"]
        assert {e["id"]: e["content"] for e in entries} == saved
        for text in SURROGATES:
            for target in ("long-term", "daily"):
                refused = await client.call_tool("memory_save", {"content": text, "target": target})
                # The SDK's argument validation refuses it first (pydantic's
                # string_unicode): a tool error, nothing stored, no traceback.
                assert refused.is_error
                message = " ".join(getattr(c, "text", "") for c in refused.content)
                assert "Traceback" not in message
            searched = await client.call_tool("memory_search", {"query": text})
            assert searched.is_error
    await core.memories.flush()
    assert {e.id: e.content for e in await core.memories.entries(MAIN)} == saved
    assert await fresh_entries(config) == saved


def cli(
    workspace: Path,
    env: Mapping[str, str],
    *argv: str | bytes,
    stdin: bytes = b"",
) -> subprocess.CompletedProcess[bytes]:
    """`chatmem ARGV` in a process of its own; argv may hold bytes that are not UTF-8."""
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *argv, "--workspace", str(workspace)],
        cwd=REPO,
        env=clean_env({**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}),
        input=stdin,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_command_line_keeps_or_refuses(
    workspace: Path,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One real process for each way in (an argument, stdin) and each outcome; the other
    texts go to `main` in this process as the `str` a process makes of its argv
    (`os.fsdecode`: bytes that are not UTF-8 become lone surrogates), a process each
    costing seconds."""
    clean_cli_env(tmp_path, monkeypatch)
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)

    def here(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(workspace))

    assert cli(workspace, storage_env, "init").returncode == 0
    # Bytes that are not UTF-8 in an argument: one line, exit 2, nothing stored. (A search
    # here would add the words-only notice of a test without the model: a process each.)
    for argv in (("capture", b"\xff"), *(("search", raw) for raw in HALF_BYTES)):
        done = cli(workspace, storage_env, *argv)
        assert done.returncode == 2, done
        err = done.stderr.decode()
        assert err.startswith("chatmem: error: ") and err.count("\n") == 1, err
        assert_no_traceback(done.stdout.decode(), err)
    for raw in HALF_BYTES[1:]:
        code, out, err = here("capture", os.fsdecode(raw))
        assert code == 2, err
        assert err.startswith("chatmem: error: ") and err.count("\n") == 1, err
        assert_no_traceback(out, err)
    # And on stdin, for `capture -`.
    done = cli(workspace, storage_env, "capture", "-", stdin=b"caf\xe9")
    assert done.returncode == 2 and done.stderr.decode().count("\n") == 1
    # Carriage returns, from an argument and from stdin, kept exactly.
    *in_process, last = list(enumerate(KEPT))
    for n, text in in_process:
        code, _, err = here("capture", marked(text, n))
        assert code == 0, err
    done = cli(workspace, storage_env, "capture", marked(last[1], last[0]))
    assert done.returncode == 0, done.stderr.decode()
    from_stdin = "read from stdin\r\nwith its own\rcarriage returns"
    done = cli(workspace, storage_env, "capture", "-", stdin=from_stdin.encode())
    assert done.returncode == 0, done.stderr.decode()
    status = json.loads(cli(workspace, storage_env, "status", "--json", "--limit", "200").stdout)
    contents = sorted(e["content"] for e in status["active"])
    assert contents == sorted([marked(t, n) for n, t in enumerate(KEPT)] + [from_stdin])


def test_chat_on_stdin_answers_every_line(workspace: Path, storage_env: Mapping[str, str]) -> None:
    assert cli(workspace, storage_env, "init").returncode == 0
    lines = [
        b"remember that caf\xe9 is fine",
        b"\xff\xfe",
        b"/search \xe9t\xe9",
        b"/remember half \xe4\xb8",
        b"remember that zoe likes\rcoffee",
        b"hello\r",
    ]
    done = cli(workspace, storage_env, "chat", stdin=b"\n".join(lines) + b"\n")
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    assert_no_traceback(out, err)
    replies = out.splitlines()
    assert len(replies) == len(lines), out
    assert all("lone surrogate" in reply for reply in replies[:4]), out
    assert "lone surrogate" not in replies[4] + replies[5]
    status = cli(workspace, storage_env, "status", "--json")
    contents = [e["content"] for e in json.loads(status.stdout)["active"]]
    assert contents == ["zoe likes\rcoffee"]
    # Who talks, and where, become a chat id and a speaker's name: refused up front.
    for option in ("--as", "--group"):
        done = cli(workspace, storage_env, "chat", option, b"al\xffice", stdin=b"hello\n")
        err = done.stderr.decode()
        assert done.returncode == 2 and err.count("\n") == 1, err
        assert "lone surrogate" in err
        assert_no_traceback(done.stdout.decode(), err)
