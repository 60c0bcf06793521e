"""Vectors from the command line: `chatmem vectors`, and what a search makes first.

A one-shot `chatmem search` ranks as a bot would: before it searches, it makes the
scope's missing vectors when that is cheap (at most `embedding.command_backfill_max`
texts for the model; memory_core/storage/vectors/lazy.py), with a progress line on
stderr (a terminal) once that has taken a second (in a read-only workspace it makes none, and says
nothing: the person knows). When it ranks by words alone (no model, provider
'none', too many missing, the model failed) it says so in one line on stderr: why, and
how to have the vectors. Nothing of this goes to stdout, which scripts parse.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from adapters.cli import Output, command
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import ScopeKey, printable_key
from memory_core.base.wording import counted

if TYPE_CHECKING:
    from memory_core.engine import CatchUp, MemoryCore

PROGRESS_AFTER_SECONDS = 1.0
"""Making vectors shows a progress line once it has taken this long (a second or two is
common: a few thousand texts; less goes unsaid)."""
WORDS_ONLY = "chatmem: searched by words only: "


def on_terminal(stream: TextIO) -> bool:
    """Whether a person watches `stream` (a progress line is for them, not for a log or a
    script's pipe, as `chatmem reindex`'s)."""
    return stream.isatty()


class ProgressLine:
    """`chatmem: making vectors 1200/3000` on `stream`, rewritten in place, once `after`
    seconds have passed since it was made; only on a terminal, and not when `shown` is
    False (--json). `end()` finishes a line that was shown."""

    def __init__(
        self,
        stream: TextIO,
        *,
        shown: bool = True,
        after: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._enabled = shown and on_terminal(stream)
        self._after = PROGRESS_AFTER_SECONDS if after is None else after
        self._monotonic = monotonic
        self._started = monotonic()
        self.showing = False

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        if not self.showing and self._monotonic() - self._started < self._after:
            return
        print(f"\rchatmem: making vectors {done}/{total}", end="", file=self._stream, flush=True)
        self.showing = True

    def end(self) -> None:
        if self.showing:
            print(file=self._stream, flush=True)


def vectors_hint(scope: ScopeKey) -> str:
    return "`chatmem vectors" + ("" if scope.is_main else f" --scope {printable_key(scope)}") + "`"


def words_only_reason(core: MemoryCore, scope: ScopeKey, state: CatchUp | None) -> str:
    """Why a search of `scope` ranks by words alone, and how to have vectors; '' when it
    compares meanings too (or the index is unusable: the output says that already)."""
    if core.degraded_reason:
        return ""
    if state is None:
        from memory_core.engine import why_no_embedder

        return why_no_embedder(core.config.embedding)
    if state.done:
        return ""
    if state.failure:
        return f"its vectors could not be made ({state.failure}); {vectors_hint(scope)} tries again"
    most = core.config.embedding.command_backfill_max
    return (
        f"scope {printable_key(scope)} has {counted(state.missing, 'text', grouped=True)} without vectors, "
        f"more than the {most} a search makes first (embedding.command_backfill_max); "
        f"{vectors_hint(scope)} makes them"
    )


async def vectors_for_search(
    core: MemoryCore,
    args: argparse.Namespace,
    *,
    stream: TextIO | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Before a one-shot search: the scope's missing vectors made when cheap, with a
    progress line past a second (not under --json); or the one line saying it ranks by
    words alone."""
    import asyncio

    from adapters.cli.running import read_only_workspace

    if await asyncio.to_thread(read_only_workspace, core.config):
        return  # nothing can be made there, and the person knows it is read-only
    out = sys.stderr if stream is None else stream
    progress = ProgressLine(out, shown=not args.json, monotonic=monotonic)
    try:
        state = await core.finder.make_vectors(
            args.scope_key, most=core.config.embedding.command_backfill_max, progress=progress
        )
    finally:
        progress.end()
    if reason := words_only_reason(core, args.scope_key, state):
        print(WORDS_ONLY + reason, file=out)


@command(
    "vectors",
    "make the scope's missing vectors now (what a bot does in the background; a search "
    "makes a few itself)",
)
class Vectors:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--all-scopes",
            action="store_true",
            help="every scope of the workspace, not only --scope's (after an import)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        from adapters.cli.running import refuse_unknown_scope  # the parser never needs it

        if args.all_scopes:
            scopes = await core.known_scopes()
        else:
            await refuse_unknown_scope(core, args.scope_key)
            scopes = [args.scope_key]
        data: list[dict[str, object]] = []
        lines: list[str] = []
        for scope in scopes:
            started = time.perf_counter()
            made = await _make_all(core, scope, show=not args.json)
            elapsed = time.perf_counter() - started
            where = f"scope {printable_key(scope)}"
            lines.append(
                f"made {counted(made, 'vector', grouped=True)} in {where} in {elapsed:.2f}s"
                if made
                else f"the vectors of {where} are up to date"
            )
            data.append({"scope": scope.value, "made": made, "seconds": round(elapsed, 3)})
        Output(args.json).emit(data if args.all_scopes else data[0], "\n".join(lines))
        return 0


async def _make_all(core: MemoryCore, scope: ScopeKey, *, show: bool) -> int:
    """Every missing vector of `scope`, with a progress line; how many were made. A core
    that cannot make them is a one-line error."""
    from memory_core.engine import why_no_embedder

    progress = ProgressLine(sys.stderr, shown=show)
    try:
        state = await core.finder.make_vectors(scope, most=None, progress=progress)
    finally:
        progress.end()
    if core.degraded_reason:
        raise ChatmemError(f"no vectors made: the index is unusable ({core.degraded_reason})")
    if state is None:
        raise ChatmemError(f"no vectors to make: {why_no_embedder(core.config.embedding)}")
    if state.failure:
        kept = counted(state.made, "vector", grouped=True)
        raise ChatmemError(f"vectors not made: {state.failure} ({kept} made before are kept)")
    return state.made
