"""The scope key behind an index's internal scope id, for log lines: an operator knows
`telegram:peer:42`, not "scope 1".

The index learns each id when it finds or makes a scope (`SearchIndex.scope_id`) and
says so here; a log line of the vectors, which only carry the id, names the key. An id
this process has not seen (a merge renamed it since) is shown as `#ID`.
"""

from __future__ import annotations

from memory_core.base.scope import printable_key

_KEYS: dict[int, str] = {}


def remember_scope(sid: int, key: str) -> None:
    _KEYS[sid] = key


def scope_name(sid: int) -> str:
    """The key of scope id `sid` as a log line shows it, else `#sid`."""
    key = _KEYS.get(sid)
    return printable_key(key) if key is not None else f"#{sid}"
