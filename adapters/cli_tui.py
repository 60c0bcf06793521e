"""Subcommands with a screen: `tui` (inspect a workspace) and `demo` (build one, then inspect).

Textual is imported only when one of them runs, so the other commands start fast.
"""

from __future__ import annotations

import argparse

from adapters.cli import Output, command, parse_time_arg
from adapters.demo import DEFAULT_DIR, build_demo
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.scope import ScopeKey


async def run_tui(core: MemoryCore, scope: ScopeKey | None = None) -> int:
    from tui import make_app

    await make_app(core, scope=scope).run_async()
    return 0


@command("tui", "inspect the workspace live: rankings, decay what-if, archive, recall")
class Tui:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        return await run_tui(core, args.scope_key)


@command(
    "demo",
    f"build a demo workspace (default ./{DEFAULT_DIR}) and open the TUI on it",
    opens_core=False,
)
class Demo:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--no-tui", action="store_true", help="only build the workspace, do not open the TUI"
        )
        parser.add_argument(
            "--now", type=parse_time_arg, help="build the demo as of this ISO-8601 time"
        )

    @staticmethod
    async def run(config: Config, args: argparse.Namespace) -> int:
        # Without --workspace the demo goes to ./chatmem-demo, never into the configured
        # workspace, which is not even opened.
        target = args.workspace or DEFAULT_DIR
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
