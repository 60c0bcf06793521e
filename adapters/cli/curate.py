"""Subcommands that act on entries by id: forget, pin/unpin, archive/restore, purge."""

from __future__ import annotations

import argparse
import shlex
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from adapters.cli import Output, command, days_arg
from adapters.cli.commands import entry_json
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import ChatmemError, EntryNotFound
from memory_core.base.wording import counted
from memory_core.longterm.scoring import Status, score_at, status_of

if TYPE_CHECKING:
    from memory_core.base.scope import ScopeKey
    from memory_core.engine import MemoryCore

MENTIONS_SHOWN = 5


ID_HELP = "entry id as `chatmem status` shows it, or a prefix of it that names one entry"


def _already(name: str, entry: MemoryEntry | None, core: MemoryCore) -> str | None:
    """What to say when the action would change nothing (`entry` None: not a live entry,
    so a kept forgotten one); None when it would."""
    if entry is None:
        return "already forgotten" if name == "forget" else None
    if name == "pin" and entry.pinned:
        return "already pinned"
    if name == "unpin" and not entry.pinned:
        return "not pinned"
    if name == "archive" and entry.archived is not None:
        return "already archived"
    if name == "restore":
        now = core.now()
        current = entry.with_(score=score_at(entry, now, core.policy), scored_at=now)
        if status_of(current, core.policy) is Status.ACTIVE:
            return "already active"
    return None


def _entry_action(name: str, verb: str, help_text: str, *, register: bool = True) -> Any:
    """forget / pin / unpin / archive / restore share one shape: an id in, an entry out.
    The class, registered unless `register` is False (`restore` of an entry is one form
    of `chatmem restore`: adapters/cli/backup.py)."""

    class EntryAction:
        @staticmethod
        def arguments(parser: argparse.ArgumentParser) -> None:
            parser.add_argument("id", help=ID_HELP)

        @staticmethod
        async def run(core: MemoryCore, args: argparse.Namespace) -> int:
            scope = args.scope_key
            entry_id = await match_entry(core, name, scope, args.id)
            live = {e.id: e for e in await core.memories.entries(scope)}
            if entry_id not in live and name not in ("forget", "restore"):
                raise ChatmemError(
                    f"entry {entry_id!r} of scope {scope} is forgotten: bring it back first"
                    f" (chatmem restore {entry_id})"
                )
            already = _already(name, live.get(entry_id), core)
            if already is not None:
                entry = live.get(entry_id) or next(
                    e for e in await core.memories.restorable(scope) if e.id == entry_id
                )
                Output(args.json).emit(
                    {"action": name, "already": True, "entry": entry_json(entry)},
                    f"{already} [{entry.id}] {entry.content}",
                )
                return 0
            if name == "forget":
                entry = await core.memories.forget(scope, entry_id, source="cli")
            elif name in ("pin", "unpin"):
                entry = await core.memories.set_pinned(scope, entry_id, name == "pin", source="cli")
            elif name == "archive":
                entry = await core.memories.archive(scope, entry_id, source="cli")
            else:
                entry = await core.memories.restore(scope, entry_id, source="cli")
            human = f"{verb} [{entry.id}] {entry.content}"
            keep_days = core.config.long_term.forgotten_keep_days
            if name == "forget" and keep_days:
                human += f"\n(restorable for {keep_days} days: chatmem restore {entry.id})"
            Output(args.json).emit(
                {"action": name, "already": False, "entry": entry_json(entry)}, human
            )
            return 0

    if register:
        command(name, help_text)(EntryAction)
    return EntryAction


_entry_action(
    "forget",
    "forgot",
    "delete an entry; restorable for long_term.forgotten_keep_days (see purge)",
)
_entry_action("pin", "pinned", "pin an entry: it never decays")
_entry_action("unpin", "unpinned", "unpin an entry")
_entry_action("archive", "archived", "move an entry to Archived")
RestoreEntry = _entry_action(
    "restore", "restored", "move an archived or forgotten entry back to Active", register=False
)


