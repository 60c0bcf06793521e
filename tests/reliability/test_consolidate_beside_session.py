"""`chatmem consolidate` beside a chat whose session is open in another process leaves
that session's inputs to its `/new`.

The CLI's core built its history on first use, and consolidation asked nothing of it
before it looked for open sessions: it saw none, took the open session's inputs, and the
session's `/new` then learned nothing ("Learned: 0 new").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.functional.test_console import clean_env
from tests.reliability.support import REPO, cli

pytestmark = pytest.mark.storage

TAUGHT = ["我喜欢乌龙茶", "我住在杭州", "我对花生过敏"]
"""What the session teaches: each a statement the offline extraction learns."""
REPLY_TIMEOUT = 60.0
"""A guard against a hang, not a figure."""


class ChatProcess:
    """`chatmem chat` with piped stdin: one line out per line in."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, workspace: Path, env: Mapping[str, str]) -> ChatProcess:
        process = await asyncio.create_subprocess_exec(
            *cli("chat", "--workspace", str(workspace), "--as", "alice"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO,
            env=clean_env(env),
        )
        return cls(process)

    async def say(self, line: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()
        reply = await asyncio.wait_for(self.process.stdout.readline(), REPLY_TIMEOUT)
        return reply.decode("utf-8").rstrip("\n")

    async def end(self) -> str:
        """Its stderr, once it exited 0 at the end of its input."""
        _, stderr = await asyncio.wait_for(self.process.communicate(b""), REPLY_TIMEOUT)
        assert self.process.returncode == 0, stderr.decode()
        return stderr.decode()


async def command(workspace: Path, env: Mapping[str, str], name: str) -> object:
    """`chatmem NAME --json` in a process of its own: what it printed."""
    process = await asyncio.create_subprocess_exec(
        *cli(name, "--workspace", str(workspace), "--json"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env=clean_env(env),
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), REPLY_TIMEOUT)
    assert process.returncode == 0, stderr.decode()
    return json.loads(stdout)


async def consolidate(workspace: Path, env: Mapping[str, str]) -> dict[str, int]:
    """`chatmem consolidate` run by hand: changes by phase."""
    report = await command(workspace, env, "consolidate")
    assert isinstance(report, dict)
    return {phase["phase"]: phase["changes"] for phase in report["phases"]}


@pytest.mark.slow
async def test_consolidate_beside_an_open_session_leaves_it_to_its_new(
    workspace: Path, storage_env: Mapping[str, str]
) -> None:
    await command(workspace, storage_env, "init")
    chat = await ChatProcess.start(workspace, storage_env)
    try:
        for line in TAUGHT:
            assert await chat.say(line)  # offline: the message is kept, not answered
        beside = await consolidate(workspace, storage_env)
        learned = await chat.say("/new")
    finally:
        stderr = await chat.end()
    assert "Traceback" not in stderr
    assert (beside["filter"], beside["extract"]) == (0, 0)  # the open session's: left alone
    assert learned == f"New session started. Learned: {len(TAUGHT)} new, 0 reinforced."
    memory = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert [line for line in TAUGHT if memory.count(line) != 1] == []
    after = await consolidate(workspace, storage_env)
    assert (after["filter"], after["extract"]) == (0, 0)  # /new's session is done
