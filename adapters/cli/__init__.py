"""The `chatmem` command line: one parser, one handler per subcommand.

User errors (bad arguments, bad config, unknown ids, a missing workspace) print one line
and exit 2 (with --json, that line is a JSON object); only bugs show a traceback.

Only `init`, the bots (`chat`, `telegram`, `dingtalk`) and `demo` create a workspace; every
other command on a missing one says so and exits 2. A command says on stderr which
workspace it uses when the command line did not name it.

`chatmem --help` must answer at once, so this module and the subcommand modules import
at the top only what the parser needs: running a command is `running.py` (asyncio, the
config, the engine), imported once the arguments are parsed, and a
subcommand's `run` imports what only it uses (Textual, the snapshot builder, asyncio's
threads) (bench/cli_bench.py measures; a test checks what `--help` imports).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from memory_core.base.clock import parse_when
from memory_core.base.entries import CATEGORIES, Importance
from memory_core.base.errors import ChatmemError

if TYPE_CHECKING:
    from memory_core.config import Config
    from memory_core.engine import MemoryCore

EXIT_USER_ERROR = 2
EXIT_PROBLEMS = 1
EXIT_INTERRUPTED = 130
KNOWN_SHOWN = 10
ERROR_PREFIX = "chatmem: error: "

Handler = Callable[["MemoryCore", argparse.Namespace], Coroutine[Any, Any, int]]
ConfigHandler = Callable[["Config", argparse.Namespace], Coroutine[Any, Any, int]]
OWN_CORE: set[str] = set()
"""Subcommands whose `run` takes the config and opens (or not) a core of its own."""
OWN_CONFIG: set[str] = set()
"""Subcommands whose `run(None, args)` loads the config itself (doctor: a bad config is
one of its findings, not a refusal)."""
CREATES: set[str] = set()
"""Subcommands that create the workspace when it does not exist (the others refuse)."""
READS_ONLY: dict[str, Callable[[argparse.Namespace], bool]] = {}
"""Subcommands that, with the arguments given, change nothing in the workspace: they run
in a read-only workspace (the others are refused before they start)."""
SERVES: set[str] = set()
"""Subcommands that serve until stopped (bots, the TUI, MCP): their core is a serving
one; every other command's is a command's (`MemoryCore.open(serving=False)`)."""
UNSCOPED: set[str] = set()
"""Subcommands that read every scope, not the --scope one (no check that it exists)."""
OWN_SCOPES: dict[str, str] = {}
"""Subcommands that make their scope from what they are told (chat: `--as`, `--group`),
and what they take instead of `--scope`: a `--scope` other than main is refused."""
INTERRUPTED: dict[str, str] = {}
"""What a subcommand stopped by Ctrl-C left behind, said after `interrupted`."""
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + error on two lines; a script wants one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(
            EXIT_USER_ERROR,
            f"chatmem: error: {message} (see {self.prog} --help)\n",
        )


def command(
    name: str,
    help_text: str,
    *,
    opens_core: bool = True,
    creates: bool = False,
    reads_only: bool | Callable[[argparse.Namespace], bool] = False,
    scoped: bool = True,
    interrupted: str = "",
    serves: bool = False,
    own_scope: str = "",
    own_config: bool = False,
) -> Callable[[Any], Any]:
    """Register a subcommand: a class with `run(core, args)` and, when it takes its own
    options, `arguments(parser)`. With `opens_core=False`, `run(config, args)` gets the
    config instead: for commands that must not touch the configured workspace. With
    `creates=True` a missing workspace is created (with a line on stderr) instead of
    refused. `reads_only` (or a test of the arguments) marks a command that changes
    nothing: it runs in a read-only workspace and refuses a --scope that holds nothing,
    unless `scoped=False` (it reads every scope). `interrupted` says what Ctrl-C leaves.
    `serves=True` marks a command that runs until stopped (a bot): its core loads the
    tokenizer and backfills vectors at the open, where a one-shot command's does not.
    `own_scope` (what it takes instead) marks a command that refuses `--scope`."""

    def register(cls: Any) -> Any:
        COMMANDS[name] = (help_text, getattr(cls, "arguments", _no_arguments), cls.run)
        if not opens_core:
            OWN_CORE.add(name)
        if creates:
            CREATES.add(name)
        if reads_only:
            READS_ONLY[name] = reads_only if callable(reads_only) else _always
        if not scoped:
            UNSCOPED.add(name)
        if interrupted:
            INTERRUPTED[name] = interrupted
        if serves:
            SERVES.add(name)
        if own_scope:
            OWN_SCOPES[name] = own_scope
        if own_config:
            OWN_CONFIG.add(name)
        return cls

    return register


def _always(args: argparse.Namespace) -> bool:
    return True


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """Subcommands that take only the common options need not declare `arguments`."""


@dataclass(frozen=True)
class Output:
    """Human text by default, JSON with --json, written in one place."""

    as_json: bool

    def emit(self, data: Any, human: str) -> None:
        if self.as_json:
            print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        else:
            print(human)


class _ScopeOption(argparse.Action):
    """`--scope KEY`: the last one given is `args.scope`; every one given, in order, is
    `args.scopes` too, for the commands that take several (export, import)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.scopes = [*getattr(namespace, "scopes", []), values]


