"""Whose fact it is: in a group scope, one member cannot overrule what another member
said about themselves.

A group scope's captures and extracted memories carry their speaker (the member's
name). An entry whose speaker said it in the first person ("I", "my", "我"), or which
names its speaker ("Alice's son ..."; an extractor may rewrite "my" so), is that
member's self-fact. A candidate of another member that would update or contradict it
becomes that member's *claim* instead: a belief with its speaker and the id of the
self-fact it disputes (`claim_on`), shown to the model as "(claim by Bob) ...", and the
self-fact is left untouched. Another member's first-person text is about that member:
their own self-fact, a different fact (it neither restates, updates nor disputes the
first one). A text naming a member ("Ann lives in Shanghai") is compared with what they
said of themselves as if they said it (`as_member`: "I live in Shanghai"), so that it
restates or updates their self-fact as usual. When the member restates their self-fact, it is
reinforced and every other member's claim on it is contradicted: their word wins again.

Pure, and a no-op for a candidate without a speaker: outside group scopes nothing
changes. `merge` calls `claim_contradictions` and `ruled` for each candidate and
`refuted` after a reinforcement; the prompt and the search index show entries through
`shown`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import replace

from memory_core.base.entries import DEFAULT_CONFIDENCE, MemoryClass, MemoryEntry
from memory_core.base.merge_values import Proposal
from memory_core.base.scope import ScopeKey
from memory_core.base.speaker_label import labelled

GROUP_PREFIX = "group:"
"""How a group chat's scope key starts (base/scope.py: `group:{channel}:{chat_id}`)."""

CLAIM_FACTOR = 0.5
"""What a claim's search rank is multiplied by: another member's word about someone
ranks below what that someone said, for a query that finds both."""

SPEAKER_CHARS = 64
"""A speaker's name is kept to this many characters (a platform's display name)."""

_FIRST_PERSON = re.compile(
    r"(?<![\w'’])(?:i|i['’](?:m|ve|d|ll)|me|my|mine|myself)(?![\w'’])", re.IGNORECASE
)
_CJK_FIRST_PERSON = re.compile(r"[我俺](?![们們])|本人")


def is_group(scope: ScopeKey) -> bool:
    """Whether several people talk in the scope (a group chat's scope)."""
    return scope.value.startswith(GROUP_PREFIX)


def group_speaker(scope: ScopeKey, speaker: str | None) -> str | None:
    """The speaker a memory of `scope` records: the name on one line, cut to
    `SPEAKER_CHARS`, in a group scope; None elsewhere (or for no name), so a direct
    chat's memories are written exactly as before."""
    if speaker is None or not is_group(scope):
        return None
    name = " ".join("".join(ch for ch in speaker if ch.isprintable()).split())
    return name[:SPEAKER_CHARS] or None


