"""The load driver: 100 chats x 20 messages through the fake Bot API, the real PTB client,
the real core and the fake model, asserting every promise of it (each message answered
once, in its own chat, with nothing of another chat in any prompt) and returning the
figures (throughput, turn latencies).

`tests/functional/test_load.py` runs it for the promises, `bench/load_bench.py` for the
figures: one driver, so the figures come from a run the promises hold for.
"""

from __future__ import annotations

import contextvars
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_core.engine import MemoryCore
from testkit.bot import last_user_text, telegram_bot, wait_until
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI

PRIVATE_CHATS = 50
GROUP_CHATS = 50
MESSAGES_PER_CHAT = 20  # the first one remembers the chat's marker, then 19 model turns
USER_BASE = 10_000
GROUP_BASE = -50_000

TOKEN = re.compile(r"tok-c(\d{3})-m(\d{2})")
MARKER = re.compile(r"mk-c(\d{3})-zq")

_llm_seconds: contextvars.ContextVar[list[float]] = contextvars.ContextVar("llm_seconds")


def marker(index: int) -> str:
    return f"mk-c{index:03d}-zq"


def token(index: int, message: int) -> str:
    return f"tok-c{index:03d}-m{message:02d}"


def echo(body: dict[str, Any]) -> str:
    """The fake model names the chat: it echoes the token of the newest user message."""
    found = TOKEN.search(last_user_text(body))
    return f"echo {found.group(0)}" if found else "no token"


