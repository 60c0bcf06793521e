"""The `chatmem` command line: one parser, one handler per subcommand.

User errors (bad arguments, bad config, unknown ids) print one line and exit 2; only bugs
show a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from memory_core.clock import parse_when
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.entries import CATEGORIES, Importance
from memory_core.errors import ChatmemError
from memory_core.scope import ScopeKey

EXIT_USER_ERROR = 2
EXIT_PROBLEMS = 1

Handler = Callable[[MemoryCore, argparse.Namespace], Coroutine[Any, Any, int]]
ConfigHandler = Callable[[Config, argparse.Namespace], Coroutine[Any, Any, int]]
OWN_CORE: set[str] = set()
"""Subcommands whose `run` takes the config and opens (or not) a core of its own."""
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + error on two lines; a script wants one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(
            EXIT_USER_ERROR,
            f"chatmem: error: {message} (see {self.prog} --help)\n",
        )


def command(name: str, help_text: str, *, opens_core: bool = True) -> Callable[[Any], Any]:
    """Register a subcommand: a class with `run(core, args)` and, when it takes its own
    options, `arguments(parser)`. With `opens_core=False`, `run(config, args)` gets the
    config instead: for commands that must not touch the configured workspace."""

    def register(cls: Any) -> Any:
        COMMANDS[name] = (help_text, getattr(cls, "arguments", _no_arguments), cls.run)
        if not opens_core:
            OWN_CORE.add(name)
        return cls

    return register


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


def _common_options(with_defaults: bool) -> OneLineParser:
    """Options accepted before and after the command. Only the top level sets defaults:
    a subcommand's default would overwrite a value given before the command."""

    def default(value: Any) -> Any:
        return value if with_defaults else argparse.SUPPRESS

    common = OneLineParser(add_help=False)
    common.add_argument(
        "--config",
        default=default(None),
        help="TOML config file (default ./chatmem.toml if present)",
    )
    common.add_argument(
        "--workspace",
        default=default(None),
        help="workspace directory (beats CHATMEM_WORKSPACE)",
    )
    common.add_argument("--scope", default=default("main"), help="scope key, e.g. main, peer:42")
    common.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="chatmem",
        description="Long-term memory for chat bots.",
        parents=[_common_options(True)],
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
    # Importing registers the subcommands of every area.
    from adapters import cli_bots, cli_commands, cli_recall, cli_tui  # noqa: F401

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        config = load_config(args.config, workspace=args.workspace)
        scope = ScopeKey(args.scope)
        args.scope_key = scope
        handler = COMMANDS[args.command][2]
        if args.command in OWN_CORE:
            own: ConfigHandler = handler  # type: ignore[assignment]
            return asyncio.run(own(config, args))
        return asyncio.run(_run(config, handler, args))
    except ChatmemError as exc:
        print(f"chatmem: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130


async def _run(config: Config, handler: Handler, args: argparse.Namespace) -> int:
    async with MemoryCore.open(config) as core:
        return await handler(core, args)


def parse_time_arg(value: str) -> Any:
    try:
        return parse_when(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 date or time: {value!r}") from None


def importance_arg(value: str) -> Importance:
    try:
        return Importance(value)
    except ValueError:
        raise argparse.ArgumentTypeError("importance must be high, medium or low") from None


def category_arg(value: str) -> str:
    if not value.replace("_", "").replace("-", "").isalnum() or len(value) > 40:
        raise argparse.ArgumentTypeError(
            f"bad category {value!r}; usual ones: {', '.join(CATEGORIES)}"
        )
    return value


if __name__ == "__main__":
    # Under `python -m adapters.cli` this file runs as `__main__`, but the subcommands
    # register themselves in `adapters.cli`: run that module's main.
    from adapters.cli import main as _main

    raise SystemExit(_main())
