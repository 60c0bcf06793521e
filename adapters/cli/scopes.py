"""Subcommands over the workspace's scopes: validate (memory files and look-alike
scopes), scopes (the list, and `--merge A B`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from adapters.cli import EXIT_PROBLEMS, Output, command
from adapters.cli.paging import add_paging
from memory_core.base.errors import ChatmemError, ScopeError
from memory_core.base.scope import ScopeKey, lookalike_groups, printable_key, today_key
from memory_core.base.wording import counted

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore


def merge_hints(group: list[ScopeKey]) -> list[str]:
    """The commands that fold a look-alike group into the key every path uses now
    (`today_key`, made by the merge when no stored scope has it): one per other
    spelling, since `--merge` takes one FROM and one INTO."""
    target = today_key(group[0]) or min(group, key=lambda k: k.value)
    return [
        f"chatmem scopes --merge '{printable_key(k)}' '{printable_key(target)}'"
        for k in group
        if k != target
    ]


@command(
    "validate",
    "check every memory file and the scopes' keys; non-zero exit if blocks are "
    "quarantined or scopes look alike",
    reads_only=True,
    scoped=False,
)
class Validate:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        problems = await core.memories.validate()
        groups = lookalike_groups(await core.known_scopes())
        data = [
            {
                "scope": p.scope.value,
                "path": p.path,
                "line": p.block.line,
                "reason": p.block.reason,
                "text": p.block.text,
            }
            for p in problems
        ]
        lookalikes = [[k.value for k in group] for group in groups]
        if not problems and not groups:
            Output(args.json).emit(
                {"ok": True, "problems": [], "lookalike_scopes": []}, "all memory files are valid"
            )
            return 0
        lines = []
        if problems:
            lines.append(
                f"{counted(len(problems), 'quarantined block')}; they are kept verbatim, fix "
                "and re-run:"
            )
        for p in problems:
            first = p.block.text.splitlines()[0] if p.block.text else ""
            lines.append(f"  {p.path}:{p.block.line}: {p.block.reason}\n      {first}")
        if groups:
            lines.append(
                f"{counted(len(groups), 'group')} of scopes that are one key now (written "
                "before keys were normalised); merge each into one:"
            )
        for group in groups:
            shown = ", ".join(printable_key(k) for k in group)
            hints = "".join(f"\n      {hint}" for hint in merge_hints(group))
            lines.append(f"  {shown}{hints}")
        Output(args.json).emit(
            {"ok": False, "problems": data, "lookalike_scopes": lookalikes}, "\n".join(lines)
        )
        return EXIT_PROBLEMS


def _listing_only(args: argparse.Namespace) -> bool:
    return args.merge is None


def stored_scope(known: list[ScopeKey], text: str) -> ScopeKey:
    """A scope of the workspace as typed or as shown (`printable_key`: an older key's
    invisible characters escaped), or as it would be made today; one line if none."""
    for key in known:
        if text in (key.value, printable_key(key)):
            return key
    try:
        parsed = ScopeKey.parse(text)
    except ScopeError:
        parsed = None
    if parsed is not None and parsed in known:
        return parsed
    raise ChatmemError(f"no scope {text!r} in this workspace (`chatmem scopes` lists them)")


def merge_target(known: list[ScopeKey], source: ScopeKey, text: str) -> ScopeKey:
    """INTO as typed, normalised as every key a person types (`ScopeKey.parse`: an old
    spelling is never merged into): a scope of the workspace, or FROM's key as made
    today, which the merge makes; one line otherwise."""
    target = ScopeKey.parse(text)
    if target in known or target == today_key(source):
        return target
    raise ChatmemError(f"no scope {text!r} in this workspace (`chatmem scopes` lists them)")


@command(
    "scopes",
    "list the workspace's scopes, or merge one into another (--merge FROM INTO)",
    reads_only=_listing_only,
    scoped=False,
)
class Scopes:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--merge",
            nargs=2,
            metavar=("FROM", "INTO"),
            help="move everything scope FROM holds (memories, notes, history, index, "
            "audit) into scope INTO, which must exist unless it is FROM's key as made "
            "today (then it is made); FROM's directory is kept under .chatmem/merged/. "
            "Stop the bots first",
        )
        add_paging(parser)

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        if args.merge is not None:
            return await _merge(core, args)
        listing = await core.scope_listing(args.offset, args.limit)
        scopes = listing.scopes
        rows = [
            {
                "scope": row.scope.value,
                "active": row.figures.active,
                "archived": row.figures.archived,
                "path": row.path,
            }
            for row in listing.page
        ]
        human = "\n".join(
            f"{printable_key(str(r['scope'])):<40} {r['active']:>5} active "
            f"{r['archived']:>5} archived  {r['path']}"
            for r in rows
        )
        Output(args.json).emit(rows, human)
        groups = lookalike_groups(scopes)
        if groups and not args.json:
            print(
                f"note: {counted(len(groups), 'group')} of these scopes look alike "
                "(`chatmem validate` shows how to merge them)",
                file=sys.stderr,
            )
        return 0


async def _merge(core: MemoryCore, args: argparse.Namespace) -> int:
    known = await core.known_scopes()
    source = stored_scope(known, args.merge[0])
    target = merge_target(known, source, args.merge[1])
    report = await core.merge_scopes(source, target)
    rows = sum(report.rows.values())
    files = report.files
    renamed = f" ({len(report.renamed)} with a new id)" if report.renamed else ""
    human = (
        f"merged scope {printable_key(source)} into {printable_key(target)}: "
        f"{counted(report.entries, 'entry')}{renamed}, "
        f"{counted(report.forgotten, 'forgotten entry')}, "
        f"{counted(rows, 'database row')}, {counted(report.message_chunks, 'message chunk')}, "
        f"{counted(len(files.moved) + len(files.renamed), 'file')} moved and "
        f"{len(files.appended)} appended"
    )
    if report.set_aside:
        human += f"; the rest of its directory is kept in {report.set_aside}"
    if report.unreadable:
        human += (
            f" ({counted(report.unreadable, 'unreadable block')} of its long-term file kept "
            "there, not merged: mend and capture by hand)"
        )
    Output(args.json).emit(report.as_json(), human)
    return 0
