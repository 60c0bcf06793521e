"""Turning a finished conversation into memory candidates.

With a model: one call that sees the conversation and a one-line summary of the top 50
existing Active memories, and answers a JSON array of {content, category, importance,
matches?, contradicts?, expires_at?}. Without one: a heuristic that picks clear statements
of preference, identity, decision and todo in Chinese and English. Either way the result
goes through the same pure merge.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_core.base.clock import parse_when
from memory_core.base.entries import CATEGORIES, Importance, MemoryClass, MemoryEntry, sort_entries
from memory_core.base.inputs import is_storable
from memory_core.base.merge_values import Proposal
from memory_core.base.patterns import LazyPattern
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.base.text import estimate_tokens
from memory_core.llm.client import LLMClient, Message
from memory_core.llm.prompts import load_prompt
from memory_core.longterm.scoring import Status, status_of

log = logging.getLogger(__name__)

SUMMARY_ENTRIES = 50
CONVERSATION_TOKENS = 8000
MIN_USER_CHARS = 4
"""Below this many non-space characters from the user ("ok", "嗯", "谢谢") nothing is
worth a model call (the heuristic skips sentences this short too)."""

EXTRACT_PROMPT = load_prompt("extract")


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    role: str
    text: str
    speaker: str = ""
    """The group member who said a user line ('' outside group scopes): the model is
    shown it, and the memory is theirs (longterm/claims.py)."""


SPEAKERS_NOTE = (
    "\n\n群聊：多人发言，每行 `user (名字)` 标出说话人。"
    "Several people speak; each user line names its speaker. 为每条记忆加上 "
    "speaker：说出它的人的名字 / give each memory a `speaker`: the name of who said it. "
    "内容里写人名，不写“用户” / in the content, name the person, not 'the user'."
)
"""Added to the extraction prompt when the conversation has several speakers."""


def existing_summary(
    entries: Sequence[MemoryEntry],
    policy: ScoringPolicy = DEFAULT_POLICY,
    limit: int = SUMMARY_ENTRIES,
) -> str:
    """'[id] content' lines of the top Active entries (score ≥ the archive line)."""
    active = [e for e in entries if status_of(e, policy) is Status.ACTIVE]
    lines = [f"[{e.id}] {' '.join(e.content.split())}" for e in sort_entries(active)[:limit]]
    return "\n".join(lines) or "（无 / none）"


def render_conversation(
    lines: Sequence[TranscriptLine], max_tokens: int = CONVERSATION_TOKENS
) -> str:
    """Newest lines win when the conversation is longer than the budget."""
    kept: list[str] = []
    budget = max_tokens
    for line in reversed(lines):
        who = f"{line.role} ({line.speaker})" if line.speaker else line.role
        rendered = f"{who}: {line.text}"
        cost = estimate_tokens(rendered)
        if cost > budget:
            break
        kept.append(rendered)
        budget -= cost
    return "\n".join(reversed(kept))


def build_extraction_messages(
    lines: Sequence[TranscriptLine],
    entries: Sequence[MemoryEntry],
    now: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
) -> list[Message]:
    prompt = EXTRACT_PROMPT.format(
        existing=existing_summary(entries, policy),
        now=now.isoformat(),
        conversation=render_conversation(lines),
    )
    if speakers_of(lines):
        prompt += SPEAKERS_NOTE
    return [
        {"role": "system", "content": "You extract long-term memories and answer only JSON."},
        {"role": "user", "content": prompt},
    ]


_EXTRACTED_CLASSES = {
    kind.value: kind for kind in (MemoryClass.FACT, MemoryClass.BELIEF, MemoryClass.EVENT)
}
"""The classes a conversation can yield; summaries come from consolidation only."""


def _confidence(value: object) -> float | None:
    """A number in [0, 1], or None: a missing or nonsensical value must not count as sure."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0.0 <= value <= 1.0:
        return None
    return round(float(value), 4)


def speakers_of(lines: Sequence[TranscriptLine]) -> tuple[str, ...]:
    """The speakers of the user lines, in order of first appearance."""
    return tuple(dict.fromkeys(line.speaker for line in lines if line.speaker))


