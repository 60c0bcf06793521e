"""Processes that start while PostgreSQL is down, or while it comes back, open, work from
their files and spools as a running process does, and close cleanly: nothing acknowledged
is lost and no traceback reaches their stderr.

Real `chatmem` processes on a server of the test's own (tests/reliability/conftest.py),
stopped and started again under them. "While it comes back" is driven by a state, not a
pause: the server is started again once every process has said, on its stderr, that it
found the server away at its start.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tests.functional.test_console import clean_env
from tests.postgres import PostgresServer
from tests.reliability.support import REPO, cli, die_with_journalled, eventually, storage_env_of
from tests.reliability.test_postgres_outage import pg_config

pytestmark = pytest.mark.timeout(300)

ALICE = ScopeKey("peer:alice")
AWAY_AT_START = "database unreachable at start"
WAIT = 120.0
FACTS = {
    "down": ("the boiler was serviced in May", "keeps bees in the garden", "the kayak is red"),
    "back": ("sourdough starter is named Bob", "the dentist is on Friday", "violin on Sundays"),
}
"""Captures unlike each other: each one saved new, none an update of another."""
DEAD = {
    "down": ("grandma lives in Porto", "alice likes green tea"),
    "back": ("the car is in the garage", "alice rides a blue bike"),
}
SAVED = re.compile(r"saved new \[([0-9a-f]+)\]")


@dataclass
class Child:
    """A `chatmem` process, its stderr read whole as it comes."""

    process: asyncio.subprocess.Process
    stderr: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None
    said: asyncio.Event = field(default_factory=asyncio.Event)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace")
            self.stderr.append(line)
            if AWAY_AT_START in line:
                self.said.set()
        self.said.set()  # ended: nothing more will be said

    async def reply(self, line: str) -> str:
        """Send one chat line; the process's answer."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()
        answer = await asyncio.wait_for(self.process.stdout.readline(), WAIT)
        assert answer, "".join(self.stderr)
        return answer.decode()

    async def finish(self) -> tuple[int, str, str]:
        """Exit code, stdout and stderr once it ends (its stdin closed)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        assert self.process.stdout is not None
        out = await asyncio.wait_for(self.process.stdout.read(), WAIT)
        code = await asyncio.wait_for(self.process.wait(), WAIT)
        assert self.reader is not None
        await asyncio.wait_for(self.reader, WAIT)
        return code, out.decode(), "".join(self.stderr)


async def start(config: Config, *args: str, chat: bool = False) -> Child:
    process = await asyncio.create_subprocess_exec(
        *cli(*args, "--workspace", str(config.workspace_path)),
        stdin=asyncio.subprocess.PIPE if chat else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(storage_env_of(config)),
        cwd=REPO,
    )
    child = Child(process)
    child.reader = asyncio.create_task(child._read())
    return child


def clean(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "pgvector is not installed" not in stderr, stderr


def stored_messages(config: Config) -> set[str]:
    with psycopg.connect(config.storage.postgres_dsn) as conn:
        rows = conn.execute("SELECT content FROM messages WHERE role = 'user'").fetchall()
    return {str(r[0]) for r in rows}


async def spooled_message_reaches_the_database(config: Config, text: str) -> None:
    async def written() -> bool:
        try:
            return text in await asyncio.to_thread(stored_messages, config)
        except psycopg.OperationalError:
            return False

    await eventually(written, WAIT)


@pytest.mark.slow
async def test_processes_started_while_the_server_is_down_or_coming_back_open_and_lose_nothing(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    config = pg_config(own_postgres, tmp_path / "ws")
    async with MemoryCore.open(config) as core:  # the workspace has used this server
        await core.memories.capture(MAIN, "before: the workspace met its server")
    acknowledged: dict[str, set[str]] = {MAIN.value: set(), ALICE.value: set()}
    outcomes: list[tuple[int, str, str]] = []

    def dead_process_journals(phase: str) -> None:
        ids = die_with_journalled(
            config,
            [
                (MAIN.value, DEAD[phase][0], False),
                (ALICE.value, DEAD[phase][1], False),
            ],
        )
        for scope, found in ids.items():
            acknowledged[scope].update(found)

    async def run_captures(children: list[Child]) -> None:
        for child in children:
            code, out, err = await child.finish()
            outcomes.append((code, out, err))
            assert code == 0, err
            saved = SAVED.findall(out)
            assert len(saved) == 1, out
            acknowledged[MAIN.value].update(saved)

    for phase in ("down", "back"):
        dead_process_journals(phase)
        await asyncio.to_thread(own_postgres.pause)
        children = [await start(config, "capture", fact) for fact in FACTS[phase]]
        bot = await start(config, "chat", chat=True)
        if phase == "back":
            # Every process found the server away at its start: it comes back now, while
            # they go on starting (or have started).
            for child in [*children, bot]:
                await asyncio.wait_for(child.said.wait(), WAIT)
            assert all(AWAY_AT_START in "".join(c.stderr) for c in [*children, bot])
            await asyncio.to_thread(own_postgres.resume)
        else:
            await run_captures(children)
        assert "(offline)" in await bot.reply(f"{phase}: a turn while the server is away")
        if phase == "down":
            await asyncio.to_thread(own_postgres.resume)
        else:
            await run_captures(children)
        # The running bot writes its spool once the server answers.
        await spooled_message_reaches_the_database(
            config, f"{phase}: a turn while the server is away"
        )
        assert "(offline)" in await bot.reply(f"{phase}: a turn after")
        outcomes.append(await bot.finish())

    assert [code for code, _, _ in outcomes] == [0] * len(outcomes), outcomes
    for _, _, err in outcomes:
        clean(err)
    assert len(acknowledged[MAIN.value]) == 2 + 3 + 3  # two dead processes', six captures
    # A start with the server up replays whatever is still journalled: nothing is lost.
    lost: set[str] = set()
    async with MemoryCore.open(config) as core:
        for scope in (MAIN, ALICE):
            kept = {e.id for e in await core.memories.entries(scope)}
            lost |= acknowledged[scope.value] - kept
    total = sum(len(ids) for ids in acknowledged.values())
    print(
        f"\nstarted around an outage: {len(outcomes)} processes, "
        f"{sum(code == 0 for code, _, _ in outcomes)} opened and closed with exit 0; "
        f"{total} acknowledged captures, {len(lost)} lost"
    )
    assert not lost
    messages = stored_messages(config)
    for phase in ("down", "back"):
        assert {f"{phase}: a turn while the server is away", f"{phase}: a turn after"} <= messages
