"""Health and metrics of a running bot: `chatmem telegram` as a real process with
`[metrics] listen` set, scraped over HTTP by a real client while it answers.

The bot polls the fake Bot API and asks the fake model; the test waits for states (the
announced address, a 200, a counter that moved), never for a pause.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testkit.bot import llm_env
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from testkit.waiting import until as wait_until
from tests.functional.conftest import ALICE
from tests.functional.test_console import chatmem_executable, clean_env
from tests.postgres import with_storage

ROOT = Path(__file__).resolve().parents[2]
ANNOUNCED = re.compile(r"chatmem: metrics on (http://\S+)/metrics")
WAIT = 60.0
"""Seconds a state may take to come on a busy machine (the bot's start included)."""
CANARY = "quokka-7731 lives under the mangrove"


@dataclass
class Bot:
    process: asyncio.subprocess.Process
    base: str
    """http://host:port of the metrics server."""
    stderr: list[str]


@asynccontextmanager
async def running_bot(tmp_path: Path, env: dict[str, str]) -> AsyncIterator[Bot]:
    """`chatmem telegram` with metrics on a free port; stopped with SIGTERM at the end,
    which it must survive with exit 0."""
    config = tmp_path / "chatmem.toml"
    config.write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    full = clean_env(with_storage(env))
    # This checkout's code, whichever `chatmem` script runs it.
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), full.get("PYTHONPATH", "")])
    process = await asyncio.create_subprocess_exec(
        chatmem_executable(),
        "telegram",
        "--config",
        str(config),
        "--workspace",
        str(tmp_path / "ws"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=full,
        cwd=tmp_path,
    )
    lines: list[str] = []
    try:
        base = await asyncio.wait_for(_announced(process, lines), WAIT)
        drain = asyncio.create_task(_keep_reading(process, lines))
        yield Bot(process, base, lines)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), WAIT) == 0, "\n".join(lines)
        await drain
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert not any("Traceback" in line for line in lines), "\n".join(lines)


async def _announced(process: asyncio.subprocess.Process, lines: list[str]) -> str:
    assert process.stderr is not None
    while True:
        raw = await process.stderr.readline()
        assert raw, "the bot ended before serving metrics:\n" + "\n".join(lines)
        lines.append(raw.decode(errors="replace").rstrip())
        if found := ANNOUNCED.search(lines[-1]):
            return found.group(1)


async def _keep_reading(process: asyncio.subprocess.Process, lines: list[str]) -> None:
    """The rest of stderr, so a full pipe never blocks the bot."""
    assert process.stderr is not None
    async for raw in process.stderr:
        lines.append(raw.decode(errors="replace").rstrip())


def samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, parsed as Prometheus parses it: (name, labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


async def until(
    http: aiohttp.ClientSession, url: str, done: Callable[[int, str], bool], what: str
) -> tuple[int, str]:
    """GET `url` again until `done(status, body)` holds (at most `WAIT` seconds)."""
    last: list[tuple[int, str]] = []

    async def answered() -> bool:
        async with http.get(url) as response:
            last[:] = [(response.status, await response.text())]
        return done(*last[0])

    try:
        await wait_until(answered, within=WAIT, pause=0.05, what=what)
    except AssertionError:
        status, body = last[0]
        raise TimeoutError(f"timed out waiting for {what}: last {status} {body[:2000]}") from None
    return last[0]


def turns(body: str) -> float:
    return samples(body).get(("chatmem_turns_total", (("outcome", "ok"),)), 0.0)


@pytest.mark.storage  # /readyz and the backlogs read the database: both backends
async def test_a_running_bot_is_scraped_while_it_answers(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    """/healthz and /readyz answer; a DM moves the turn counter, the recall histogram and
    the model's call counter; nothing in the scrape names the scope or repeats the text."""
    fake_llm.default_text = "Noted."
    env = {
        **llm_env(fake_llm),
        "TELEGRAM_BOT_TOKEN": fake_tg.token,
        "TELEGRAM_API_BASE_URL": fake_tg.base_url,
        "CHATMEM_TELEGRAM_ALLOWED_USERS": str(ALICE),
        "CHATMEM_DM_SCOPE": "per-channel-peer",
        "CHATMEM_METRICS_LISTEN": "127.0.0.1:0",
    }
    async with running_bot(tmp_path, env) as bot, aiohttp.ClientSession() as http:
        async with http.get(f"{bot.base}/healthz") as health:
            assert health.status == 200
        _, ready = await until(
            http, f"{bot.base}/readyz", lambda s, b: s == 200, "the bot to be ready"
        )
        assert "database: ok" in ready and "index: ok" in ready
        _, before = await until(http, f"{bot.base}/metrics", lambda s, b: s == 200, "a scrape")
        assert turns(before) == 0
        first = samples(before)
        assert first[("chatmem_ready", ())] == 1
        assert first[("chatmem_recall_seconds_count", ())] == 0

        fake_tg.add_private_message(ALICE, f"remember: {CANARY}")
        await fake_tg.wait_for_sent(1, chat_id=ALICE, timeout=WAIT)
        fake_tg.add_private_message(ALICE, "where does the quokka live?")
        await fake_tg.wait_for_sent(2, chat_id=ALICE, timeout=WAIT)
        _, after = await until(
            http, f"{bot.base}/metrics", lambda s, b: turns(b) >= 1, "the turn counter"
        )
        moved = samples(after)
        assert moved[("chatmem_recall_seconds_count", ())] >= 1
        assert moved[("chatmem_search_seconds_count", ())] >= 1
        assert moved[("chatmem_llm_calls_total", (("outcome", "ok"),))] >= 1
        assert moved[("chatmem_llm_seconds_count", ())] >= 1
        assert moved[("chatmem_scopes", ())] >= 1
        assert moved[("chatmem_journal_depth", ())] >= 0
        # No scope key, no name, no text: the labels hold fixed words only.
        for private in ("quokka", "mangrove", "peer:", "telegram"):
            assert private not in after, private
        labels = {k for (_, pairs) in moved for k, _ in pairs}
        assert labels <= {"outcome", "action", "call", "le"}, labels
