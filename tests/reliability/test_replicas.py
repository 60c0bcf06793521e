"""Two bot processes, one workspace, one PostgreSQL: the replicas of issue 13.

Two real `chatmem telegram` processes poll one fake Bot API (each sees the updates the
other sees, as after a redelivery) and ask one fake model, over one workspace directory
and one database of their own. 30 chats x 10 messages: every phase below waits for a state
(both replicas polling, turns held in both, every reply of a round), so the race is met
at any size; the size only has to keep many chats in flight at once. Midway, every model
call is held while both replicas have turns in flight, replica A is killed with SIGKILL,
the calls are let go, and the platform delivers again what nobody answered (as Telegram
retries a webhook) until all is answered: B takes over what A had taken. Then the
database is stopped and started again while B goes on. At the end:

* every message is answered exactly once, in its own chat, and no prompt holds another
  chat's words;
* every capture a replica acknowledged is in its chat's MEMORY.md once a process opens
  the workspace (A's journalled ones too), and every message is in the history once;
* the daily archive ran in one replica, once.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from testkit.bot import last_user_text, wait_until
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.support import sql

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
CHATS = 30
PRIVATE = 15
MESSAGES = 10  # the first remembers the chat's marker, then 9 model turns
USER_BASE = 10_000
GROUP_BASE = -50_000
TOKEN = re.compile(r"tok-c(\d{3})-m(\d{2})")
MARKER = re.compile(r"mk-c(\d{3})-zq")


def chat_id(index: int) -> int:
    return USER_BASE + index if index < PRIVATE else GROUP_BASE - index


def marker(index: int) -> str:
    return f"mk-c{index:03d}-zq"


def token(index: int, message: int) -> str:
    return f"tok-c{index:03d}-m{message:02d}"


class Model:
    """The fake model's answers: the newest user message's token, echoed. `hold()`
    keeps every call waiting (counted per replica by the model name it asks for)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting: Counter[str] = Counter()

    async def __call__(self, body: dict[str, Any]) -> str:
        if not self.gate.is_set():
            name = str(body.get("model"))
            self.waiting[name] += 1
            await self.gate.wait()
            self.waiting[name] -= 1
        found = TOKEN.search(last_user_text(body))
        return f"echo {found.group(0)}" if found else "noted"


def write_config(path: Path) -> None:
    users = ", ".join(str(chat_id(i)) for i in range(PRIVATE))
    groups = ", ".join(str(chat_id(i)) for i in range(PRIVATE, CHATS))
    path.write_text(
        f"""dm_scope = "per-peer"

[telegram]
allowed_users = [{users}]
allowed_chats = [{groups}]
max_requests_per_second = 0
max_messages_per_minute_per_group = 0

[long_term]
write_delay_seconds = 60.0

[schedule]
daily_archive_at = "00:00"
""",
        encoding="utf-8",
    )


def start_replica(
    name: str, config: Path, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "--config", str(config), "telegram"],
        cwd=REPO,
        env={**os.environ, **env, "CHATMEM_MODEL": f"gpt-{name}"},
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )


