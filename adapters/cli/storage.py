"""Subcommands over the storage backend: migrate, which copies a workspace's history,
audit and journal to the other backend (SQLite ↔ PostgreSQL) with a progress line."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.cli import Output, command
from memory_core.base.errors import ChatmemError
from memory_core.base.wording import counted

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore


@command("migrate", "copy history, audit and journal to the other storage backend")
class Migrate:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--to",
            required=True,
            choices=("postgres", "sqlite"),
            help="the backend to move to: postgres or sqlite (the configured one is the source)",
        )
        parser.add_argument(
            "--dsn",
            default="",
            help="the PostgreSQL database to move to (default: CHATMEM_POSTGRES_DSN);"
            " prefer the environment variable, a command line is visible to other users",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        dsn = args.dsn or os.environ.get("CHATMEM_POSTGRES_DSN", "")
        from memory_core.storage.dialects import dialect_for

        served = dialect_for(args.to).is_server
        if served and not dsn:
            raise ChatmemError("--to postgres needs --dsn or CHATMEM_POSTGRES_DSN")
        started = time.perf_counter()
        show = not args.json and sys.stderr.isatty()
        shown = [""]

        def progress(what: str, done: int, total: int) -> None:
            if not show:
                return
            if shown[0] and shown[0] != what:
                print(file=sys.stderr)
            shown[0] = what
            width = 30
            filled = width * done // max(total, 1)
            bar = "#" * filled + "-" * (width - filled)
            print(f"\r{what:<16} [{bar}] {done}/{total}", end="", file=sys.stderr, flush=True)

        report = await core.move_storage(args.to, dsn if served else "", progress)
        if show and shown[0]:
            print(file=sys.stderr)
        elapsed = time.perf_counter() - started
        copied = sum(report.copied.values())
        data = {
            "to": args.to,
            "copied": report.copied,
            "read": report.read,
            "message_chunks": report.message_chunks,
            "seconds": round(elapsed, 3),
            "kept_aside": [str(path) for path in report.kept_aside],
        }
        switch = (
            "set storage.backend = 'postgres' (and CHATMEM_POSTGRES_DSN)"
            if served
            else "set storage.backend = 'sqlite'"
        )
        Output(args.json).emit(
            data,
            f"copied {counted(copied, 'row')} and {counted(report.message_chunks, 'message chunk')}"
            f" to {args.to}"
            f" in {elapsed:.2f}s; now {switch} and start the bots again"
            + kept_aside_lines(report.kept_aside),
        )
        return 0


def kept_aside_lines(paths: list[Path]) -> str:
    """The stale files a move back to SQLite kept aside: named, with how to delete them
    once the moved workspace works (nothing reads or deletes them)."""
    if not paths:
        return ""
    listed = "".join(f"\n  {path}" for path in paths)
    return (
        f"\nkept aside, from before the workspace moved away (stale; delete them once the"
        f" moved workspace works: rm {' '.join(shlex.quote(str(p)) for p in paths)}):{listed}"
    )
