"""Subcommands over recall: search, get, reindex, append."""

from __future__ import annotations

import argparse
import sys
import time

from adapters.cli import Output, command
from memory_core.chunking import ChunkKind
from memory_core.engine import MemoryCore


def kind_arg(value: str) -> ChunkKind:
    try:
        return ChunkKind(value)
    except ValueError:
        kinds = ", ".join(k.value for k in ChunkKind)
        raise argparse.ArgumentTypeError(f"kind must be one of {kinds}") from None


@command("search", "BM25 search of the scope's memories")
class Search:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("query", help="keywords, Chinese or English")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--kind", type=kind_arg, action="append", help="only this kind")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        hits = await core.search(args.scope_key, args.query, limit=args.limit, kinds=args.kind)
        data = [
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
        lines = [f"{len(hits)} hit(s) in scope {args.scope_key}"]
        if core.degraded_reason:
            lines.append(f"(degraded: {core.degraded_reason})")
        for h in hits:
            lines.append(
                f"{h.score:7.3f}  {h.location}  [{h.kind.value}]\n         {' '.join(h.text.split())}"
            )
        Output(args.json).emit(data, "\n".join(lines))
        return 0


@command("get", "print lines of one of the scope's memory files")
class Get:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", help="workspace-relative path, or path:line")
        parser.add_argument("--from", dest="start", type=int, help="first line (1-based)")
        parser.add_argument("--lines", type=int, help="how many lines (default 40, max 300)")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        read = await core.read_memory(args.scope_key, args.path, args.start, args.lines)
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


@command("reindex", "rebuild the search index from the files")
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

        stats = await core.reindex(progress)
        if show:
            print(file=sys.stderr)
        elapsed = time.perf_counter() - started
        data = {
            "files": stats.files_indexed,
            "chunks": stats.chunks_added,
            "seconds": round(elapsed, 3),
        }
        Output(args.json).emit(
            data,
            f"reindexed {stats.files_indexed} files, {stats.chunks_added} chunks in {elapsed:.2f}s",
        )
        return 0


@command("append", "append a note to today's daily notes")
class Append:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("text", help="the note")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        path, line = await core.append_daily(args.scope_key, args.text)
        Output(args.json).emit({"path": path, "line": line}, f"noted at {path}:{line}")
        return 0
