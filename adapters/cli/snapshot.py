"""`chatmem snapshot`: build a scope's Layer 1 snapshot (SNAPSHOT.md) now."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from adapters.cli import Output, command

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore


@command(
    "snapshot",
    "build the scope's Layer 1 snapshot (SNAPSHOT.md) and show its sections",
    reads_only=lambda args: args.dry_run,
)
class SnapshotCommand:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="show what a rebuild would write, without writing it",
        )
        parser.add_argument("--show", action="store_true", help="print the snapshot itself")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        # Here, not at the top: the parser (`--help`) never needs the builder.
        from memory_core.snapshot.builder import SECTION_ORDER

        build = core.snapshots.build if args.dry_run else core.snapshots.rebuild
        snapshot = await build(args.scope_key)
        path = core.workspace.relative(core.snapshots.path(args.scope_key))
        sections = [snapshot.section(title) for title in SECTION_ORDER]
        data = {
            "scope": args.scope_key.value,
            "path": path,
            "written": not args.dry_run,
            "tokens": snapshot.tokens,
            "budget": snapshot.budget,
            "sections": [
                {"title": s.title, "tokens": s.tokens, "limit": s.limit, "text": s.text}
                for s in sections
            ],
        }
        verb = "would write" if args.dry_run else "wrote"
        lines = [f"{verb} {path}: {snapshot.tokens} of {snapshot.budget} tokens"]
        lines += [f"  {s.title:<14} {s.tokens:>5} / {s.limit} tokens" for s in sections]
        if args.show:
            lines += ["", snapshot.render().rstrip()]
        Output(args.json).emit(data, "\n".join(lines))
        return 0