def _speaker(value: object, speakers: Sequence[str]) -> str | None:
    """The speaker the model named, if it is one of the conversation's (case aside);
    the only one when there is one; else None (no speaker: no member's fact)."""
    if isinstance(value, str):
        folded = value.strip().casefold()
        for speaker in speakers:
            if speaker.casefold() == folded:
                return speaker
    return speakers[0] if len(speakers) == 1 else None


def candidates_from_json(
    data: Any, known_ids: Iterable[str] = (), speakers: Sequence[str] = ()
) -> list[Proposal]:
    """Validate the model's array item by item; a bad item is skipped, not fatal. In a
    group (`speakers`), each item's `speaker` must name one of them."""
    if isinstance(data, dict):
        data = data.get("memories") or data.get("items") or []
    if not isinstance(data, list):
        return []
    known = set(known_ids)
    out: list[Proposal] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if not isinstance(content, str) or not content.strip() or not is_storable(content):
            continue  # a lone surrogate (`"\ud800"` in the JSON) cannot be written
        category = item.get("category")
        if category not in CATEGORIES:
            category = "fact"
        try:
            importance = Importance(str(item.get("importance", "medium")).lower())
        except ValueError:
            importance = Importance.MEDIUM
        matches = item.get("matches")
        contradicts = item.get("contradicts") or []
        if isinstance(contradicts, str):
            contradicts = [contradicts]
        expires_at = None
        if isinstance(item.get("expires_at"), str):
            try:
                expires_at = parse_when(item["expires_at"])
            except ValueError:
                expires_at = None
        out.append(
            Proposal(
                content=content.strip(),
                category=str(category),
                importance=importance,
                matches=matches if isinstance(matches, str) and matches in known else None,
                contradicts=tuple(c for c in contradicts if isinstance(c, str) and c in known),
                expires_at=expires_at if category == "todo" else None,
                confidence=_confidence(item.get("confidence")),
                memory_class=_EXTRACTED_CLASSES.get(str(item.get("memory_class", "")).lower()),
                speaker=_speaker(item.get("speaker"), speakers) if speakers else None,
            )
        )
    return out


async def extract_with_llm(
    llm: LLMClient,
    lines: Sequence[TranscriptLine],
    entries: Sequence[MemoryEntry],
    now: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
) -> list[Proposal]:
    """One model call; raises LLMError when the model cannot be reached (caller retries).
    An empty or very short conversation (the user said almost nothing) costs no call."""
    said = "".join("".join(line.text.split()) for line in lines if line.role == "user")
    if len(said) < MIN_USER_CHARS:
        return []
    data = await llm.complete_json(build_extraction_messages(lines, entries, now, policy))
    return candidates_from_json(data, (e.id for e in entries), speakers_of(lines))


# --- the offline extractor -------------------------------------------------------------

_ZH_OFTEN = (
    r"(?:每天|每日|每晚|每早|每周|每星期|每礼拜|每个?(?:月|周末|星期|礼拜|工作日)|每年|天天|"
    r"经常|常常|通常|平时|平常|总是|每隔)"
)
"""How often, in Chinese: the words that make a statement a habit."""
_EN_OFTEN = (
    r"(?:(?:every|each)\s+(?:other\s+)?(?:day|morning|afternoon|evening|night|week|weekend|"
    r"month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b|"
    r"(?:daily|weekly|nightly|monthly)\b|(?:once|twice|\d+\s+times)\s+a\s+(?:day|week|month)\b)"
)
"""How often, in English: 'every morning', 'each Friday', 'daily', 'twice a week'."""

