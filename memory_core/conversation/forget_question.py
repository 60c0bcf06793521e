"""A forget request in the chat: the question listing what it would forget, and its answer.

`/forget WHAT` (or "forget …" said in the chat) is not done at once: the long-term
entries it means are listed in a question, and the scope's next message answers it ("yes",
or the numbers of the ones to forget). Any other answer, or one after `FORGET_TTL`, drops
the question and is an ordinary turn. Neither the question nor its answer is stored as a
message (`chat.py` says why). The chat engine asks and answers under the scope's lock; the
choice of entries and the wording are pure functions here.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from memory_core.base.chunks import ChunkKind
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import ChatmemError, EntryNotFound
from memory_core.base.records import Hit
from memory_core.base.scope import ScopeKey
from memory_core.base.text import tokenize
from memory_core.base.wording import counted
from memory_core.longterm.matching import same_memory
from memory_core.memory_service import MemoryService
from memory_core.recall.request import SearchRequest

CONFIRM_WORDS = frozenset(
    {
        "yes", "y", "ok", "okay", "sure", "confirm", "all",
        "是", "是的", "好", "好的", "确认", "对", "嗯", "全部",
    }
)  # fmt: skip
FORGET_TTL = timedelta(minutes=10)
FORGET_SEARCH_LIMIT = 10
"""Long-term hits a forget request looks at; every duplicate of a picked one joins it."""
_NUMBERS = re.compile(r"^\s*\d+(?:\s*(?:[,，、;；\s]|and|和)\s*\d+)*\s*$", re.IGNORECASE)


@dataclass(slots=True)
class _PendingForget:
    entries: list[tuple[str, str]]
    """(id, content) of each entry the question listed, in its numbering."""
    asked_at: datetime


class ForgetQuestions:
    """The forget question each scope has open (one at most), asked and answered."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory
        self._pending: dict[str, _PendingForget] = {}

    async def ask(self, scope: ScopeKey, what: str, chinese: bool) -> str:
        """The question listing the memories about `what` (kept open for the next
        message), or the reply that there are none."""
        if not what:
            raise ChatmemError("say what to forget")
        hits = await self.memory.finder.search(
            scope,
            SearchRequest(
                what, limit=FORGET_SEARCH_LIMIT, kinds=[ChunkKind.LONG_TERM], min_score=0.0
            ),
        )
        entries = await self.memory.long_term.entries(scope)
        # Comparing every entry with the picked ones is CPU work that grows with the scope.
        targets = await asyncio.to_thread(forget_targets, what, hits, entries)
        if not targets:
            return (
                f"没有找到关于「{what}」的记忆。"
                if chinese
                else f"I found no memory about “{what}”."
            )
        self._pending[scope.value] = _PendingForget(
            [(e.id, e.content) for e in targets], self.memory.now()
        )
        return forget_question(targets, chinese)

    async def answer(self, scope: ScopeKey, text: str, chinese: bool) -> str | None:
        """The reply to a forget question, or None: any other answer (or a late one)
        drops the question and is an ordinary turn."""
        pending = self._pending.pop(scope.value, None)
        if pending is None or self.memory.now() - pending.asked_at > FORGET_TTL:
            return None
        chosen = chosen_entries(pending.entries, text)
        if not chosen:
            return None
        forgotten: list[str] = []
        for entry_id, content in chosen:
            try:
                await self.memory.long_term.forget(scope, entry_id, source="explicit")
            except EntryNotFound:
                continue  # forgotten meanwhile (another chat, a person, decay)
            forgotten.append(content)
        return forgotten_reply(forgotten, chinese)


def forget_targets(
    what: str, hits: Sequence[Hit], entries: Sequence[MemoryEntry]
) -> list[MemoryEntry]:
    """The entries a forget request means, in hit order, then the duplicates of each.

    The hits that hold every word of the request (a request names its memory, "forget my
    old phone number"); if none does, the best hit alone (the question shows it, so a
    loose match costs a "no"). Then every entry a merge would fold into one of those
    (`same_memory`): forgetting a fact and keeping its copy would forget nothing.
    """
    by_id = {e.id: e for e in entries}
    found = list({h.ref: by_id[h.ref] for h in hits if h.ref in by_id}.values())
    words = set(tokenize(what))
    picked = [e for e in found if words <= set(tokenize(e.content))] or found[:1]
    chosen = {e.id for e in picked}
    duplicates = [
        e for e in entries if e.id not in chosen and any(same_memory(e, p) for p in picked)
    ]
    return picked + duplicates


def forget_question(targets: Sequence[MemoryEntry], chinese: bool) -> str:
    """The question listing `targets` (numbered when there are several)."""
    if len(targets) == 1:
        [only] = targets
        if chinese:
            return f"要忘掉这条记忆吗？[{only.id}] {only.content}\n回复「确认」忘掉它。"
        return f"Forget this memory? [{only.id}] {only.content}\nReply “yes” to forget it."
    listed = "\n".join(f"{n}. [{e.id}] {e.content}" for n, e in enumerate(targets, start=1))
    if chinese:
        return (
            f"要忘掉这 {len(targets)} 条记忆吗？\n{listed}\n"
            "回复「确认」全部忘掉，或回复要忘掉的编号（如「1 3」）。"
        )
    return (
        f"Forget these {counted(len(targets), 'memory')}?\n{listed}\n"
        "Reply “yes” to forget them all, or the numbers of the ones to forget (e.g. “1 3”)."
    )


def chosen_entries(asked: list[tuple[str, str]], text: str) -> list[tuple[str, str]]:
    """The entries of the question (`asked`, in its numbering) that `text` picks: all on a
    confirmation word, the numbered ones on a list of numbers; none on anything else."""
    answer = text.strip().strip("!.。！").lower()
    if answer in CONFIRM_WORDS:
        return asked
    if _NUMBERS.match(answer):
        numbers = {int(n) for n in re.findall(r"\d+", answer)}
        return [e for n, e in enumerate(asked, start=1) if n in numbers]
    return []


def forgotten_reply(forgotten: Sequence[str], chinese: bool) -> str:
    """The reply naming what was forgotten (the contents), or saying it was gone already."""
    if not forgotten:
        return "那条记忆已经不在了。" if chinese else "That memory is already gone."
    if len(forgotten) == 1:
        return f"已忘掉：{forgotten[0]}" if chinese else f"Forgotten: {forgotten[0]}"
    listed = "\n".join(f"- {content}" for content in forgotten)
    if chinese:
        return f"已忘掉 {len(forgotten)} 条记忆：\n{listed}"
    return f"Forgot {counted(len(forgotten), 'memory')}:\n{listed}"
