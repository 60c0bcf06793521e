"""Subcommands that talk: chat (console), telegram, dingtalk. Each opens one serving
core and hands it to its front end, which runs until stopped."""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from adapters.cli import command
from memory_core.base.errors import InputRefused
from memory_core.base.inputs import storable

if TYPE_CHECKING:
    import asyncio

    from memory_core.engine import MemoryCore


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

        return await run_console(core, user=args.user, group=args.group)


@command("telegram", "run the Telegram bot (TELEGRAM_BOT_TOKEN)", creates=True, serves=True)
class Telegram:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        from adapters.settings import AppConfig
        from adapters.telegram_bot import run_telegram

        settings = AppConfig.of(core.config).telegram
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
        from adapters.settings import AppConfig

        settings = AppConfig.of(core.config).dingtalk
        mode = args.mode or settings.mode
        runner = run_dingtalk_stream if mode == "stream" else run_dingtalk_callback
        return await serve_until_signal(lambda stop: runner(core, settings, stop))
