"""Subcommands over the long-term store: init, capture, status, stats, consolidate,
(validate and scopes: scopes.py; the entry actions and purge: curate.py)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from adapters.cli import (
    TIME_ARG_RANGE,
    Output,
    category_arg,
    command,
    importance_arg,
    parse_time_arg,
    positive_int,
)
from adapters.cli.paging import add_paging
from memory_core.base.clock import format_when
from memory_core.base.entries import CATEGORIES, MemoryClass, MemoryEntry, class_of, confidence_of
from memory_core.base.errors import ChatmemError
from memory_core.base.merge_values import ChangeKind, MergeResult
from memory_core.base.scope import printable_key
from memory_core.base.wording import counted
from memory_core.consolidation.phase_names import PHASES, Phase
from memory_core.longterm.claims import shown

if TYPE_CHECKING:
    from memory_core.consolidation.phases import PhaseReport
    from memory_core.engine import MemoryCore


def entry_json(entry: MemoryEntry) -> dict[str, object]:
    said = {"speaker": entry.speaker, "claim_on": entry.claim_on} if entry.speaker else {}
    return {
        "id": entry.id,
        "category": entry.category,
        "memory_class": class_of(entry).value,
        "confidence": confidence_of(entry),
        "score": round(entry.score, 6),
        "hits": entry.hits,
        "last_activated": format_when(entry.last_activated),
        "created_at": format_when(entry.created_at),
        "pinned": entry.pinned,
        "archived": entry.archived.value if entry.archived else None,
        "content": entry.content,
        **said,
    }


def entry_line(rank: int, entry: MemoryEntry) -> str:
    flags = (" [pinned]" if entry.pinned else "") + (
        f" [{entry.archived.value}]" if entry.archived else ""
    )
    content = " ".join(shown(entry).split())
    return (
        f"{rank:>3}. [{entry.id}] {entry.category:<11} {entry.score:.2f}  "
        f"{entry.last_activated.date()}  hits {entry.hits}{flags}\n     {content}"
    )


def stored_scores(result: MergeResult) -> dict[str, float | None]:
    """Each decayed entry's score as the file held it before this consolidation.

    A merge records an archive or forget after the decay, with the decayed score as its
    old score (the audit log's step by step); a person reading what a consolidation does
    wants the score the entry had, which is the old score of its decay."""
    return {c.entry_id: c.old_score for c in result.changes if c.kind is ChangeKind.DECAYED}


DECAYED_SHOWN = 20
"""Entries that only decayed, listed one a line before `… and N more` (--json has all)."""


def change_lines(result: MergeResult, stored: dict[str, float | None]) -> list[str]:
    """A line per entry the merge changed, so that every count of the summary has its
    entries: an archive or forget from the score the entry had, then those that only
    decayed (a decayed entry that is also archived or forgotten is on that line)."""
    lines: list[str] = []
    moved = {c.entry_id for c in result.changes if c.kind is not ChangeKind.DECAYED}
    decayed = [
        c for c in result.changes if c.kind is ChangeKind.DECAYED and c.entry_id not in moved
    ]
    for c in result.changes:
        if c.kind is not ChangeKind.DECAYED:
            before = stored.get(c.entry_id, c.old_score)
            scores = f"{before or 0:.3f} -> " + (
                f"{c.new_score:.3f}" if c.new_score is not None else "forgotten"
            )
            lines.append(f"  {c.kind.value:<8} [{c.entry_id}] {scores}  {c.content}")
    for c in decayed[:DECAYED_SHOWN]:
        scores = f"{c.old_score or 0:.3f} -> {c.new_score or 0:.3f}"
        lines.append(f"  {c.kind.value:<8} [{c.entry_id}] {scores}  {c.content}")
    if len(decayed) > DECAYED_SHOWN:
        lines.append(f"  … and {len(decayed) - DECAYED_SHOWN} more decayed (--json lists all)")
    return lines


def merge_summary(result: MergeResult) -> str:
    names = {
        ChangeKind.ADDED: "new",
        ChangeKind.REINFORCED: "reinforced",
        ChangeKind.CONTRADICTED: "contradicted",
        ChangeKind.DECAYED: "decayed",
        ChangeKind.ARCHIVED: "archived",
        ChangeKind.RESTORED: "restored",
        ChangeKind.FORGOTTEN: "forgotten",
    }
    parts = [f"{result.count(kind)} {name}" for kind, name in names.items() if result.count(kind)]
    return ", ".join(parts) or "no changes"


@command("init", "create a workspace (idempotent)", creates=True)
class Init:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        scope = args.scope_key
        relative = core.workspace.relative(await core.memories.touch(scope))
        root = core.workspace.root
        Output(args.json).emit(
            {"workspace": str(root), "scope": scope.value, "path": str(root / relative)},
            f"workspace ready at {root}\nlong-term memory of scope {scope}: {relative}",
        )
        return 0


@command("capture", "save one long-term memory now")
class Capture:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "text",
            help="what to remember, or - to read it from stdin (at most "
            "long_term.max_capture_bytes, 4 MiB by default)",
        )
        parser.add_argument(
            "--category",
            type=category_arg,
            default="fact",
            help=f"one of: {', '.join(CATEGORIES)} (default: fact)",
        )
        parser.add_argument(
            "--importance",
            type=importance_arg,
            default="medium",
            help="high, medium or low: a starting score of 0.8, 0.6 or 0.4 (default: medium)",
        )
        parser.add_argument(
            "--expires",
            type=parse_time_arg,
            metavar="WHEN",
            help="when a todo expires: an ISO-8601 date or time, e.g. 2026-06-01 "
            f"({TIME_ARG_RANGE})",
        )
        parser.add_argument(
            "--class",
            dest="memory_class",
            choices=[kind.value for kind in MemoryClass],
            help="how it fades: fact (~87-day half-life), belief (~10), summary (~28) or "
            "event (~5); default: its category's (fact)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        text = args.text
        if text == "-":
            import asyncio  # here, not at the top: the parser (`--help`) never needs it

            text = await asyncio.to_thread(_read_stdin, core.config.long_term.max_capture_bytes)
        scope = args.scope_key
        from adapters.cli.running import is_new_scope  # the parser never needs it

        new_scope = await is_new_scope(core, scope)
        entry, result = await core.memories.capture(
            scope,
            text,
            category=args.category,
            importance=args.importance,
            source="cli",
            expires_at=args.expires,
            memory_class=MemoryClass(args.memory_class) if args.memory_class else None,
        )
        outcome = result.outcome
        assert outcome is not None  # capture raises when nothing was kept
        # Outside main the scope is named, and a new one said so: `--scope mian` shows.
        where = "" if scope.is_main else f" in scope {printable_key(scope)}"
        where += " (new scope)" if new_scope else ""
        Output(args.json).emit(
            {**outcome.as_json(), "scope": scope.value, "new_scope": new_scope}
            | {"entry": entry_json(entry)},
            f"{outcome.describe()}{where}{':' if where else ''} {entry.category} "
            f"{entry.score:.2f}: {entry.content}",
        )
        return 0


def _read_stdin(limit: int) -> str:
    """stdin as the text of one memory (blocking: run in a thread): at most `limit` bytes
    are read, so a huge input is refused without being held whole."""
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise ChatmemError(
            f"the text on stdin is over the limit of {limit} bytes (long_term.max_capture_bytes)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ChatmemError(f"the text on stdin is not UTF-8 (byte {exc.start})") from None


def forgotten_json(entry: MemoryEntry, keep_days: int) -> dict[str, object]:
    return {
        **entry_json(entry),
        "forgotten_at": format_when(entry.scored_at),
        "kept_until": format_when(entry.scored_at + timedelta(days=keep_days)),
    }


@command("status", "show the scope's memories, best first", reads_only=True)
class ScopeStatusCommand:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--limit",
            type=positive_int,
            default=50,
            metavar="N",
            help="entries shown per section, a positive number (default: 50)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        status = await core.memories.status(args.scope_key)
        forgotten = await core.memories.restorable(args.scope_key)
        keep_days = core.config.long_term.forgotten_keep_days
        data = {
            "scope": status.scope.value,
            "path": status.path,
            "active": [entry_json(e) for e in status.active],
            "archived": [entry_json(e) for e in status.archived],
            "forgotten": [forgotten_json(e, keep_days) for e in forgotten],
            "quarantined": len(status.quarantined),
            "daily_files": status.daily_files,
        }
        lines = [
            f"scope {status.scope} ({status.path}): {len(status.active)} active, "
            f"{len(status.archived)} archived, {counted(status.daily_files, 'daily file')}"
        ]
        if status.quarantined:
            lines.append(
                f"! {counted(len(status.quarantined), 'quarantined block')}: run `chatmem validate`"
            )
        lines.append("Active:")
        lines += [entry_line(i, e) for i, e in enumerate(status.active[: args.limit], 1)] or [
            "  (none)"
        ]
        lines.append("Archived:")
        lines += [entry_line(i, e) for i, e in enumerate(status.archived[: args.limit], 1)] or [
            "  (none)"
        ]
        if forgotten:
            lines.append(
                f"Forgotten (kept {keep_days} days; `chatmem restore ID` brings one back):"
            )
            lines += [
                f"{i:>3}. [{e.id}] {e.category:<11} forgotten {e.scored_at.date()}, kept until "
                f"{(e.scored_at + timedelta(days=keep_days)).date()}\n     "
                + " ".join(e.content.split())
                for i, e in enumerate(forgotten[: args.limit], 1)
            ]
        Output(args.json).emit(data, "\n".join(lines))
        return 0


@command("stats", "counts across every scope of the workspace", reads_only=True, scoped=False)
class Stats:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        add_paging(parser)

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        rows = []
        human = [f"workspace {core.workspace.root}"]
        listing = await core.scope_listing(args.offset, args.limit)
        for row in listing.page:
            scope, figures = row.scope, row.figures
            mean = figures.mean_active_score
            rows.append(
                {
                    "scope": scope.value,
                    "active": figures.active,
                    "archived": figures.archived,
                    "quarantined": figures.quarantined,
                    "daily_files": figures.daily_files,
                    "mean_active_score": mean,
                    "categories": figures.categories,
                }
            )
            human.append(
                f"  {printable_key(scope)}: {figures.active} active, "
                f"{figures.archived} archived, {counted(figures.daily_files, 'daily file')}"
                + (f", mean score {mean}" if mean is not None else "")
            )
        actions = await core.audit.action_counts()
        human.append(
            "audit: " + (", ".join(f"{k} {v}" for k, v in sorted(actions.items())) or "empty")
        )
        Output(args.json).emit({"scopes": rows, "audit": actions}, "\n".join(human))
        return 0


@command(
    "consolidate",
    "run the consolidation phases (decay, filter, extract, verify, summarize, snapshot) "
    "as of now; a future --now only previews the decay unless --apply",
    reads_only=lambda args: args.dry_run,
)
class Consolidate:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--phase",
            action="append",
            choices=[phase.value for phase in PHASES],
            metavar="NAME",
            help="run only this phase (repeatable; they run in their fixed order): "
            + ", ".join(phase.value for phase in PHASES),
        )
        parser.add_argument(
            "--now",
            type=parse_time_arg,
            metavar="WHEN",
            help="as of this ISO-8601 date or time instead of now; a time in the future "
            f"previews what would happen and writes nothing unless --apply ({TIME_ARG_RANGE})",
        )
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--dry-run",
            action="store_true",
            help="show what would decay, archive and forget; write nothing",
        )
        mode.add_argument(
            "--apply",
            action="store_true",
            help="write the result of a future --now too (forgotten entries stay "
            "restorable for long_term.forgotten_keep_days days)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        real_now = core.now()
        when: datetime = args.now.replace(microsecond=0) if args.now else real_now
        future = when > real_now
        preview = args.dry_run or (future and not args.apply)
        phases = [Phase(name) for name in args.phase] if args.phase else list(PHASES)
        if preview and phases != [Phase.DECAY] and args.phase:
            raise ChatmemError(
                "only the decay phase can be previewed (--dry-run, or a future --now "
                "without --apply)"
            )
        reports: list[PhaseReport] = []
        if preview:
            result = await core.memories.preview_consolidate(args.scope_key, now=when)
        elif Phase.DECAY in phases:
            result = await core.memories.consolidate(args.scope_key, now=when)
        else:
            result = MergeResult(entries=[])
        if not preview:
            later = [phase for phase in phases if phase is not Phase.DECAY]
            if later:
                reports = await core.consolidation.run(args.scope_key, later, now=when)
        stored = stored_scores(result)
        changes = [
            {
                "kind": c.kind.value,
                "id": c.entry_id,
                "old_score": stored.get(c.entry_id, c.old_score)
                if c.kind is not ChangeKind.DECAYED
                else c.old_score,
                "new_score": c.new_score,
                "content": c.content,
            }
            for c in result.changes
        ]
        what = "preview of consolidating" if preview else "consolidated"
        lines = [
            f"{what} scope {args.scope_key} as of {format_when(when)}: {merge_summary(result)}"
        ]
        lines.extend(change_lines(result, stored))
        keep_days = core.config.long_term.forgotten_keep_days
        if preview:
            hint = "; add --apply to write it" if future and not args.dry_run else ""
            lines.append(f"nothing was written{hint}")
        elif result.count(ChangeKind.FORGOTTEN) and keep_days:
            lines.append(
                f"forgotten entries can be brought back for {keep_days} days: chatmem restore ID"
            )
        lines.extend(f"  {r.phase.value:<9} {r.detail}" for r in reports)
        if preview and not args.phase:
            lines.append("the other phases run only when applied")
        Output(args.json).emit(
            {
                "now": format_when(when),
                "applied": not preview,
                "stats": result.stats,
                "changes": changes,
                "phases": [
                    {"phase": r.phase.value, "changes": r.changes, "detail": r.detail}
                    for r in reports
                ],
            },
            "\n".join(lines),
        )
        return 0
