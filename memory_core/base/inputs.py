"""Checks of what callers hand the core (a person's text, a platform's message, a model's
tool arguments) before anything is stored or searched.

Every text is kept exactly as given or refused whole with one `InputRefused` line: a
lone surrogate (what Python makes of bytes that are not UTF-8 on a command line, or a
`"\\ud800"` in JSON) cannot be written to a UTF-8 file or database, so it is refused here
instead of failing halfway through a write.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

from memory_core.base.errors import InputRefused

E = TypeVar("E", bound=StrEnum)


def storable(text: str, what: str = "the text") -> str:
    """`text` unchanged, or InputRefused when UTF-8 cannot hold it (a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputRefused(
            f"{what} is refused: character {exc.start + 1} is a lone surrogate, which UTF-8"
            " cannot store (bytes that are not UTF-8?)"
        ) from None
    return text


def is_storable(text: str) -> bool:
    """Whether UTF-8 can hold `text` (no lone surrogate): for text that is skipped, not
    refused (a model's candidate among others)."""
    try:
        storable(text)
    except InputRefused:
        return False
    return True


def all_storable(texts: Iterable[str], what: str = "the text") -> None:
    """`storable` for each of `texts`."""
    for text in texts:
        storable(text, what)


def choice(kind: type[E], value: E | str, what: str) -> E:
    """`value` as a member of `kind` (the member itself, or its string value)."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(member.value for member in kind)
        raise InputRefused(f"{what} must be one of {names}, not {value!r}") from None
