"""`python -m testkit.serve MODE` as a person runs it: a process that prints the variables
that point chatmem at it, answers with them, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import openai
import psycopg

from testkit.serve import READY
from tests.functional.test_console import clean_env

ROOT = Path(__file__).resolve().parents[2]
WAIT = 120.0
"""Seconds a start may take on a busy machine (PostgreSQL's initdb included)."""
EXPORT = re.compile(r"^export ([A-Z_]+)=(\S+)$")


@asynccontextmanager
async def serving(mode: str, tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """The mode's process and the variables it printed; stopped with SIGINT (Ctrl-C),
    which must end it with exit 0."""
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "testkit.serve",
        mode,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    try:
        variables = await asyncio.wait_for(_variables(process), WAIT)
        yield variables
        process.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), WAIT)
        assert process.returncode == 0, err.decode()
        assert b"Traceback" not in err, err.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _variables(process: asyncio.subprocess.Process) -> dict[str, str]:
    assert process.stdout is not None
    found: dict[str, str] = {}
    while True:
        line = (await process.stdout.readline()).decode()
        assert line, "the process ended before it was ready"
        if line.rstrip("\n") == READY:
            return found
        if match := EXPORT.match(line.strip()):
            found[match.group(1)] = match.group(2)


async def test_openai_mode_answers_a_real_client(tmp_path: Path) -> None:
    async with serving("openai", tmp_path) as variables:
        assert set(variables) == {"CHATMEM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
        async with openai.AsyncOpenAI(
            base_url=variables["OPENAI_BASE_URL"], api_key=variables["OPENAI_API_KEY"]
        ) as client:
            reply = await client.chat.completions.create(
                model=variables["CHATMEM_MODEL"],
                messages=[{"role": "user", "content": "hello there"}],
            )
    assert reply.choices[0].message.content == "(fake model) I heard: hello there"


async def test_telegram_mode_answers_get_me(tmp_path: Path) -> None:
    async with serving("telegram", tmp_path) as variables:
        assert variables["CHATMEM_TELEGRAM_ALLOWED_USERS"] == "42"
        url = f"{variables['TELEGRAM_API_BASE_URL']}{variables['TELEGRAM_BOT_TOKEN']}/getMe"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            body = await response.json()
    assert body["ok"] is True
    assert body["result"]["is_bot"] is True
    assert str(body["result"]["id"]) == variables["TELEGRAM_BOT_TOKEN"].split(":")[0]


async def test_postgres_mode_serves_a_database_with_pgvector(tmp_path: Path) -> None:
    async with serving("postgres", tmp_path) as variables:
        assert variables["CHATMEM_STORAGE_BACKEND"] == "postgres"
        dsn = variables["CHATMEM_POSTGRES_DSN"].strip("'")

        def extensions() -> set[str]:
            with psycopg.connect(dsn) as conn:
                return {row[0] for row in conn.execute("SELECT extname FROM pg_extension")}

        assert "vector" in await asyncio.to_thread(extensions)
