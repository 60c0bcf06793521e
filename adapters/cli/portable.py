"""`chatmem export` and `chatmem import`: memories out of a workspace, and into one.

The work is the core's (memory_core/portable/, through `MemoryCore.export_lines`,
`export_file`, `export_markdown` and `import_from`); this module parses the options and
says what was done.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.cli import Output, command

if TYPE_CHECKING:
    from memory_core.base.scope import ScopeKey
    from memory_core.engine import MemoryCore


def _scopes(args: argparse.Namespace) -> list[ScopeKey]:
    from memory_core.base.scope import ScopeKey

    return [ScopeKey.parse(key) for key in getattr(args, "scopes", [])]


@command(
    "export",
    "write every scope (or those named with --scope, repeatable) as chatmem's export: "
    "long-term and forgotten entries, daily notes, archives and summaries, conversations, "
    "audit and snapshot, no vectors",
    reads_only=True,
    scoped=False,
)
class ExportCommand:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--format",
            choices=("jsonl", "markdown"),
            default="jsonl",
            help="jsonl (default): one JSON record a line, what `chatmem import` reads; "
            "markdown: a folder laid out as a workspace, for people to read",
        )
        parser.add_argument(
            "--output",
            metavar="PATH",
            default="-",
            help="file to write (jsonl; default - for standard output), or a new or empty "
            "folder (markdown)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        from memory_core.base.errors import ChatmemError

        scopes = _scopes(args)
        if args.format == "markdown":
            if args.output == "-":
                raise ChatmemError("--format markdown needs --output FOLDER (nothing was written)")
            out = Path(args.output)
            written = await core.export_markdown(scopes, out)
            Output(args.json).emit(
                {"format": "markdown", "path": str(out), "files": len(written)},
                f"wrote {len(written)} files to {out}",
            )
            return 0
        if args.output == "-":
            records = -1
            async for text in core.export_lines(scopes):
                sys.stdout.write(text + "\n")
                records += 1
            print(f"chatmem: exported {records} records", file=sys.stderr)
            return 0
        out = Path(args.output)
        records = await core.export_file(scopes, out)
        Output(args.json).emit(
            {"format": "jsonl", "path": str(out), "records": records},
            f"wrote {records} records to {out}",
        )
        return 0


@command(
    "import",
    "import chatmem's export, a folder with MEMORY.md and memory/YYYY-MM-DD.md, or a "
    "mem0 export (JSON list with user_id, memory, created_at); importing twice adds nothing",
    scoped=False,
    interrupted="what was imported so far stays; run the import again to finish it",
)
class ImportCommand:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "source",
            metavar="SRC",
            help="an export file, a folder, or a mem0 JSON file. --scope: for an export, "
            "the scopes to take (repeatable; default all); for a folder, the scope it goes "
            "to (default main); for mem0, the scope of a file of one user (default "
            "peer:<user_id> for each user)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        form, report = await core.import_from(Path(args.source), _scopes(args))
        data: dict[str, Any] = {"source": args.source, "form": form, **report.as_json()}
        Output(args.json).emit(data, _summary(form, data))
        return 0


LABELS = {
    "entry": "long-term entries",
    "forgotten": "forgotten entries",
    "note": "daily notes",
    "archive": "archive files",
    "summary": "summaries",
    "session": "sessions",
    "message": "messages",
    "audit": "audit rows",
}


def _summary(form: str, data: dict[str, Any]) -> str:
    kinds = [k for k in LABELS if k in data["added"] or k in data["present"]]
    lines = [f"imported {form} {data['source']} into {len(data['scopes'])} scope(s)"]
    lines += [
        f"  {LABELS[k]}: {data['added'].get(k, 0)} added, {data['present'].get(k, 0)} present"
        for k in kinds
    ]
    held = data["present"].get("quarantined", 0)
    lines.append(f"  quarantined blocks: {data['quarantined']} added, {held} present")
    if data["expired"]:
        lines.append(f"  expired: {data['expired']} forgotten entries past their keep days")
    if data["refused"]:
        lines.append(f"  refused: {data['refused']} records that belong to another scope")
    return "\n".join(lines)