def _folded(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def same_speaker(a: str | None, b: str | None) -> bool:
    """Whether two recorded speakers are one member (case, width and spacing aside)."""
    return a is not None and b is not None and _folded(a) == _folded(b)


def first_person(text: str) -> bool:
    """Whether the text speaks of its speaker: "I", "my", "me", "我" (not "我们")."""
    return _FIRST_PERSON.search(text) is not None or _CJK_FIRST_PERSON.search(text) is not None


def names_speaker(text: str, speaker: str) -> bool:
    """Whether the text names the speaker ("Alice's son", "Alice lives", "爱丽丝住在"):
    the whole name, or a word of it of three characters or more ("Alice" of "Alice
    Smith"); a Latin name as a whole word ("Bob" is not in "Bobby")."""
    name = _folded(speaker)
    if not name:
        return False
    folded = _folded(text)
    words = {name, *(word for word in name.split() if len(word) >= 3)}
    for word in words:
        if word.isascii():
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", folded) is not None:
                return True
        elif word in folded:
            return True
    return False


def is_self_fact(entry: MemoryEntry) -> bool:
    """A member's statement about themselves: said in the first person, or naming its
    speaker. A claim is never one (it is about somebody else)."""
    speaker = entry.speaker
    if speaker is None or entry.claim_on is not None:
        return False
    return first_person(entry.content) or names_speaker(entry.content, speaker)


def speaks_of_self(text: str, other: str) -> bool:
    """Whether a member's text is about its own speaker rather than member `other`: in
    the first person ("I", "my", "我") and not naming `other`."""
    return first_person(text) and not names_speaker(text, other)


def other_subject(speaker: str | None, text: str, entry: MemoryEntry) -> bool:
    """Whether `entry` is another member's self-fact while the text of `speaker` is about
    its own speaker: two members' first-person facts are about two people, so neither
    restates, updates nor contradicts the other."""
    owner = entry.speaker
    return (
        speaker is not None
        and owner is not None
        and not same_speaker(owner, speaker)
        and is_self_fact(entry)
        and speaks_of_self(text, owner)
    )


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_THIRD_PERSON = {
    "she": "I", "he": "I", "her": "my", "his": "my", "him": "me", "hers": "mine",
    "herself": "myself", "himself": "myself", "她": "我", "他": "我",
}  # fmt: skip
"""Once a text names a member, its third person is taken for them ("Ann's number is
555-0143, she prefers texts")."""
_PRONOUN = re.compile(
    r"(?<![a-z0-9'’])(?:she|he|her|his|him|hers|herself|himself)(?![a-z0-9'’])|[她他](?![们們])",
    re.IGNORECASE,
)


def _name_pattern(word: str) -> re.Pattern[str]:
    """A name as a whole word (a Latin one not inside another word, "Ann" not in
    "Anna"), with its possessive: "'s" or 的."""
    edge_before, edge_after = (r"(?<![a-z0-9])", r"(?![a-z0-9])") if word.isascii() else ("", "")
    own = r"(?P<own>['’]s(?![a-z0-9])|的)?"
    return re.compile(rf"{edge_before}{re.escape(word)}{edge_after}{own}", re.IGNORECASE)


def as_member(text: str, name: str) -> tuple[str, ...]:
    """`text` as member `name` would say it ("Ann lives in Shanghai" → "I lives in
    Shanghai", "Ann's son" → "my son", "Ann的儿子" → "我儿子" and "我的儿子", "she" →
    "I"), so that
    matching compares it with what they said of themselves; () when it does not name
    them. (Verb agreement aside: values' one writing folds "lives" into "live".)"""
    folded = _folded(name)
    if not folded:
        return ()
    text = unicodedata.normalize("NFKC", text)
    chinese = _CJK.search(text) is not None
    words = sorted({folded, *(w for w in folded.split() if len(w) >= 3)}, key=len, reverse=True)
    for word in words:
        pattern = _name_pattern(word)
        if pattern.search(text) is None:
            continue
        text = _PRONOUN.sub(lambda m: _THIRD_PERSON[m.group().lower()], text)
        if not chinese:
            return (pattern.sub(lambda m: "my" if m.group("own") else "I", text),)
        dropped = pattern.sub("我", text)
        kept = pattern.sub(lambda m: "我的" if m.group("own") else "我", text)
        return (dropped,) if kept == dropped else (dropped, kept)
    return ()


def _disputed(by_id: Mapping[str, MemoryEntry], target_id: str, speaker: str) -> str | None:
    """The self-fact `speaker` would overrule by changing entry `target_id` (the entry
    itself, or the self-fact a claim on it disputes); None when the change is theirs to
    make: not a self-fact, or their own."""
    target = by_id.get(target_id)
    if target is None:
        return None
    owner = by_id.get(target.claim_on) if target.claim_on is not None else target
    if owner is None or not is_self_fact(owner) or same_speaker(owner.speaker, speaker):
        return None
    return owner.id


def as_claim(cand: Proposal, disputed: str) -> Proposal:
    """The candidate as its speaker's claim on the self-fact `disputed`: a belief, no
    surer than a belief is by default."""
    belief = DEFAULT_CONFIDENCE[MemoryClass.BELIEF]
    sure = belief if cand.confidence is None else min(cand.confidence, belief)
    return replace(cand, memory_class=MemoryClass.BELIEF, confidence=sure, claim_on=disputed)


def claim_contradictions(cand: Proposal, by_id: Mapping[str, MemoryEntry]) -> Proposal:
    """The candidate without the entries it names as contradicted that are another
    member's self-facts; naming one makes it a claim on the first such, unless the
    candidate is about its own speaker (another subject: it disputes nothing)."""
    speaker = cand.speaker
    if speaker is None or not cand.contradicts:
        return cand
    kept: list[str] = []
    disputed: str | None = None
    dropped = False
    for target in cand.contradicts:
        owner = _disputed(by_id, target, speaker)
        if owner is None:
            kept.append(target)
        elif other_subject(speaker, cand.content, by_id[owner]):
            dropped = True
        elif disputed is None:
            disputed = owner
    if disputed is None:
        return replace(cand, contradicts=tuple(kept)) if dropped else cand
    return as_claim(replace(cand, contradicts=tuple(kept)), disputed)


def ruled(
    cand: Proposal,
    restates: str | None,
    updates: str | None,
    by_id: Mapping[str, MemoryEntry],
) -> tuple[Proposal, str | None, str | None]:
    """(candidate, entry it restates, entry it updates) once the rule is applied: an
    update of another member's self-fact (or of a claim on one) is no update but a claim
    on that self-fact, added beside it."""
    speaker = cand.speaker
    if speaker is None or updates is None:
        return cand, restates, updates
    disputed = _disputed(by_id, updates, speaker)
    if disputed is None:
        return cand, restates, updates
    return as_claim(cand, disputed), restates, None


def refuted(by_id: Mapping[str, MemoryEntry], restated: str, cand: Proposal) -> list[str]:
    """The claims the candidate refutes by restating entry `restated`: when it is the
    candidate's speaker's own self-fact, every other member's claim on it."""
    speaker = cand.speaker
    entry = by_id.get(restated)
    if speaker is None or entry is None or not same_speaker(entry.speaker, speaker):
        return []
    if not is_self_fact(entry):
        return []
    return [
        e.id
        for e in by_id.values()
        if e.claim_on == restated and not same_speaker(e.speaker, speaker)
    ]


def shown(entry: MemoryEntry) -> str:
    """The entry as the model and search see it: a group member's entry says who said
    it, "(by Alice) my son is in grade 3", a claim "(claim by Bob) ..."; any other entry
    is its content."""
    if entry.speaker is None:
        return entry.content
    return labelled(entry.content, entry.speaker, claim=entry.claim_on is not None)


def claim_reply(speaker: str, chinese: bool) -> str:
    """What a member who asked to remember is told when it became their claim (the
    reply goes on with the text kept)."""
    if chinese:
        return f"已记为 {speaker} 的说法（不改变本人说过的事）："
    return f"Noted as a claim by {speaker} (it does not change what the person said): "
