"""Subcommands over recall: search (with `--explain`, each ranking step's part), get,
reindex, append. They read through the core's one search, so what they show is what a
bot recalls."""

from __future__ import annotations

import argparse
import re
import sys
import time
from contextlib import nullcontext
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from adapters.cli import ERROR_PREFIX, EXIT_PROBLEMS, Output, command, positive_int
from memory_core.base.chunks import ChunkKind
from memory_core.base.errors import ChatmemError, PathRefused
from memory_core.base.scope import printable_key
from memory_core.base.wording import counted

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore

KINDS = ", ".join(k.value for k in ChunkKind)
_LINE_SUFFIX = re.compile(r":\d+(?:-\d+)?$")


def kind_arg(value: str) -> ChunkKind:
    try:
        return ChunkKind(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"kind must be one of {KINDS}") from None


@command(
    "search",
    "search the scope's memories, ranked as recall ranks them (words, and vectors when an "
    "embedder is configured: the few missing are made first)",
    reads_only=True,
)
class Search:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("query", help="keywords, Chinese or English (not empty)")
        parser.add_argument(
            "--limit",
            type=positive_int,
            default=10,
            metavar="N",
            help="most hits shown, a positive number (default: 10)",
        )
        parser.add_argument(
            "--kind",
            type=kind_arg,
            action="append",
            help=f"only hits of this kind: {KINDS}; repeat for several (default: all)",
        )
        parser.add_argument(
            "--explain",
            action="store_true",
            help="under each hit, what each ranking step contributed to its score",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        if not args.query.strip():
            raise ChatmemError("search needs some words to look for")
        from adapters.cli.vectors import vectors_for_search  # the parser never needs it
        from memory_core.base.records import explained
        from memory_core.recall.index.steps import explaining
        from memory_core.recall.request import SearchRequest

        await vectors_for_search(core, args)
        with explaining() if args.explain else nullcontext():
            hits = await core.finder.search(
                args.scope_key, SearchRequest(args.query, limit=args.limit, kinds=args.kind)
            )
        data: list[dict[str, object]] = [
            {
                "path": h.path,
                "line_from": h.line_from,
                "line_to": h.line_to,
                "score": round(h.score, 4),
                "kind": h.kind.value,
                "created_at": h.created_at.isoformat() if h.created_at else None,
                "text": h.text,
            }
            for h in hits
        ]
        if args.explain:
            for row, h in zip(data, hits, strict=True):
                row["steps"] = [{"step": c.step, "how": c.how, "value": c.value} for c in h.steps]
        lines = [f"{counted(len(hits), 'hit')} in scope {args.scope_key}"]
        if core.degraded_reason:
            lines.append(f"(degraded: {core.degraded_reason})")
        for h in hits:
            lines.append(
                f"{h.score:7.3f}  {h.location}  [{h.kind.value}]\n         {' '.join(h.text.split())}"
            )
            if args.explain:
                lines.append(f"         steps: {explained(h.steps)}")
        Output(args.json).emit(data, "\n".join(lines))
        return 0


@command("get", "print lines of one of the scope's memory files", reads_only=True)
class Get:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "path",
            help="workspace-relative path as `chatmem search` shows it, optionally with "
            ":LINE, e.g. MEMORY.md:12 or memory/2026-03-01.md",
        )
        parser.add_argument(
            "--from",
            dest="start",
            type=positive_int,
            metavar="LINE",
            help="first line, 1-based (default: the path's :LINE, else 1)",
        )
        parser.add_argument(
            "--lines",
            type=positive_int,
            metavar="N",
            help="how many lines, 1 to 300 (default: 40)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        try:
            read = await core.finder.read(args.scope_key, args.path, args.start, args.lines)
        except PathRefused:
            import asyncio  # here, not at the top: the parser (`--help`) never needs it

            # Refused because it lies outside the scope's files, or because it is nowhere:
            # for a path that names no file at all, say that.
            if await asyncio.to_thread(_names_no_file, core.workspace.root, args.path):
                raise ChatmemError(f"no such file: {args.path}") from None
            raise
        if read.start > max(read.total_lines, 1):
            print(
                f"{ERROR_PREFIX}{read.path} has {counted(read.total_lines, 'line')}; line {read.start}"
                " is past its end",
                file=sys.stderr,
            )
            return EXIT_PROBLEMS
        data = {
            "path": read.path,
            "from": read.start,
            "to": read.end,
            "truncated": read.truncated,
            "text": read.text,
        }
        human = read.text + (f"\n… (more after line {read.end})" if read.truncated else "")
        Output(args.json).emit(data, human)
        return 0


def _names_no_file(root: Path, requested: str) -> bool:
    """True when `requested` (a plain relative path, maybe with :LINE) is no file in the
    workspace (blocking: a stat)."""
    text = _LINE_SUFFIX.sub("", requested.strip().strip("[]"))
    path = PurePosixPath(text)
    if not text or path.is_absolute() or ".." in path.parts or "\\" in text:
        return False
    return not (root / path).exists()


REINDEX_INTERRUPTED = (
    "the index is only partly rebuilt (the files are untouched): run `chatmem reindex` again"
)


@command(
    "rebuild-index",
    "the same as reindex (the name the memory-system skill uses)",
    interrupted=REINDEX_INTERRUPTED,
)
@command("reindex", "rebuild the search index from the files", interrupted=REINDEX_INTERRUPTED)
class Reindex:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        started = time.perf_counter()
        show = not args.json and sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if show:
                width = 30
                filled = width * done // max(total, 1)
                bar = "#" * filled + "-" * (width - filled)
                print(f"\r[{bar}] {done}/{total} files", end="", file=sys.stderr, flush=True)

        try:
            stats = await core.reindex(progress)
        finally:
            if show:
                print(file=sys.stderr)  # end the progress line (also before `interrupted`)
        elapsed = time.perf_counter() - started
        data = {
            "files": stats.files_indexed,
            "chunks": stats.chunks_added,
            "seconds": round(elapsed, 3),
        }
        Output(args.json).emit(
            data,
            f"reindexed {counted(stats.files_indexed, 'file')}, "
            f"{counted(stats.chunks_added, 'chunk')} in {elapsed:.2f}s",
        )
        return 0


@command("append", "append a note to today's daily notes")
class Append:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("text", help="the note (one line or several)")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        scope = args.scope_key
        from adapters.cli.running import is_new_scope  # the parser never needs it

        new_scope = await is_new_scope(core, scope)
        path, line = await core.notes.append(scope, args.text)
        new = f" (new scope {printable_key(scope)})" if new_scope else ""
        Output(args.json).emit(
            {"path": path, "line": line, "new_scope": new_scope}, f"noted at {path}:{line}{new}"
        )
        return 0
