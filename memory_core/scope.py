"""Every memory operation is addressed by a `ScopeKey`, resolved once where a message
enters (the adapter) and passed down unchanged. Nothing below the adapter recomputes a
scope from a chat id, so there is no way for recall to be shared while sessions are not.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from memory_core.errors import ScopeError


class DmScope(StrEnum):
    """How direct chats are separated (groups are always per chat)."""

    MAIN = "main"
    PER_PEER = "per-peer"
    PER_CHANNEL_PEER = "per-channel-peer"
    PER_ACCOUNT_CHANNEL_PEER = "per-account-channel-peer"


ChatType = Literal["direct", "group"]


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """A canonical scope name such as `main`, `peer:42` or `group:telegram:-100`."""

    value: str

    def __post_init__(self) -> None:
        if not self.value:
            raise ScopeError("a scope key cannot be empty")
        if "\x00" in self.value:
            raise ScopeError("a scope key cannot contain NUL")
        try:
            self.value.encode("utf-8")
        except UnicodeEncodeError:
            raise ScopeError("a scope key must be valid Unicode (no lone surrogates)") from None

    def __str__(self) -> str:
        return self.value

    @property
    def is_main(self) -> bool:
        return self.value == "main"

    @classmethod
    def parse(cls, text: str) -> ScopeKey:
        """A scope key as a person types it (`--scope`): spaces around it and around its
        `:`-parts are dropped (`main ` is `main`, `peer: 42` is `peer:42`), and an empty
        part (`peer:`, `group::1`) is refused. Only here: the constructor takes every key an
        adapter builds from a platform's ids unchanged, whatever they hold, so that the
        mapping from chats to scopes stays injective."""
        parts = [part.strip() for part in text.split(":")]
        if not any(parts):
            raise ScopeError("a scope key cannot be empty")
        if not all(parts):
            raise ScopeError(f"scope key {text!r} has an empty part (e.g. peer:42, main)")
        return cls(":".join(parts))


MAIN = ScopeKey("main")


@dataclass(frozen=True, slots=True)
class InboundContext:
    """Where a message came from, as much as scoping needs to know."""

    channel: str
    account_id: str
    peer_id: str
    chat_type: ChatType
    chat_id: str
    thread_id: str | None = None


def resolve_scope(
    ctx: InboundContext, dm_scope: DmScope | str = DmScope.MAIN, *, topic_scope: bool = False
) -> ScopeKey:
    """Map an inbound message to its scope (the table in docs/architecture.md §Scopes)."""
    mode = DmScope(dm_scope)
    if ctx.chat_type == "group":
        key = f"group:{ctx.channel}:{ctx.chat_id}"
        if topic_scope and ctx.thread_id:
            key += f":topic:{ctx.thread_id}"
        return ScopeKey(key)
    if mode is DmScope.MAIN:
        return MAIN
    if mode is DmScope.PER_PEER:
        return ScopeKey(f"peer:{ctx.peer_id}")
    if mode is DmScope.PER_CHANNEL_PEER:
        return ScopeKey(f"{ctx.channel}:peer:{ctx.peer_id}")
    return ScopeKey(f"{ctx.channel}:{ctx.account_id}:peer:{ctx.peer_id}")


# --- directory slugs -------------------------------------------------------------------
#
# A slug keeps `[a-z0-9-]` as is, writes `:` as `_`, and every other UTF-8 byte as `~xx`.
# The encoding is therefore injective and reversible, and a slug can never be `.`/`..`,
# contain `/`, NUL or an upper-case letter (case-insensitive file systems). Long keys are
# cut and suffixed with `~~` + 128 bits of SHA-256: `~~` never occurs in a plain slug
# (every `~` is followed by two hex digits), so hashed and plain slugs cannot collide.

SLUG_MAX = 120
_HASHED_PREFIX = 64
_PLAIN = re.compile(r"[a-z0-9-]")
_SLUG_SHAPE = re.compile(rf"^[a-z0-9_~-]{{1,{SLUG_MAX}}}$")


def scope_slug(key: ScopeKey) -> str:
    """Directory name of a scope under `memory/scopes/`."""
    parts: list[str] = []
    for ch in key.value:
        if _PLAIN.fullmatch(ch):
            parts.append(ch)
        elif ch == ":":
            parts.append("_")
        else:
            parts.extend(f"~{b:02x}" for b in ch.encode("utf-8"))
    encoded = "".join(parts)
    if len(encoded) <= SLUG_MAX:
        return encoded
    digest = hashlib.sha256(key.value.encode("utf-8")).hexdigest()[:32]
    return f"{encoded[:_HASHED_PREFIX]}~~{digest}"


def is_hashed_slug(slug: str) -> bool:
    return "~~" in slug


def key_from_slug(slug: str) -> ScopeKey:
    """Invert `scope_slug` for plain slugs; hashed slugs need the directory's key file."""
    if not is_valid_slug(slug) or is_hashed_slug(slug):
        raise ScopeError(f"not a reversible scope slug: {slug!r}")
    out = bytearray()
    i = 0
    while i < len(slug):
        ch = slug[i]
        if ch == "~":
            out.append(int(slug[i + 1 : i + 3], 16))
            i += 3
            continue
        out.extend(b":" if ch == "_" else ch.encode("ascii"))
        i += 1
    try:
        return ScopeKey(out.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ScopeError(f"not a reversible scope slug: {slug!r}") from exc


def is_valid_slug(slug: str) -> bool:
    """Shape check used before a slug read from disk is trusted as a path component."""
    if not _SLUG_SHAPE.match(slug):
        return False
    if is_hashed_slug(slug):
        return _HASHED_SHAPE.fullmatch(slug) is not None
    return _PLAIN_SHAPE.fullmatch(slug) is not None


_PLAIN_SHAPE = re.compile(r"(?:[a-z0-9_-]|~[0-9a-f]{2})+")
_HASHED_SHAPE = re.compile(r"(?:[a-z0-9_-]|~[0-9a-f]{2})*(?:~|~[0-9a-f])?~~[0-9a-f]{32}")