def chats_named(body: dict[str, Any]) -> set[int]:
    """The chats whose marker or tokens appear anywhere in a recorded request."""
    prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
    return {int(c) for c in MARKER.findall(prompt)} | {int(c) for c, _ in TOKEN.findall(prompt)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_load(
    tmp_path: Path,
    fake_tg: FakeTelegramAPI,
    fake_llm: FakeOpenAI,
    *,
    private_chats: int = PRIVATE_CHATS,
    group_chats: int = GROUP_CHATS,
    messages_per_chat: int = MESSAGES_PER_CHAT,
    env: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Drive the load and assert every promise of it; the figures, for the bench. `env`
    adds to the bot's environment (a test passes its storage backend there)."""
    fake_llm.set_responder(echo)
    chats = range(private_chats + group_chats)
    injected: dict[str, float] = {}
    delivered: dict[str, float] = {}

    def chat_id(index: int) -> int:
        return USER_BASE + index if index < private_chats else GROUP_BASE - index

    def send_message(params: dict[str, Any]) -> Any:
        found = TOKEN.search(str(params.get("text") or ""))
        if found:
            delivered.setdefault(found.group(0), time.perf_counter())
        return fake_tg._send_message(params)

    fake_tg.on("sendMessage", send_message)

    async with telegram_bot(
        tmp_path,
        fake_tg,
        llm=fake_llm,
        env={**(env or {}), "CHATMEM_DM_SCOPE": "per-peer"},
        telegram={
            "allowed_users": [chat_id(i) for i in range(private_chats)],
            "allowed_chats": [chat_id(i) for i in range(private_chats, len(chats))],
            # A local Bot API: the load is on the core, not on Telegram's flood limits
            # (test_telegram_delivery.py checks those are kept by default).
            "max_requests_per_second": 0,
            "max_messages_per_minute_per_group": 0,
        },
    ) as bot:
        turn_seconds: list[float] = []
        core_seconds: list[float] = []
        core: MemoryCore = bot.core
        conversation = core.conversation
        original_chat = conversation.turn
        original_llm = core.llm.chat

        async def timed_llm(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original_llm(*args, **kwargs)
            finally:
                _llm_seconds.get([0.0])[0] += time.perf_counter() - started

        async def timed_chat(*args: Any, **kwargs: Any) -> Any:
            llm = [0.0]
            _llm_seconds.set(llm)
            started = time.perf_counter()
            result = await original_chat(*args, **kwargs)
            total = time.perf_counter() - started
            turn_seconds.append(total)
            core_seconds.append(total - llm[0])
            return result

        # Instance attributes over the methods, for this core only (closed below).
        conversation.turn = timed_chat  # type: ignore[method-assign]
        core.llm.chat = timed_llm  # type: ignore[method-assign]

        def add(index: int, text: str) -> None:
            if index < private_chats:
                fake_tg.add_private_message(chat_id(index), text, first_name=f"User{index}")
            else:
                fake_tg.add_group_message(
                    chat_id(index), USER_BASE + index, f"@chatmem_bot {text}", title=f"G{index}"
                )

        # Each chat first remembers its marker (no model call), then talks.
        for index in chats:
            add(index, f"remember that the marker of this chat is {marker(index)}")
        await wait_until(
            lambda: len(fake_tg.sent_messages) >= len(chats), "the markers", timeout=60
        )
        expected_total = len(chats) * messages_per_chat
        started, cpu_started = time.perf_counter(), time.process_time()
        for message in range(1, messages_per_chat):
            for index in chats:
                tok = token(index, message)
                injected[tok] = time.perf_counter()
                add(index, f"message {tok}: please echo my token")
        await wait_until(
            lambda: len(fake_tg.sent_messages) >= expected_total, "every reply", timeout=250
        )
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        turn_requests = list(fake_llm.chat_requests())
    # Closing the core flushes the open sessions (more model calls): also one chat each.
    all_requests = fake_llm.chat_requests()

    # Every message answered exactly once, in its own chat, naming that chat.
    assert len(fake_tg.sent_messages) == expected_total
    for index in chats:
        sent = fake_tg.sent_to(chat_id(index))
        assert len(sent) == messages_per_chat, (index, [m.text for m in sent])
        assert sent[0].text == (
            f"Got it, I'll remember: the marker of this chat is {marker(index)}"
        )
        echoed = [m.text.removeprefix("echo ") for m in sent[1:]]
        assert sorted(echoed) == [token(index, m) for m in range(1, messages_per_chat)]
    assert all(c.error_code is None for c in fake_tg.calls_to("sendMessage"))

    # Each turn's prompt carries its own chat's marker and nothing of any other chat.
    assert len(turn_requests) == len(chats) * (messages_per_chat - 1)
    per_chat: Counter[int] = Counter()
    for body in turn_requests:
        owner = int(TOKEN.search(last_user_text(body)).group(1))  # type: ignore[union-attr]
        per_chat[owner] += 1
        assert chats_named(body) == {owner}
        assert marker(owner) in str(body["messages"][0]["content"])
    assert set(per_chat.values()) == {messages_per_chat - 1}
    # The shutdown flushes too: every request is about exactly one chat.
    for body in all_requests[len(turn_requests) :]:
        assert len(chats_named(body)) == 1

    scopes: defaultdict[str, int] = defaultdict(int)
    for path in (tmp_path / "ws" / "memory" / "scopes").iterdir():
        scopes[path.name.split("_")[0]] += 1
    assert dict(scopes) == {"peer": private_chats, "group": group_chats}

    end_to_end = [delivered[t] - injected[t] for t in injected]
    return {
        "messages": expected_total,
        "model turns": len(turn_requests),
        "messages/s (model turns, end to end)": len(turn_requests) / elapsed,
        "injection to reply p50 ms (queueing included)": 1000 * statistics.median(end_to_end),
        "injection to reply p95 ms (queueing included)": 1000 * percentile(end_to_end, 0.95),
        "turn p50 ms": 1000 * statistics.median(turn_seconds),
        "turn p95 ms": 1000 * percentile(turn_seconds, 0.95),
        "turn excl. LLM p50 ms": 1000 * statistics.median(core_seconds),
        "turn excl. LLM p95 ms": 1000 * percentile(core_seconds, 0.95),
        "wall s (model turns)": elapsed,
        "process CPU s (model turns)": cpu,
    }
