"""Subcommands with a screen: `tui` (inspect a workspace) and `demo` (build one, then inspect).

Textual, the demo builder and the engine are imported only when one of them runs, so the
other commands (and `--help`) start fast.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.cli import TIME_ARG_RANGE, Output, command, parse_time_arg
from memory_core.base.errors import ChatmemError

if TYPE_CHECKING:
    from memory_core.base.scope import ScopeKey
    from memory_core.config import Config
    from memory_core.engine import MemoryCore

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
"""What textual-serve sets TEXTUAL_DRIVER to in each page's `chatmem tui` (tui/web.py)."""
DEMO_DIR = "chatmem-demo"
"""`adapters.demo.DEFAULT_DIR`, spelled here so the help text needs no import of the demo."""


def has_terminal() -> bool:
    """The TUI reads keys from stdin and draws on stdout: both must be a terminal, or it
    would write escape codes into a pipe or a file until killed. The child a web page
    starts (`tui --web`) draws through textual's web driver, over pipes on purpose."""
    if os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER:
        return True
    return sys.stdin.isatty() and sys.stdout.isatty()


async def run_tui(core: MemoryCore, scope: ScopeKey | None = None) -> int:
    from tui import make_app

    if not has_terminal():
        raise ChatmemError(
            "no terminal: the TUI needs stdin and stdout on a terminal "
            "(status, search and get read a workspace from a script)"
        )

    await make_app(core, scope=scope).run_async()
    return 0


@command(
    "tui",
    "inspect the workspace live: rankings, decay what-if, archive, recall",
    reads_only=True,
    serves=True,
)
class Tui:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--web",
            metavar="HOST:PORT",
            help="serve the TUI to a browser instead (the web extra; e.g. 127.0.0.1:8080, "
            "port 0 picks a free one); off loopback only with --token",
        )
        parser.add_argument(
            "--token",
            default=None,
            help="with --web: a secret every page must bring (?token=…); "
            "env CHATMEM_TUI_TOKEN. Needed to serve on a non-loopback address",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        if args.web:
            return await serve_web(core, args)
        if args.token:
            raise ChatmemError("--token goes with --web (nothing was done)")
        return await run_tui(core, args.scope_key)


async def serve_web(core: MemoryCore, args: argparse.Namespace) -> int:
    from tui import web

    address = web.parse_address(args.web)
    token = args.token or os.environ.get("CHATMEM_TUI_TOKEN", "")
    web.check_exposure(address, token)
    command = web.child_command(
        core.config.workspace_path.absolute(), args.scope_key.value, args.config
    )
    await web.serve(address, token, command, lambda line: print(line, flush=True))
    return 0


@command(
    "demo",
    f"build a demo workspace (default ./{DEMO_DIR}) and open the TUI on it",
    opens_core=False,
)
class Demo:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--no-tui", action="store_true", help="only build the workspace, do not open the TUI"
        )
        parser.add_argument(
            "--now",
            type=parse_time_arg,
            metavar="WHEN",
            help=f"build the demo as of this ISO-8601 date or time ({TIME_ARG_RANGE};"
            " default: now)",
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="delete the demo workspace (only one `chatmem demo` built) and build it again",
        )

    @staticmethod
    async def run(config: Config, args: argparse.Namespace) -> int:
        import asyncio  # here, not at the top: the parser (`--help`) never needs it

        from adapters.demo import DEFAULT_DIR, build_demo
        from memory_core.engine import MemoryCore

        # Without --workspace the demo goes to ./chatmem-demo, never into the configured
        # workspace, which is not even opened.
        target = args.workspace or DEFAULT_DIR
        if not args.no_tui and not has_terminal():
            raise ChatmemError(
                "no terminal: use --no-tui to only build the demo (the TUI needs stdin "
                "and stdout on a terminal); nothing was done"
            )
        if args.reset:
            await asyncio.to_thread(_remove_demo, target)
        result = await build_demo(target, now=args.now)
        verb = "built" if result.built else "already built"
        Output(args.json).emit(
            {"workspace": str(result.path), "built": result.built},
            f"demo workspace {verb}: {result.path}\n"
            f"open it again with: chatmem tui --workspace {result.path}",
        )
        if args.no_tui:
            return 0
        async with MemoryCore.open(config.with_workspace(result.path)) as demo_core:
            return await run_tui(demo_core)


def _remove_demo(target: str) -> None:
    """Delete a demo workspace so it can be built again (blocking). Only a directory the
    demo builder marked as its own is ever deleted; anything else is left for `build_demo`
    to judge (it refuses a workspace that holds memories)."""
    from adapters.demo import is_demo

    root = Path(target).expanduser().absolute()
    if is_demo(root):
        shutil.rmtree(root)
