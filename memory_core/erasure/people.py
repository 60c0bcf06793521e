"""Whose data an erasure takes: pure rules, no I/O.

A person is `CHANNEL:ID` as the platform names them (`telegram:42`). Their direct
chats are the scopes keyed by that id under every `dm_scope` (docs/formats.md,
"Scopes"): `peer:ID` (per-peer: the id alone, whichever channel), `CHANNEL:peer:ID`
and `CHANNEL:ACCOUNT:peer:ID`. In a group scope (`group:CHANNEL:…`) a message keeps
its sender's platform id beside the name the platform showed (`messages.speaker_id`,
and `speaker_id` in an event-log input), and their lines are found by that id,
whatever name they spoke under. Older lines kept no id: those are found by name (the
names they used in their own direct chats or under their id, and any the operator
adds), except a name another member's id spoke under in that group, which would take
that member's lines too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

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
    """What marks the person's words in a shared scope: their platform id, the names
    they spoke under and the texts they said (or that were said of them)."""

    names: frozenset[str]
    texts: frozenset[str] = frozenset()
    id: str | None = None
    """The person's id as messages keep it (`normalise_id`); None: names alone."""

    def with_texts(self, more: Iterable[str]) -> Traces:
        kept = {t.strip() for t in more if len(t.strip()) >= MIN_TEXT_CHARS}
        return replace(self, texts=self.texts | kept)

    def with_names(self, more: Iterable[str]) -> Traces:
        return replace(self, names=self.names | {n.strip() for n in more if n.strip()})

    def without_names(self, shared: Iterable[str]) -> Traces:
        return replace(self, names=self.names - set(shared))

    def spoke(self, speaker: str | None, speaker_id: str | None = None) -> bool:
        """Whether a line is theirs: by the sender's id where the line kept one, else
        by the name it was said under."""
        if speaker_id:
            return self.id is not None and speaker_id == self.id
        return speaker is not None and speaker.strip() in self.names

    def said(self, text: str) -> bool:
        """Whether `text` (an entry a member asked to keep) is part of one of their
        messages."""
        text = text.strip()
        return len(text) >= MIN_TEXT_CHARS and any(text in t for t in self.texts)

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


GroupRow = tuple[int, str, str, str, str | None, str]
"""A group's message as `(id, session, role, speaker, speaker_id, content)`."""


def erased_messages(rows: Sequence[GroupRow], traces: Traces) -> list[int]:
    """Ids of the person's messages among a group's rows (ordered by session, then id):
    their own (`Traces.spoke`: by id, or by name where no id was kept), and the replies
    and tool messages after each, up to the next person's message."""
    erased: list[int] = []
    session = None
    following = False
    for message_id, session_id, role, speaker, speaker_id, _content in rows:
        if session_id != session:
            session, following = session_id, False
        if role == "user":
            following = traces.spoke(speaker, speaker_id)
            if following:
                erased.append(message_id)
        elif following:
            erased.append(message_id)
    return erased


@dataclass(frozen=True)
class GroupSpeakers:
    """Who spoke under which name in one group, as its messages' ids tell."""

    own: frozenset[str]
    """Names the person's id spoke under (all of them: a member renamed)."""
    shared: frozenset[str]
    """Names another member's id spoke under: no line is taken by these names."""
    by_id: int
    """The person's messages found by their id."""
    by_name: int
    """The person's messages found by name (older ones, kept without an id)."""


def group_speakers(
    rows: Sequence[GroupRow],
    traces: Traces,
    entries: Iterable[tuple[str | None, str | None]] = (),
) -> GroupSpeakers:
    """`GroupSpeakers` of a group's rows (`traces` with the person's id and names), and
    of its entries' `(speaker, speaker_id)`."""
    own: set[str] = set()
    shared: set[str] = set()
    by_id = 0
    for _id, _session, role, speaker, speaker_id, _content in rows:
        if role == "user" and speaker_id:
            if speaker_id == traces.id:
                own.add(speaker.strip())
                by_id += 1
            else:
                shared.add(speaker.strip())
    for name, name_id in entries:
        if name and name_id:
            (own if name_id == traces.id else shared).add(name.strip())
    names = traces.with_names(own)
    by_name = sum(1 for r in rows if r[2] == "user" and not r[4] and names.spoke(r[3]))
    return GroupSpeakers(frozenset(own - {""}), frozenset(shared - {""}), by_id, by_name)
