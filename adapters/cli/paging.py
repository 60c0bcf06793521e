"""`--limit` / `--offset` for the commands that walk every scope (`scopes`, `stats`):
each listed scope's memory file is read, so a workspace of 10 000 per-peer scopes is
shown a page at a time. Without them every scope is shown, as before."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def non_negative(text: str) -> int:
    """An argparse type: a whole number >= 0, one clear line otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {value}")
    return value


def add_paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit",
        type=non_negative,
        default=None,
        metavar="N",
        help="show at most N scopes (in the listing's order: main first, then by key)",
    )
    parser.add_argument(
        "--offset",
        type=non_negative,
        default=0,
        metavar="M",
        help="skip the first M scopes (with --limit: the next page)",
    )


def page(items: Sequence[T], args: argparse.Namespace) -> list[T]:
    """The part of `items` that `--offset` and `--limit` ask for (all by default)."""
    start = args.offset
    return list(items[start:] if args.limit is None else items[start : start + args.limit])