@command(
    "purge",
    "erase forgotten entries for good, their text in the audit log included",
    reads_only=lambda args: args.id is None and not args.yes,
)
class Purge:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "id",
            nargs="?",
            help="id (or unique prefix) of a forgotten entry; a live entry must be forgotten first",
        )
        parser.add_argument(
            "--older-than",
            type=days_arg,
            metavar="DAYS",
            help="every forgotten entry forgotten more than DAYS days ago (needs --yes)",
        )
        parser.add_argument(
            "--all", action="store_true", help="every forgotten entry of the scope (needs --yes)"
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help="confirm --older-than or --all; without it they only list what would be erased",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        scope = args.scope_key
        chosen_ways = [args.id is not None, args.older_than is not None, args.all]
        if sum(chosen_ways) != 1:
            raise ChatmemError("purge takes one of: an ID, --older-than DAYS or --all")
        out = Output(args.json)
        if args.id is not None:
            ids = [await match_entry(core, "purge", scope, args.id)]
        else:
            kept = await core.memories.restorable(scope)
            if args.older_than is not None:
                cutoff = core.now() - timedelta(days=args.older_than)
                kept = [e for e in kept if e.scored_at <= cutoff]
            if not kept:
                older = (
                    f" forgotten more than {counted(args.older_than, 'day')} ago"
                    if args.older_than is not None
                    else ""
                )
                out.emit(
                    {"purged": []} if args.yes else {"purged": [], "would_purge": []},
                    f"nothing to erase: scope {scope} has no forgotten entries{older}",
                )
                return 0
            if not args.yes:
                lines = [
                    f"would erase {counted(len(kept), 'forgotten entry')}"
                    f" of scope {scope} for good:"
                ]
                lines += [_purge_line(e) for e in kept]
                lines.append("nothing was erased: add --yes to erase them")
                out.emit(
                    {"purged": [], "would_purge": [entry_json(e) for e in kept]},
                    "\n".join(lines),
                )
                return 0
            ids = [e.id for e in kept]
        purged = await core.purge(scope, ids, source="cli") if ids else []
        lines = [f"erased {counted(len(purged), 'forgotten entry')} of scope {scope}"]
        lines += [_purge_line(e) for e in purged]
        out.emit({"purged": [e.id for e in purged]}, "\n".join(lines))
        return 0


def _purge_line(entry: MemoryEntry) -> str:
    content = " ".join(entry.content.split())
    short = content if len(content) <= 60 else content[:59] + "…"
    return f"  [{entry.id}] forgotten {entry.scored_at.date()}  {short}"


async def match_entry(core: MemoryCore, name: str, scope: ScopeKey, text: str) -> str:
    """The id `text` names (`match_id`). Text that names no entry is most often words
    (`chatmem forget Mochi`): the error says the command takes ids, how to find them,
    and which entries mention the words, with their ids."""
    try:
        return await core.memories.match_id(scope, text)
    except EntryNotFound:
        entries = [*await core.memories.entries(scope), *await core.memories.restorable(scope)]
        wanted = text.strip()
        if wanted and any(e.id.startswith(wanted) for e in entries):
            raise  # an ambiguous prefix: its error lists the candidates
        raise EntryNotFound(_not_an_id(name, scope, wanted, entries)) from None


def _not_an_id(name: str, scope: ScopeKey, text: str, entries: list[MemoryEntry]) -> str:
    words = text.casefold()
    mention = [e for e in entries if words and words in e.content.casefold()]
    said = f"no entry {text!r} in scope {scope}: `{name}` takes entry ids (`chatmem search"
    said += f" {shlex.quote(text or 'WORDS')}` finds entries by their words, `chatmem status`"
    said += " lists the ids)"
    if mention:
        shown = "; ".join(f"[{e.id}] {_short(e.content)}" for e in mention[:MENTIONS_SHOWN])
        more = f" and {len(mention) - MENTIONS_SHOWN} more" if len(mention) > MENTIONS_SHOWN else ""
        said += f"; entries that mention it: {shown}{more}"
    return said


def _short(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= 60 else flat[:59] + "…"
