"""`--limit` / `--offset` for the commands that walk every scope (`scopes`, `stats`): a
workspace of 10 000 per-peer scopes shown a page at a time (their figures come from the
index's summaries, memory_core/scope_listing/). Without them every scope is shown."""

from __future__ import annotations

import argparse


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