def _common_options(with_defaults: bool) -> OneLineParser:
    """Options accepted before and after the command. Only the top level sets defaults:
    a subcommand's default would overwrite a value given before the command."""

    def default(value: Any) -> Any:
        return value if with_defaults else argparse.SUPPRESS

    common = OneLineParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        default=default(None),
        help="TOML config file (default: ./chatmem.toml when present)",
    )
    common.add_argument(
        "--workspace",
        metavar="DIR",
        default=default(None),
        help="workspace directory; beats CHATMEM_WORKSPACE and the config file (default: "
        "the platform's data directory, e.g. ~/.local/share/chatmem)",
    )
    common.add_argument(
        "--scope",
        metavar="KEY",
        action=_ScopeOption,
        default=default("main"),
        help="scope key: main (default), peer:ID, CHANNEL:peer:ID, "
        "CHANNEL:ACCOUNT:peer:ID or group:CHANNEL:CHAT_ID",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine-readable output; errors too, as one JSON object on stderr",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="chatmem",
        description="Long-term memory for chat bots.",
        parents=[_common_options(True)],
    )
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the version, the schema versions and the installed extras, then exit",
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=OneLineParser
    )
    sub_common = _common_options(False)
    for name, (help_text, arguments, _) in COMMANDS.items():
        sub = subparsers.add_parser(
            name, help=help_text, description=help_text, parents=[sub_common]
        )
        arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a reader that goes away (`chatmem status | head -1`) ends it
    quietly with exit 0, as the Python docs advise for SIGPIPE: the reader took what it
    wanted, so whether the pipe closed before or after the last write (a race) must not
    change the exit code."""
    try:
        code = _command(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()
    except BrokenPipeError:
        # What is still buffered would fail again at exit: send it nowhere instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


def _command(argv: list[str]) -> int:
    if "--json" in argv and not isinstance(sys.stderr, JsonErrors):
        with errors_as_json():
            return _command(argv)
    # Importing registers the subcommands of every area.
    from adapters.cli import (  # noqa: F401
        backup,
        bots,
        commands,
        curate,
        doctor,
        entities,
        erase,
        mcp,
        portable,
        recall,
        scopes,
        snapshot,
        storage,
        tui,
        vectors,
    )

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from adapters.cli import version

        return version.show(args)
    if not args.command:
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        from adapters.cli import running  # what running a command needs (module docstring)

        return running.run_command(args)
    except ChatmemError as exc:
        print(f"chatmem: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        note = INTERRUPTED.get(args.command)
        print("chatmem: interrupted" + (f": {note}" if note else ""), file=sys.stderr)
        return EXIT_INTERRUPTED


class JsonErrors(io.TextIOBase):
    """stderr under --json: every `chatmem: error: …` line becomes `{"error": "…"}`.

    Every error path ends in such a line on stderr (argparse's, the handlers', the error
    mapping in `main`), so rewriting them where they all pass makes no path able to forget
    the JSON form. Other lines (log records, notices) pass through unchanged.
    """

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self._target = target
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._target.write(self._converted(line) + "\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def finish(self) -> None:
        """Write what is left of an unfinished line."""
        if self._pending:
            self._target.write(self._converted(self._pending))
            self._pending = ""
        self._target.flush()

    @staticmethod
    def _converted(line: str) -> str:
        if not line.startswith(ERROR_PREFIX):
            return line
        return json.dumps({"error": line.removeprefix(ERROR_PREFIX)}, ensure_ascii=False)


@contextlib.contextmanager
def errors_as_json() -> Iterator[None]:
    stream = JsonErrors(sys.stderr)
    with contextlib.redirect_stderr(stream):  # type: ignore[type-var]
        try:
            yield
        finally:
            stream.finish()


TIME_ARG_YEARS = (2000, 2200)
"""Years a time given on the command line (`--now`, `--expires`) may fall in: far enough
for any what-if, near enough that what it writes stays a date every reader can use."""
TIME_ARG_RANGE = f"years {TIME_ARG_YEARS[0]} to {TIME_ARG_YEARS[1]}"


def parse_time_arg(value: str) -> Any:
    """An ISO-8601 date or time within TIME_ARG_YEARS (the value as typed in the error)."""
    try:
        when = parse_when(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 date or time: {value!r}") from None
    first, last = TIME_ARG_YEARS
    if not first <= when.year <= last:
        raise argparse.ArgumentTypeError(
            f"{value!r} is out of range: a date or time in {TIME_ARG_RANGE}"
        )
    return when


def importance_arg(value: str) -> Importance:
    try:
        return Importance(value)
    except ValueError:
        raise argparse.ArgumentTypeError("importance must be high, medium or low") from None


def category_arg(value: str) -> str:
    if value not in CATEGORIES:
        raise argparse.ArgumentTypeError(
            f"unknown category {value!r}; one of: {', '.join(CATEGORIES)}"
        )
    return value


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {value!r}")
    return number


def days_arg(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a number of days (0 or more), not {value!r}")
    return number