async def test_two_replicas_answer_every_message_once_through_a_kill_and_a_restart(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    workspace = tmp_path / "ws"
    config_path = tmp_path / "chatmem.toml"
    write_config(config_path)
    model = Model()
    async with FakeTelegramAPI() as telegram, FakeOpenAI() as llm:
        llm.set_responder(model)
        env = {
            "CHATMEM_WORKSPACE": str(workspace),
            "CHATMEM_STORAGE_BACKEND": "postgres",
            "CHATMEM_POSTGRES_DSN": own_postgres.uri,
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_BASE_URL": telegram.base_url,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "sk-test",
            "PTB_TIMEDELTA": "1",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        logs = {name: tmp_path / f"replica-{name}.log" for name in "ab"}
        replicas = {name: start_replica(name, config_path, env, logs[name]) for name in "ab"}
        try:
            redelivered = await _drive(telegram, model, replicas, own_postgres)
            # B writes what it spooled while the server was away once it answers again.
            await wait_until(
                lambda: "database reachable again" in logs["b"].read_text(),
                "B's spool written",
                120,
            )
        finally:
            for proc in replicas.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in replicas.values():
                try:
                    await asyncio.to_thread(proc.wait, 60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        turn_requests = [b for b in llm.chat_requests() if TOKEN.search(last_user_text(b))]

    # Every message answered exactly once, in its own chat.
    for index in range(CHATS):
        sent = [m.text for m in telegram.sent_to(chat_id(index))]
        echoed = sorted(t.removeprefix("echo ") for t in sent if t.startswith("echo "))
        assert echoed == [token(index, m) for m in range(1, MESSAGES)], index
        assert len(sent) == MESSAGES, (index, sent)
    # No prompt holds another chat's words.
    for body in turn_requests:
        owner = int(TOKEN.search(last_user_text(body)).group(1))  # type: ignore[union-attr]
        prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
        named = {int(c) for c in MARKER.findall(prompt)} | {
            int(c) for c, _ in TOKEN.findall(prompt)
        }
        assert named == {owner}, (owner, named)
    # A died with turns in flight, which B answered when they came again; B went on
    # through the database's restart (it said so once, and once when it was over).
    assert redelivered >= 1
    b_log = logs["b"].read_text()
    assert b_log.count("database unreachable: messages are kept") == 1, b_log[-3000:]
    assert "database reachable again" in b_log
    # The daily archive ran in one replica, once.
    ran = sum(log.read_text().count("ran the daily job daily-archive") for log in logs.values())
    assert ran == 1, [log.read_text()[-2000:] for log in logs.values()]

    # A process opening the workspace replays what A journalled and never wrote; every
    # acknowledged capture is in its chat's file, every message in the history once.
    config = load_config(
        None,
        env={
            "CHATMEM_STORAGE_BACKEND": "postgres",
            "CHATMEM_POSTGRES_DSN": own_postgres.uri,
            "CHATMEM_DM_SCOPE": "per-peer",
        },
        workspace=workspace,
    )
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        scopes = await core.memories.scopes()
        texts = {
            scope.value: " ".join(e.content for e in await core.memories.entries(scope))
            for scope in scopes
        }
        for index in range(CHATS):
            owners = [key for key, text in texts.items() if marker(index) in text]
            assert len(owners) == 1, (index, owners)
        rows = await sql(core, "SELECT content FROM messages WHERE role = 'user'")
        stored = {m.group(0) for (content,) in rows if (m := TOKEN.search(str(content)))}
        # (A message A stored before it died is stored again by B's turn: the history
        # may hold such a message twice, never lose one.)
        assert stored == {token(i, m) for i in range(CHATS) for m in range(1, MESSAGES)}


async def _drive(
    telegram: FakeTelegramAPI,
    model: Model,
    replicas: dict[str, subprocess.Popen[bytes]],
    own_postgres: PostgresServer,
) -> int:
    """Drive the replicas through the run; how many deliveries were made again."""
    updates: dict[str, dict[str, Any]] = {}
    redelivered = 0

    def add(index: int, text: str, key: str) -> None:
        if index < PRIVATE:
            update = telegram.add_private_message(chat_id(index), text, first_name=f"U{index}")
        else:
            update = telegram.add_group_message(
                chat_id(index), USER_BASE + index, f"@chatmem_bot {text}", title=f"G{index}"
            )
        updates[key] = update

    def send_round(message: int) -> None:
        for index in range(CHATS):
            tok = token(index, message)
            add(index, f"message {tok}: please echo my token", tok)

    def answered() -> set[str]:
        out = set()
        for message in telegram.sent_messages:
            if (found := TOKEN.search(message.text)) is not None or (
                found := MARKER.search(message.text)
            ) is not None:
                out.add(found.group(0))
        return out

    def redeliver_unanswered() -> int:
        done = answered()
        missing = [key for key in updates if key not in done]
        for key in missing:
            telegram.add_update({"message": updates[key]["message"]})
        return len(missing)

    async def both_polling() -> None:
        # Two long polls held at once: one replica never holds two.
        await wait_until(lambda: telegram.held_polls >= 2, "both replicas polling", 60)

    await both_polling()
    for index in range(CHATS):
        add(index, f"remember that the marker of this chat is {marker(index)}", marker(index))
    await wait_until(lambda: len(answered()) >= CHATS, "the markers", 120)

    half = MESSAGES // 2
    for message in range(1, half):
        send_round(message)
    await wait_until(lambda: len(answered()) >= CHATS * half, "the first half", 300)

    # Both replicas mid-turn: hold the model, send more, kill A while it waits.
    model.gate.clear()
    send_round(half)
    await wait_until(
        lambda: model.waiting["gpt-a"] >= 1 and model.waiting["gpt-b"] >= 1,
        "turns in flight in both replicas",
        120,
    )
    replicas["a"].send_signal(signal.SIGKILL)
    await asyncio.to_thread(replicas["a"].wait, 30)
    model.gate.set()

    # What A had taken and never answered is delivered again, as a platform retries, until
    # every message of the round is answered (B drops a delivery of what it is answering).
    def round_answered() -> bool:
        return len(answered()) >= CHATS * (half + 1)

    for _ in range(10):
        redelivered += redeliver_unanswered()
        try:
            await wait_until(round_answered, "A's turns taken over", 5)
            break
        except TimeoutError:
            continue
    await wait_until(round_answered, "A's turns taken over", 120)

    # The database goes away for a while and comes back; B goes on meanwhile.
    await asyncio.to_thread(own_postgres.pause)
    send_round(half + 1)
    await wait_until(lambda: len(answered()) >= CHATS * (half + 2), "turns while it is down", 300)
    await asyncio.to_thread(own_postgres.resume)
    for message in range(half + 2, MESSAGES):
        send_round(message)
    await wait_until(lambda: len(answered()) >= CHATS * MESSAGES, "every reply", 600)
    return redelivered
