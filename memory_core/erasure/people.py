"""Whose data an erasure takes: pure rules, no I/O.

A person is `CHANNEL:ID` as the platform names them (`telegram:42`). Their direct
chats are the scopes keyed by that id under every `dm_scope` (docs/architecture.md
§Scopes): `peer:ID` (per-peer: the id alone, whichever channel), `CHANNEL:peer:ID`
and `CHANNEL:ACCOUNT:peer:ID`. In a group scope (`group:CHANNEL:…`) the history
stores a message's speaker by the name the platform showed, not by id, so their lines
there are found by name: the names they used in their own direct chats, and any the
operator adds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory_core.base.errors import ScopeError
from memory_core.base.scope import ScopeKey, normalise_id

MIN_TEXT_CHARS = 8
"""A text of the person's shorter than this ("ok", "thanks") is not looked for in
other lines: it would take everyone's. Their own lines go by their name."""

REPLY_SPEAKERS = frozenset({"assistant", "tool", "bot"})
"""Who speaks a reply in an archive line (`HH:MM:SS assistant: …`): a reply to one of
the person's lines goes with it, since it may repeat their words."""

_TURN = re.compile(r"^\d{2}:\d{2}(?::\d{2})? (?P<who>[^:\n]{1,200}): ")
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True, slots=True)
class Person:
    channel: str
    id: str

    @classmethod
    def parse(cls, text: str) -> Person:
        """`CHANNEL:ID` as typed (`telegram:42`); one clear line otherwise."""
        channel, sep, ident = text.partition(":")
        if not sep or not channel.strip() or not ident.strip():
            raise ScopeError(f"--person takes CHANNEL:ID (e.g. telegram:42), not {text!r}")
        return cls(
            normalise_id(channel, "a person's channel"), normalise_id(ident, "a person's id")
        )

    def __str__(self) -> str:
        return f"{self.channel}:{self.id}"


def direct_scopes(person: Person, known: Iterable[ScopeKey]) -> list[ScopeKey]:
    """The known scopes keyed by the person under any `dm_scope`, in key order."""
    plain = {f"peer:{person.id}", f"{person.channel}:peer:{person.id}"}
    found = []
    for key in known:
        parts = key.value.split(":")
        per_account = (
            len(parts) == 4
            and parts[0] == person.channel
            and parts[2] == "peer"
            and parts[3] == person.id
        )
        if key.value in plain or per_account:
            found.append(key)
    return sorted(set(found), key=lambda k: k.value)


def group_scopes(channel: str, known: Iterable[ScopeKey]) -> list[ScopeKey]:
    """The known group scopes of a channel (topics included), in key order."""
    prefix = f"group:{channel}:"
    return sorted({k for k in known if k.value.startswith(prefix)}, key=lambda k: k.value)


@dataclass(frozen=True)
class Traces:
    """What marks the person's words in a shared scope: the names they spoke under and
    the texts they said (or that were said of them)."""

    names: frozenset[str]
    texts: frozenset[str] = frozenset()

    def with_texts(self, more: Iterable[str]) -> Traces:
        kept = {t.strip() for t in more if len(t.strip()) >= MIN_TEXT_CHARS}
        return Traces(self.names, self.texts | kept)

    def spoke(self, speaker: str | None) -> bool:
        return speaker is not None and speaker.strip() in self.names

    def found_in(self, text: str) -> bool:
        """Whether `text` names the person (a name as a word; a Chinese name anywhere)
        or holds one of their texts."""
        if any(t in text for t in self.texts):
            return True
        return any(_names(text, name) for name in self.names)


def _names(text: str, name: str) -> bool:
    if not name:
        return False
    if _CJK.search(name):
        return name in text
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def turn_speaker(line: str) -> str | None:
    """The speaker of an archive line (`19:02:00 Mia: …`), else None."""
    match = _TURN.match(line)
    return match.group("who").strip() if match else None


def kept_lines(text: str, traces: Traces) -> tuple[str, int]:
    """A Markdown file (daily notes, an archive, a summary) without the person's parts,
    and how many parts went. A part is a line with its indented continuation lines (one
    note). A part goes when it names the person or holds their text; an archive line a
    reply speaks goes with the person's line before it."""
    parts: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if parts and line[:1] in (" ", "\t") and line.strip():
            parts[-1].append(line)
        else:
            parts.append([line])
    kept: list[str] = []
    dropped = 0
    replying = False
    for part in parts:
        body = "".join(part)
        who = turn_speaker(part[0])
        if who is not None and who not in REPLY_SPEAKERS:
            replying = False
        if traces.found_in(body) or (replying and who in REPLY_SPEAKERS):
            dropped += 1
            if who is not None and who not in REPLY_SPEAKERS:
                replying = True
            continue
        kept.append(body)
    return "".join(kept), dropped


def erased_messages(rows: Sequence[tuple[int, str, str, str, str]], traces: Traces) -> list[int]:
    """Ids of the person's messages among a group's `(id, session, role, speaker,
    content)` rows (ordered by session, then id): their own (by speaker), and the
    replies and tool messages after each, up to the next person's message."""
    erased: list[int] = []
    session = None
    following = False
    for message_id, session_id, role, speaker, _content in rows:
        if session_id != session:
            session, following = session_id, False
        if role == "user":
            following = traces.spoke(speaker)
            if following:
                erased.append(message_id)
        elif following:
            erased.append(message_id)
    return erased
