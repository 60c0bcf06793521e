"""`chatmem erase`: everything about one person, for good (memory_core/erasure/)."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING, Any

from adapters.cli import Output, command
from memory_core.base.errors import ChatmemError

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore


@command(
    "erase",
    "erase a person for good: a scope, or every scope of --person and their group lines",
    reads_only=lambda args: args.dry_run,
    scoped=False,
)
class Erase:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--person",
            metavar="CHANNEL:ID",
            help="the person as the platform names them (telegram:42): every direct-chat "
            "scope keyed by them, and their lines in that channel's groups",
        )
        parser.add_argument(
            "--name",
            action="append",
            default=[],
            metavar="NAME",
            help="a name the person speaks under in groups, besides those their own "
            "chats show (repeatable; with --person)",
        )
        parser.add_argument(
            "--by", metavar="WHO", help="who asked, for the audit row (default: the OS user)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="list what would be erased, erase nothing"
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help="erase without asking (needed when not in a terminal)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        person: str | None = args.person
        scope = None if args.scope_key.is_main else args.scope_key
        if person is None and scope is None:
            raise ChatmemError(
                "erase takes --person CHANNEL:ID or --scope KEY (not main, which every direct "
                "chat shares under dm_scope = main); nothing was erased"
            )
        by = args.by or _os_user()
        out = Output(args.json)
        plan = await core.erase(scope=scope, person=person, names=args.name, by=by, dry_run=True)
        listed = plan.as_json()
        if args.dry_run:
            out.emit(listed, _listing(listed, person, "would erase"))
            return 0
        if not args.yes:
            if not _interactive() or args.json:
                raise ChatmemError(
                    "erase needs --yes when not run in a terminal (--dry-run lists what it "
                    "would erase); nothing was erased"
                )
            print(_listing(listed, person, "would erase"))
            import asyncio  # here, not at the top: `--help` never needs it

            answer = await asyncio.to_thread(input, "erase all this for good? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing was erased")
                return 0
        done = await core.erase(scope=scope, person=person, names=args.name, by=by)
        report = done.as_json()
        out.emit(report, _listing(report, person, "erased"))
        if done.wal_kept:
            print(
                "chatmem: another process kept the database's WAL from being emptied: "
                "stop the bots and run `chatmem erase` again to clear it",
                file=sys.stderr,
            )
        return 0


def _interactive() -> bool:
    """Whether a person at a terminal can be asked (not a script, not a pipe)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _listing(report: dict[str, Any], person: str | None, verb: str) -> str:
    who = f" for {person}" if person is not None else ""
    lines = [f"{verb}{who}:"]
    for found in report["scopes"]:
        what = "whole scope" if found["what"] == "scope" else "their lines"
        counts = ", ".join(
            f"{n} {kind.replace('_', ' ')}" for kind, n in found["counts"].items() if n
        )
        lines.append(f"  {found['scope']} ({what}): {counts or 'nothing'}")
    if person is not None:
        lines.append(
            f"  group messages matched by sender id: {report['by_id']}, by name: "
            f"{report['by_name']} (older lines kept no id: check what a name takes)"
        )
        names = ", ".join(report["names"]) if report["names"] else "none known (add --name)"
        lines.append(f"  group lines found by name: {names}")
        if report["shared_names"]:
            lines.append(
                "  names another member also speaks under (no line went by them, only by "
                f"id or by their words): {', '.join(report['shared_names'])}"
            )
    if report["refused"]:
        lines.append(f"  left as they are (refused): {', '.join(report['refused'])}")
    return "\n".join(lines)
