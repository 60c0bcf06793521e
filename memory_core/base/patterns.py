"""Regular expressions compiled at their first use, not at import.

The core's rules hold some large patterns (the CJK script ranges, lists of a few hundred
names, units and dates): compiling them took about 35 ms of every process's start, at
import, whether or not the process ever matched one (`chatmem status` matches none; a
search or a capture only some). A module defines such a pattern as
`LazyPattern(source, flags)` where it wrote `re.compile(source, flags)`; its `pattern`
and `flags` are there at once (rules are built from other rules' sources), and the first
call of a matching method compiles it, once (two threads racing compile it twice and
keep one: the same pattern either way).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any


class LazyPattern:
    """`re.compile(pattern, flags)`, compiled at the first match, search or sub."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        return self.compiled.findall(string, pos, endpos)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self.compiled.split(string, maxsplit)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"


LATIN_LOOK_ALIKES = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
"""The letters a case-insensitive pattern matches to an ASCII letter that lower-casing or
casefolding does not make one: "İ" ("APRİL" lowers to "apri̇l"), "ı", "ſ", the Kelvin sign."""


def ascii_key(matched: str) -> str:
    """The lower-case word a case-insensitive match of an ASCII pattern stands for, to look
    it up by (`LATIN_LOOK_ALIKES` made the letters they match)."""
    return matched.translate(LATIN_LOOK_ALIKES).lower()
