"""Subcommands that talk: chat (console), telegram, dingtalk."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from adapters.cli import command
from memory_core.base.errors import InputRefused
from memory_core.base.inputs import storable

if TYPE_CHECKING:
    import asyncio

    from memory_core.engine import MemoryCore


def setup_logging(core: MemoryCore) -> None:
    from memory_core.config import secret_values

    logging.basicConfig(
        level=getattr(logging, core.config.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request URL, and a Telegram URL contains the bot token.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    # Libraries log secrets of their own accord too (PTB at DEBUG: the Bot API URL, token
    # included): every line any logger writes has the config's secrets cut out.
    hiding = SecretsHidden(secret_values(core.config))
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, SecretsHidden)]:
            handler.removeFilter(old)
        handler.addFilter(hiding)


class SecretsHidden(logging.Filter):
    """A handler filter that writes each record with every secret replaced by `<secret>`,
    in its message and in its traceback."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self._secrets = sorted(set(secrets), key=len, reverse=True)

    def hidden(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<secret>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the message
            message = f"{record.msg} (arguments: {record.args!r})"
        record.msg, record.args = self.hidden(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.hidden(record.exc_text)
        if record.stack_info:
            record.stack_info = self.hidden(record.stack_info)
        return True


async def serve_until_signal(serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run a bot until SIGINT/SIGTERM; the core is closed (sessions flushed) by the caller."""
    import asyncio  # here, not at the top: the parser (`--help`) never needs it

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await serve(stop)
    return 0


def name_arg(value: str) -> str:
    """A name typed on the command line, refused when it holds bytes that are not UTF-8
    (it becomes a chat id and a speaker's name, both stored), normalised as every id a
    scope is made of (`--as Ａｎｎ` is `Ann`; an invisible character is refused)."""
    from memory_core.base.errors import ScopeError
    from memory_core.base.scope import normalise_id

    try:
        return normalise_id(storable(value, "the name"), "the name")
    except (InputRefused, ScopeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@command(
    "chat",
    "chat with the memory bot in this terminal (no token needed)",
    creates=True,
    serves=True,
    own_scope="its scope is made from who is talking: use --as NAME or --group CHAT_ID",
)
class Chat:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--as",
            dest="user",
            default="me",
            type=name_arg,
            metavar="NAME",
            help="who is talking (default: me)",
        )
        parser.add_argument(
            "--group",
            type=name_arg,
            metavar="CHAT_ID",
            help="talk in this group chat (scope group:console:CHAT_ID) instead of a direct chat",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        from adapters.console import run_console

        logging.basicConfig(level=logging.WARNING)
        return await run_console(core, user=args.user, group=args.group)


@command("telegram", "run the Telegram bot (TELEGRAM_BOT_TOKEN)", creates=True, serves=True)
class Telegram:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        from adapters.telegram_bot import run_telegram

        setup_logging(core)
        settings = core.config.telegram
        return await serve_until_signal(lambda stop: run_telegram(core, settings, stop))


@command("dingtalk", "run the DingTalk robot (callback or stream mode)", creates=True, serves=True)
class DingTalk:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--mode",
            choices=["callback", "stream"],
            help="callback or stream (default: dingtalk.mode of the config, callback)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        from adapters.dingtalk_bot import run_dingtalk_callback, run_dingtalk_stream

        setup_logging(core)
        settings = core.config.dingtalk
        mode = args.mode or settings.mode
        runner = run_dingtalk_stream if mode == "stream" else run_dingtalk_callback
        return await serve_until_signal(lambda stop: runner(core, settings, stop))
