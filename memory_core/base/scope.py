"""Every memory operation is addressed by a `ScopeKey`, resolved once where a message
enters (the adapter) and passed down unchanged. Nothing below the adapter recomputes a
scope from a chat id, so there is no way for recall to be shared while sessions are not.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from memory_core.base.errors import ScopeError


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
        """A scope key as a person types it (`--scope`, `mcp.clients`): normalised as a
        platform's ids are (`normalise_id`: `ｐｅｅｒ：４２` is `peer:42`), spaces around
        its `:`-parts dropped (`peer: 42` is `peer:42`), an empty part (`peer:`,
        `group::1`) refused, and so is a control, text-direction or invisible format
        character. The constructor takes a key unchanged: it also reads the keys older
        workspaces stored, whatever they hold (`printable_key` shows them)."""
        normal = normalise_id(text, "a scope key", allow_empty=True)
        parts = [part.strip() for part in normal.split(":")]
        if not any(parts):
            raise ScopeError("a scope key cannot be empty")
        if not all(parts):
            raise ScopeError(f"scope key {text!r} has an empty part (e.g. peer:42, main)")
        return cls(":".join(parts))


MAIN = ScopeKey("main")

# Characters that change how a line looks without being seen: controls (tab, newline,
# escape sequences), line and paragraph separators, and the bidirectional controls that
# reorder text (U+202E shows what follows right to left). In a key they misalign every
# listing and can make one scope look like another.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def is_odd_character(ch: str) -> bool:
    """Invisible or reordering: a control, a line or paragraph separator, a bidi
    control, or a format or default-ignorable character (zero-width space and joiners,
    U+FEFF, the soft hyphen, variation selectors, tags), which make one key look like
    another (`Ann` and `An\u200bn`)."""
    return (
        unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
        or ch in _BIDI_CONTROLS
        or _is_default_ignorable(ord(ch))
    )


# Unicode's Default_Ignorable_Code_Point ranges that are not already format (Cf)
# characters: the combining grapheme joiner, the Hangul fillers, the Mongolian and other
# variation selectors, and reserved ignorables. Shown as nothing by most fonts. Also
# blanks that are symbols or letters, not ignorable, yet drawn as nothing: the braille
# pattern blank (U+2800, a "So") and the Khitan filler.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2060, 0x206F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x16FE4, 0x16FE4),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def _is_default_ignorable(code: int) -> bool:
    return any(first <= code <= last for first, last in _IGNORABLE_RANGES)


def refuse_odd_characters(text: str, what: str) -> str:
    """`text` unchanged, or a ScopeError naming the first invisible or reordering
    character (see `is_odd_character`): for every key and id a scope is made from."""
    for ch in text:
        if is_odd_character(ch):
            raise ScopeError(
                f"{what} cannot contain control or text-direction characters or invisible "
                f"format characters (found {_escaped(ch)} in {printable_key(text)})"
            )
    return text


_SPACES = re.compile(r"\s+")


def _spelling(text: str) -> str:
    """NFKC with each run of spaces one space: the spelling `normalise_id` gives an id
    and `lookalike_form` a stored key (the two must agree)."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text))


def normalise_id(text: str, what: str, *, allow_empty: bool = False) -> str:
    """One spelling per id, decided once where an id or key enters (the adapters'
    platform ids, `--as`, `--scope`, MCP): the same person is then the same scope on
    every path. NFKC (the canonical composition of NFC, plus the compatibility forms
    keyboards send: full-width `Ａｎｎ` is `Ann`, U+00A0 and U+3000 are a space), spaces
    around it dropped and runs of spaces inside made one. Invisible and reordering
    characters are refused, not removed (`refuse_odd_characters`): a key that holds one
    was not typed by a person. Case is kept: platform ids are case-sensitive."""
    refuse_odd_characters(text, what)
    normal = _spelling(text).strip()
    refuse_odd_characters(normal, what)
    if not normal and not allow_empty:
        raise ScopeError(f"{what} cannot be empty or only spaces")
    return normal


