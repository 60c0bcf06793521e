"""Subcommands over the long-term store: init, capture, status, stats, consolidate,
validate, scopes, forget, pin/unpin, archive/restore."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import datetime

from adapters.cli import (
    EXIT_PROBLEMS,
    Output,
    category_arg,
    command,
    importance_arg,
    parse_time_arg,
)
from memory_core.clock import format_when
from memory_core.engine import MemoryCore
from memory_core.entries import MemoryEntry
from memory_core.merge import ChangeKind, MergeResult


def entry_json(entry: MemoryEntry) -> dict[str, object]:
    return {
        "id": entry.id,
        "category": entry.category,
        "score": round(entry.score, 6),
        "hits": entry.hits,
        "last_activated": format_when(entry.last_activated),
        "created_at": format_when(entry.created_at),
        "pinned": entry.pinned,
        "archived": entry.archived.value if entry.archived else None,
        "content": entry.content,
    }


def entry_line(rank: int, entry: MemoryEntry) -> str:
    flags = (" [pinned]" if entry.pinned else "") + (
        f" [{entry.archived.value}]" if entry.archived else ""
    )
    content = " ".join(entry.content.split())
    return (
        f"{rank:>3}. [{entry.id}] {entry.category:<11} {entry.score:.2f}  "
        f"{entry.last_activated.date()}  hits {entry.hits}{flags}\n     {content}"
    )


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


@command("init", "create a workspace (idempotent)")
class Init:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        scope = args.scope_key
        relative = await core.init_scope(scope)
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
        parser.add_argument("text", help="what to remember")
        parser.add_argument("--category", type=category_arg, default="fact")
        parser.add_argument("--importance", type=importance_arg, default="medium")
        parser.add_argument("--expires", type=parse_time_arg, help="expiry (todos), ISO-8601")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        entry, result = await core.capture(
            args.scope_key,
            args.text,
            category=args.category,
            importance=args.importance,
            source="cli",
            expires_at=args.expires,
        )
        verb = "reinforced" if result.count(ChangeKind.REINFORCED) else "saved"
        Output(args.json).emit(
            {"action": verb, "entry": entry_json(entry)},
            f"{verb} [{entry.id}] {entry.category} {entry.score:.2f}: {entry.content}",
        )
        return 0


@command("status", "show the scope's memories, best first")
class Status:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--limit", type=int, default=50, help="entries shown per section")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        status = await core.status(args.scope_key)
        data = {
            "scope": status.scope.value,
            "path": status.path,
            "active": [entry_json(e) for e in status.active],
            "archived": [entry_json(e) for e in status.archived],
            "quarantined": len(status.quarantined),
            "daily_files": status.daily_files,
        }
        lines = [
            f"scope {status.scope} ({status.path}): {len(status.active)} active, "
            f"{len(status.archived)} archived, {status.daily_files} daily files"
        ]
        if status.quarantined:
            lines.append(
                f"! {len(status.quarantined)} quarantined block(s): run `chatmem validate`"
            )
        lines.append("Active:")
        lines += [entry_line(i, e) for i, e in enumerate(status.active[: args.limit], 1)] or [
            "  (none)"
        ]
        lines.append("Archived:")
        lines += [entry_line(i, e) for i, e in enumerate(status.archived[: args.limit], 1)] or [
            "  (none)"
        ]
        Output(args.json).emit(data, "\n".join(lines))
        return 0


@command("stats", "counts across every scope of the workspace")
class Stats:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        rows = []
        for scope in await core.scopes():
            status = await core.status(scope)
            categories = Counter(e.category for e in status.active)
            scores = [e.score for e in status.active]
            rows.append(
                {
                    "scope": scope.value,
                    "active": len(status.active),
                    "archived": len(status.archived),
                    "quarantined": len(status.quarantined),
                    "daily_files": status.daily_files,
                    "mean_active_score": round(sum(scores) / len(scores), 3) if scores else None,
                    "categories": dict(categories),
                }
            )
        actions = await core.audit_counts()
        human = [f"workspace {core.workspace.root}"]
        for row in rows:
            human.append(
                f"  {row['scope']}: {row['active']} active, {row['archived']} archived, "
                f"{row['daily_files']} daily files, mean score {row['mean_active_score']}"
            )
        human.append(
            "audit: " + (", ".join(f"{k} {v}" for k, v in sorted(actions.items())) or "empty")
        )
        Output(args.json).emit({"scopes": rows, "audit": actions}, "\n".join(human))
        return 0


@command("consolidate", "decay, archive and forget as of now (or --now)")
class Consolidate:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--now", type=parse_time_arg, help="pretend it is this ISO-8601 time")

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        when: datetime = args.now.replace(microsecond=0) if args.now else core.now()
        result = await core.consolidate(args.scope_key, now=when)
        changes = [
            {
                "kind": c.kind.value,
                "id": c.entry_id,
                "old_score": c.old_score,
                "new_score": c.new_score,
                "content": c.content,
            }
            for c in result.changes
        ]
        lines = [
            f"consolidated scope {args.scope_key} as of {format_when(when)}: {merge_summary(result)}"
        ]
        for c in result.changes:
            if c.kind is not ChangeKind.DECAYED:
                scores = f"{c.old_score or 0:.3f} -> " + (
                    f"{c.new_score:.3f}" if c.new_score is not None else "gone"
                )
                lines.append(f"  {c.kind.value:<8} [{c.entry_id}] {scores}  {c.content}")
        Output(args.json).emit(
            {"now": format_when(when), "stats": result.stats, "changes": changes}, "\n".join(lines)
        )
        return 0


@command("validate", "check every memory file; non-zero exit if blocks are quarantined")
class Validate:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        problems = await core.validate()
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
        if not problems:
            Output(args.json).emit({"ok": True, "problems": []}, "all memory files are valid")
            return 0
        lines = [f"{len(problems)} quarantined block(s); they are kept verbatim, fix and re-run:"]
        for p in problems:
            first = p.block.text.splitlines()[0] if p.block.text else ""
            lines.append(f"  {p.path}:{p.block.line}: {p.block.reason}\n      {first}")
        Output(args.json).emit({"ok": False, "problems": data}, "\n".join(lines))
        return EXIT_PROBLEMS


@command("scopes", "list the workspace's scopes")
class Scopes:
    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        rows = []
        for scope in await core.scopes():
            status = await core.status(scope)
            rows.append(
                {
                    "scope": scope.value,
                    "active": len(status.active),
                    "archived": len(status.archived),
                    "path": status.path,
                }
            )
        human = "\n".join(
            f"{r['scope']:<40} {r['active']:>5} active {r['archived']:>5} archived  {r['path']}"
            for r in rows
        )
        Output(args.json).emit(rows, human)
        return 0


def _entry_action(name: str, verb: str, help_text: str) -> None:
    """forget / pin / unpin / archive / restore share one shape: an id in, an entry out."""

    class EntryAction:
        @staticmethod
        def arguments(parser: argparse.ArgumentParser) -> None:
            parser.add_argument("id", help="entry id, as shown by `chatmem status`")

        @staticmethod
        async def run(core: MemoryCore, args: argparse.Namespace) -> int:
            scope, entry_id = args.scope_key, args.id
            if name == "forget":
                entry = await core.forget(scope, entry_id, source="cli")
            elif name in ("pin", "unpin"):
                entry = await core.set_pinned(scope, entry_id, name == "pin", source="cli")
            elif name == "archive":
                entry = await core.archive(scope, entry_id, source="cli")
            else:
                entry = await core.restore(scope, entry_id, source="cli")
            Output(args.json).emit(
                {"action": name, "entry": entry_json(entry)}, f"{verb} [{entry.id}] {entry.content}"
            )
            return 0

    command(name, help_text)(EntryAction)


_entry_action("forget", "forgot", "delete an entry (the audit log keeps its text)")
_entry_action("pin", "pinned", "pin an entry: it never decays")
_entry_action("unpin", "unpinned", "unpin an entry")
_entry_action("archive", "archived", "move an entry to Archived")
_entry_action("restore", "restored", "move an archived entry back to Active")