_RULES: list[tuple[LazyPattern, str, Importance]] = [
    (
        LazyPattern(
            r"^(?:我|本人)(?:比较|很|最|特别|更)?(?:喜欢|爱|偏好|习惯|讨厌|不喜欢|不爱|受不了)"
        ),
        "preference",
        Importance.MEDIUM,
    ),
    (
        LazyPattern(
            r"^(?:我|本人)(?:叫|是|姓|住在|在.{1,10}(?:工作|上班|上学)|来自|的(?:名字|生日|工作|职业|公司|邮箱))"
        ),
        "fact",
        Importance.MEDIUM,
    ),
    (
        LazyPattern(r"^(?:我们|我)(?:决定|定了|选择|打算用|最终用|改用)"),
        "decision",
        Importance.HIGH,
    ),
    (
        LazyPattern(
            r"^(?:我|我们)?(?:明天|下周|下个月|周[一二三四五六日末]|月底|今晚|后天)?(?:要|得|需要|记得)(?:去|做|准备|交|提交|完成|开|买|参加)"
        ),
        "todo",
        Importance.MEDIUM,
    ),
    (LazyPattern(r"^(?:我|本人)(?:对.{1,10}过敏|不吃|不能吃|吃素)"), "fact", Importance.HIGH),
    (
        LazyPattern(
            r"^i\s+(?:really\s+|much\s+|always\s+)?(?:prefer|like|love|hate|dislike|enjoy|can't stand)\b",
            re.I,
        ),
        "preference",
        Importance.MEDIUM,
    ),
    (
        LazyPattern(
            r"^(?:my\s+(?:name|birthday|email|job|company|wife|husband|son|daughter|team)\b|i\s+(?:am|work|live)\b|i'm\s+(?:a|an|from|based)\b)",
            re.I,
        ),
        "fact",
        Importance.MEDIUM,
    ),
    (
        LazyPattern(r"^(?:we|i)\s+(?:decided|chose|settled on|will use|are going with)\b", re.I),
        "decision",
        Importance.HIGH,
    ),
    (
        LazyPattern(
            r"^(?:i|we)\s+(?:need to|have to|must|should|will)\b.*\b(?:tomorrow|next week|by|before|on (?:mon|tue|wed|thu|fri|sat|sun))",
            re.I,
        ),
        "todo",
        Importance.MEDIUM,
    ),
    (LazyPattern(r"^i(?:'m| am)\s+allergic\b", re.I), "fact", Importance.HIGH),
    # Habits and routines: what a person does every day, week or usually ("我每天早上跑步五
    # 公里", "I swim every Wednesday"). Each run is bounded, so a sentence is read in one pass.
    (
        LazyPattern(
            rf"^(?:我们|我|本人)[^，,。；;]{{0,6}}?{_ZH_OFTEN}"
            rf"|^{_ZH_OFTEN}[^，,。；;]{{0,8}}?(?:我们|我)"
        ),
        "fact",
        Importance.MEDIUM,
    ),
    (
        LazyPattern(
            r"^(?:i|we)\s+(?:usually|always|often|normally|regularly|typically|habitually)\b"
            rf"|^(?:i|we)\b[^.!?;]{{0,80}}?\b{_EN_OFTEN}"
            rf"|^{_EN_OFTEN}[^.!?;]{{0,20}}?\b(?:i|we)\b",
            re.I,
        ),
        "fact",
        Importance.MEDIUM,
    ),
]
_SENTENCE = LazyPattern(r"[^。！？!?\n.;；]+[。！？!?.;；]?")
_SKIP = LazyPattern(r"[?？吗]\s*$|^(?:你|您|can you|could you|what|how|why|do you)", re.I)


def heuristic_candidates(lines: Sequence[TranscriptLine]) -> list[Proposal]:
    """Clear first-person statements of the user, one candidate per matching sentence
    (its speaker's, in a group)."""
    out: list[Proposal] = []
    seen: set[str] = set()
    for line in lines:
        if line.role != "user":
            continue
        for match in _SENTENCE.finditer(line.text):
            sentence = match.group().strip().rstrip("。.;；")
            if len(sentence) < 4 or _SKIP.search(sentence):
                continue
            for pattern, category, importance in _RULES:
                if pattern.search(sentence):
                    key = f"{line.speaker}\n{sentence.casefold()}"
                    if key not in seen:
                        seen.add(key)
                        out.append(
                            Proposal(
                                content=sentence,
                                category=category,
                                importance=importance,
                                speaker=line.speaker or None,
                            )
                        )
                    break
    return out