def lookalike_form(key: ScopeKey | str) -> str:
    """The key a stored one would be if it were made today: what `validate` groups
    older scopes by. Invisible characters, which are refused now, are dropped here, so
    `An\u200bn` and `Ann` fall together."""
    text = key.value if isinstance(key, ScopeKey) else key
    visible = (
        text if _plainly_visible(text) else "".join(ch for ch in text if not is_odd_character(ch))
    )
    return ":".join(part.strip() for part in _spelling(visible).split(":"))


def today_key(key: ScopeKey | str) -> ScopeKey | None:
    """The key every path (`--scope`, `--as`, the adapters, MCP) reaches a stored one's
    scope by now: where `validate` says to merge a look-alike group and where `scopes
    --merge` may make a scope that does not exist yet. None for a key no path can make
    (an empty part once its invisible characters are gone)."""
    try:
        return ScopeKey.parse(lookalike_form(key))
    except ScopeError:
        return None


def printable_key(key: ScopeKey | str) -> str:
    """A key as it can be shown on one line: invisible and reordering characters (which a
    key from an older workspace may still hold) written as `\\x1b`, `\\u202e`."""
    text = key.value if isinstance(key, ScopeKey) else key
    if _plainly_visible(text):
        return text
    return "".join(_escaped(ch) if is_odd_character(ch) else ch for ch in text)


def _plainly_visible(text: str) -> bool:
    """Printable ASCII holds no odd character (they are controls or beyond ASCII): the
    quick answer for the keys of a listing of 10 000 scopes."""
    return text.isascii() and text.isprintable()


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def lookalike_groups(keys: list[ScopeKey]) -> list[list[ScopeKey]]:
    """Stored scopes that are one key now (`lookalike_form`), each group sorted, the
    groups in key order: what `validate` reports and `scopes --merge` folds together."""
    groups: dict[str, list[ScopeKey]] = {}
    for key in keys:
        groups.setdefault(lookalike_form(key), []).append(key)
    found = [sorted(set(group), key=lambda k: k.value) for group in groups.values()]
    return sorted((g for g in found if len(g) > 1), key=lambda g: g[0].value)


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
    """Map an inbound message to its scope (the table in docs/formats.md, "Scopes").
    Every id the key is made of is normalised (`normalise_id`) first; one with a
    control, text-direction or invisible format character is refused (`ScopeError`)."""
    mode = DmScope(dm_scope)
    return _resolved(ctx, mode, topic_scope)


def _id(text: str) -> str:
    return normalise_id(
        text, "a chat's scope (its channel, account, peer or chat id)", allow_empty=True
    )


def _resolved(ctx: InboundContext, mode: DmScope, topic_scope: bool) -> ScopeKey:
    if ctx.chat_type == "group":
        key = f"group:{_id(ctx.channel)}:{_id(ctx.chat_id)}"
        thread = _id(ctx.thread_id) if topic_scope and ctx.thread_id else ""
        if thread:
            key += f":topic:{thread}"
        return ScopeKey(key)
    if mode is DmScope.MAIN:
        return MAIN
    if mode is DmScope.PER_PEER:
        return ScopeKey(f"peer:{_id(ctx.peer_id)}")
    if mode is DmScope.PER_CHANNEL_PEER:
        return ScopeKey(f"{_id(ctx.channel)}:peer:{_id(ctx.peer_id)}")
    return ScopeKey(f"{_id(ctx.channel)}:{_id(ctx.account_id)}:peer:{_id(ctx.peer_id)}")


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
_PLAIN_KEY = re.compile(r"[a-z0-9:-]*")
_SLUG_SHAPE = re.compile(rf"^[a-z0-9_~-]{{1,{SLUG_MAX}}}$")


def scope_slug(key: ScopeKey) -> str:
    """Directory name of a scope under `memory/scopes/`."""
    if _PLAIN_KEY.fullmatch(key.value) and len(key.value) <= SLUG_MAX:
        return key.value.replace(":", "_")  # what the loop below makes of such a key
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
