"""`chatmem chat` as a real process with stdin not a terminal: one reply per input line,
exit 0 at end of input, scopes per `--as` / `--group` like the bots."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.functional.conftest import llm_env

RUN_TIMEOUT = 60


def chatmem_executable() -> str:
    beside = Path(sys.executable).with_name("chatmem")
    found = str(beside) if beside.exists() else shutil.which("chatmem")
    assert found, "the chatmem console script is not installed"
    return found


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment without anyone's chatmem, model or bot settings."""
    prefixes = ("CHATMEM_", "OPENAI_", "TELEGRAM_", "DINGTALK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update({"NO_PROXY": "127.0.0.1,localhost", "PYTHONIOENCODING": "utf-8"})
    env.update(extra or {})
    return env


def chat(
    tmp_path: Path, lines: list[str], *args: str, env: Mapping[str, str] | None = None
) -> list[str]:
    """Run `chatmem chat --workspace W ARGS` on `lines`; its stdout lines (exit 0 asserted)."""
    done = subprocess.run(
        [chatmem_executable(), "chat", "--workspace", str(tmp_path / "ws"), *args],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=tmp_path,
        env=clean_env(env),
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.splitlines()


def test_piped_input_prints_one_reply_per_line_and_exits_at_eof(tmp_path: Path) -> None:
    out = chat(
        tmp_path,
        [
            "remember that alice likes green tea",
            "/memory",
            "",  # blank lines are skipped, not answered
            "I prefer jasmine over earl grey",
            "/new",
            "/memory",
        ],
        "--as",
        "alice",
    )
    assert len(out) == 5, out
    assert out[0] == "Got it, I'll remember: alice likes green tea"
    # A multi-line reply stays on its line: newlines are written as \n.
    assert out[1] == r"1 memories, best first:\n1. [fact] alice likes green tea (0.80)"
    assert out[2].startswith("(offline) No language model is configured")
    assert out[3] == "New session started. Learned: 1 new, 0 reinforced."
    assert out[4].startswith(r"2 memories, best first:\n1. [fact] alice likes green tea")
    assert r"[preference] I prefer jasmine over earl grey" in out[4]
    # The turns finished before the exit: everything is on disk.
    memory = (tmp_path / "ws" / "MEMORY.md").read_text("utf-8")
    assert "alice likes green tea" in memory and "I prefer jasmine over earl grey" in memory


def test_per_peer_users_do_not_see_each_other(tmp_path: Path) -> None:
    env = {"CHATMEM_DM_SCOPE": "per-peer"}
    alice = chat(
        tmp_path,
        ["remember that my badge number is 7788-alice", "/scope", "/memory"],
        "--as",
        "alice",
        env=env,
    )
    assert alice[1] == "scope: peer:alice (dm_scope = per-peer)"
    assert "7788-alice" in alice[2]
    bob = chat(
        tmp_path,
        ["/scope", "/memory", "/search badge number", "what is my badge number?"],
        "--as",
        "bob",
        env=env,
    )
    assert bob[0] == "scope: peer:bob (dm_scope = per-peer)"
    assert bob[1].startswith("I don't remember anything in this chat yet.")
    assert bob[2] == "Nothing found. 没有找到。"
    assert "7788" not in "\n".join(bob)
    scopes = tmp_path / "ws" / "memory" / "scopes"
    assert "7788-alice" in (scopes / "peer_alice" / "LONG_TERM.md").read_text("utf-8")
    assert not (scopes / "peer_bob" / "LONG_TERM.md").exists()


def test_group_is_its_own_scope(tmp_path: Path) -> None:
    alice = chat(tmp_path, ["remember that the DM password is swordfish"], "--as", "alice")
    assert alice == ["Got it, I'll remember: the DM password is swordfish"]
    group = chat(
        tmp_path,
        [
            "/scope",
            "/memory",
            "/search DM password swordfish",
            "remember that the team standup is at nine",
            "/memory",
        ],
        "--as",
        "alice",
        "--group",
        "g1",
    )
    assert group[0] == "scope: group:console:g1 (dm_scope = main)"
    assert group[1].startswith("I don't remember anything in this chat yet.")
    assert group[2] == "Nothing found. 没有找到。"
    assert "standup is at nine" in group[4] and "swordfish" not in group[4]
    root = tmp_path / "ws"
    assert "standup" not in (root / "MEMORY.md").read_text("utf-8")
    group_file = root / "memory" / "scopes" / "group_console_g1" / "LONG_TERM.md"
    assert "standup is at nine" in group_file.read_text("utf-8")


async def test_model_replies_are_one_line_each(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.reply_text("First line of the answer.\n\n- a point\n- another point")
    fake_llm.reply_text("Short answer.")
    process = await asyncio.create_subprocess_exec(
        chatmem_executable(),
        "chat",
        "--workspace",
        str(tmp_path / "ws"),
        "--as",
        "alice",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env(llm_env(fake_llm)),
    )
    stdout, stderr = await asyncio.wait_for(
        process.communicate(b"tell me something\nand briefly?\n"), RUN_TIMEOUT
    )
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().splitlines() == [
        r"First line of the answer.\n\n- a point\n- another point",
        "Short answer.",
    ]
    assert [m["content"] for m in fake_llm.last_messages() if m["role"] == "user"] == [
        "tell me something",
        "and briefly?",
    ]
