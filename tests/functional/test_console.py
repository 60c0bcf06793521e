"""`chatmem chat` as a real process: with stdin not a terminal one reply per input line,
exit 0 at end of input, scopes per `--as` / `--group` like the bots; on a pseudo-terminal
as a person runs it (Ctrl-C); commands, memory requests and the offline notice."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.router import COMMANDS
from testkit.bot import llm_env
from testkit.openai_server import FakeOpenAI, Reply

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
    assert out[1] == r"1 memory, best first:\n1. [fact] alice likes green tea (0.80)"
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


# --- Ctrl-C ---------------------------------------------------------------------------------


def closed_cleanly(workspace: Path) -> None:
    """What a core's `close()` leaves: no SQLite write-ahead log (the last connection
    checkpoints and removes it) and no owner lock of a live capture journal."""
    state = workspace / ".chatmem"
    assert not list(state.glob("*-wal")), sorted(p.name for p in state.iterdir())
    assert not list((state / "owners").iterdir())


class Terminal:
    """`chatmem chat` on a pseudo-terminal, as a person runs it (stdin is a tty)."""

    def __init__(self, tmp_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [chatmem_executable(), "chat", "--workspace", str(tmp_path / "ws")],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=tmp_path,
            env=clean_env(env),
            start_new_session=True,
        )
        os.close(slave)
        self.output = b""

    def read_until(self, token: str, times: int = 1) -> None:
        """Read the terminal until `token` has appeared `times` times in all."""
        deadline = time.monotonic() + RUN_TIMEOUT  # a guard against a hang, not a figure
        while self.output.count(token.encode()) < times:
            left = deadline - time.monotonic()
            assert left > 0, f"waited for {token!r}; the terminal shows {self.output!r}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                self.output += self._read()

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def interrupt(self) -> int:
        """Ctrl-C (the terminal sends SIGINT to the program); its exit status."""
        self.process.send_signal(signal.SIGINT)
        status = self.process.wait(RUN_TIMEOUT)
        while chunk := self._read():
            self.output += chunk
        return status

    def _read(self) -> bytes:
        try:
            return os.read(self.master, 4096)
        except OSError:  # EIO: the program has ended and closed the terminal
            return b""

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)


def test_ctrl_c_at_the_prompt_quits_at_once(tmp_path: Path) -> None:
    """The read of the next line ran in asyncio's default executor, which `asyncio.run`
    waits for: after Ctrl-C the program hung until Enter was pressed."""
    terminal = Terminal(tmp_path)
    try:
        terminal.read_until("you> ")
        terminal.type("remember that the spare key is under the flowerpot")
        terminal.read_until("you> ", times=2)
        status = terminal.interrupt()
    finally:
        terminal.close()
    screen = terminal.output.decode("utf-8", "replace")
    assert "Got it, I'll remember: the spare key is under the flowerpot" in screen
    assert status == 130, screen
    assert "Traceback" not in screen and "Error" not in screen, screen
    workspace = tmp_path / "ws"
    assert "the spare key is under the flowerpot" in (workspace / "MEMORY.md").read_text("utf-8")
    closed_cleanly(workspace)


async def test_ctrl_c_while_the_model_answers_quits_at_once(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """The turn is stopped through the core (`core.conversation.chat.interrupt`), not left running
    into a core that closes under it: no reply is stored for it, nothing is torn."""
    asked = asyncio.Event()

    async def never(body: dict[str, Any]) -> Reply:
        asked.set()
        return Reply(text="far too late", delay=3600)

    fake_llm.set_responder(never)
    process = await asyncio.create_subprocess_exec(
        chatmem_executable(),
        "chat",
        "--workspace",
        str(tmp_path / "ws"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env(llm_env(fake_llm)),
    )
    assert process.stdin is not None
    process.stdin.write(b"remember that the boiler is serviced in May\ntell me a long story\n")
    await process.stdin.drain()
    await asyncio.wait_for(asked.wait(), RUN_TIMEOUT)
    process.send_signal(signal.SIGINT)
    stdout, stderr = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
    assert process.returncode == 130, stderr.decode()
    assert "Traceback" not in stderr.decode() and "never retrieved" not in stderr.decode()
    assert stdout.decode().splitlines() == ["Got it, I'll remember: the boiler is serviced in May"]
    workspace = tmp_path / "ws"
    assert "the boiler is serviced in May" in (workspace / "MEMORY.md").read_text("utf-8")
    closed_cleanly(workspace)
    with contextlib.closing(sqlite3.connect(workspace / ".chatmem" / "index.sqlite3")) as db:
        stored = db.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    assert stored[-1] == ("user", "tell me a long story")  # and no reply after it


# --- commands and memory requests -----------------------------------------------------------


def test_unknown_commands_get_the_list_of_commands(tmp_path: Path) -> None:
    out = chat(tmp_path, ["/frobnicate now", "/usr/local/bin is on my PATH", "/search PATH"])
    assert out[0].startswith("Unknown command /frobnicate. 未知命令。Commands:")
    for name, text in COMMANDS:
        assert f"/{name} — {text}" in out[0]
    # Text that merely starts with a slash is a message like any other.
    assert out[1].startswith("(offline) No language model is configured")
    assert "frobnicate" not in out[2]  # the unknown command was not stored as a message


def test_remember_anywhere_and_new_learns_only_real_statements(tmp_path: Path) -> None:
    out = chat(
        tmp_path,
        [
            "我喜欢乌龙茶，请记住",
            "I prefer jasmine tea, please remember that",
            "记住：我下周三要出差",
            "please remember my badge number is 7788",
            "/remember I prefer tabs over spaces",
            "/search tea",
            "I like hiking in the Alps",
            "/new",
            "/memory",
        ],
    )
    assert out[:5] == [
        "好的，我记住了：我喜欢乌龙茶",
        "Got it, I'll remember: I prefer jasmine tea",
        "好的，我记住了：我下周三要出差",
        "Got it, I'll remember: my badge number is 7788",
        "Got it, I'll remember: I prefer tabs over spaces",
    ]
    # /new offline learns the one real statement: not the requests it already captured
    # (with "请记住" still in them), not the commands.
    assert out[7] == "New session started. Learned: 1 new, 0 reinforced."
    memory = out[8].split(r"\n")
    assert memory[0] == "6 memories, best first:"
    contents = sorted(line.split("] ", 1)[1].rsplit(" (", 1)[0] for line in memory[1:])
    assert contents == [
        "I like hiking in the Alps",
        "I prefer jasmine tea",
        "I prefer tabs over spaces",
        "my badge number is 7788",
        "我下周三要出差",
        "我喜欢乌龙茶",
    ]


def test_forget_forgets_every_match_and_the_request_is_not_indexed(tmp_path: Path) -> None:
    out = chat(
        tmp_path,
        [
            "/remember the office wifi password is hunter2",
            "/remember the home wifi password is swordfish",
            "/remember the printer is on floor two",
            "/forget wifi password",
            "yes",
            "/memory",
            "/search wifi password hunter2 swordfish",
        ],
    )
    question = out[3].split(r"\n")
    assert question[0] == "Forget these 2 memories?"
    assert question[-1].startswith("Reply “yes” to forget them all")
    assert out[4].startswith("Forgot 2 memories:")
    assert out[5] == r"1 memory, best first:\n1. [fact] the printer is on floor two (0.80)"
    # Forgotten, not archived (that would still be found), and neither the commands, the
    # question naming the memories nor the answer was indexed as a message.
    assert out[6] == "Nothing found. 没有找到。"
    text = (tmp_path / "ws" / "MEMORY.md").read_text("utf-8")
    assert "hunter2" not in text and "swordfish" not in text


def test_offline_notice_is_not_echoed_as_a_related_memory(tmp_path: Path) -> None:
    out = chat(
        tmp_path,
        [
            "which language model should be configured",
            "can a language model remember this session",
            "/search language model configured session",
        ],
    )
    assert out[0].startswith("(offline) No language model is configured")
    assert "Related memories" not in out[1], out[1]
    assert "offline" not in out[2]


def test_offline_replies_follow_the_message_and_list_only_related_memories(
    tmp_path: Path,
) -> None:
    out = chat(
        tmp_path,
        [
            "remember that my cat is called 小橘",
            "the weather is nice today",
            "what does my cat eat",
        ],
        "--as",
        "alice",
    )
    assert out[0] == "Got it, I'll remember: my cat is called 小橘"
    assert out[1].startswith("(offline) No language model is configured")
    assert "Related memories" not in out[1], out[1]
    assert out[2].endswith(r"\nMEMORY.md:8 my cat is called 小橘"), out[2]
