"""Messages spoken to the memory, not about the world: a person's commands ("/new") and
explicit requests ("remember that …", "记住…", "forget …"), and the replies the chat engine
makes to them itself ("Got it, I'll remember: …", "好的，我记住了：…").

They are kept in the session's history (nothing said is lost) but are no evidence of
anything: the extractor learns nothing from them (the request was captured when it was
said), and search and recall never rank them, so a "remember that the staging server is
at 10.0.0.7" cannot outrank, or hide as a near-copy, the long-term entry it created.
Pure, and below the index (chunking reads archived conversations with it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory_core.base.patterns import LazyPattern

_ZH_REMEMBER = r"(?:请你?|帮我|麻烦你?|你?(?:一定)?要)?(?:记住|记一下|记下来?|别忘了)"
_EN_REMEMBER = r"(?:please\s+)?(?:remember|don['’]?t\s+forget)"
_CLAUSE_MARKS = ",，。.;；!！:：~～—\n"
# Every repeat below is bounded by a single character class that cannot run into the next
# one (a separator is one character, then only blanks), so a search stays linear even on
# a megabyte of commas: nested or adjacent greedy runs would make it quadratic.
_REMEMBER_THEN_WHAT = LazyPattern(
    rf"(?:^|[{_CLAUSE_MARKS}])[ \t]*"
    r"(?:(?:and|also|oh|ok|okay|btw|by the way|对了|另外|还有|顺便)[,，]?[ \t]*)?"
    rf"(?:{_ZH_REMEMBER}[:：,，]?|\b{_EN_REMEMBER}(?:[ \t]+(?:that|this))?(?<!forget)[:,]?(?=\s))"
    r"\s*(?P<what>\S.*)$",
    re.IGNORECASE | re.DOTALL,
)
"""'记住：…', '请记住…', 'please remember …', 'Oh, and remember that …': the memory follows."""
_REMEMBER_AT_END = LazyPattern(
    rf"(?:[{_CLAUSE_MARKS}]|(?=请|帮我|麻烦))[ \t]*"
    rf"(?:{_ZH_REMEMBER}(?:这一?(?:个|点|件事|条))?(?:哦|啊|吧|呀|哈)?"
    rf"|{_EN_REMEMBER}(?:[ \t]+(?:that|this|it))?(?:,?[ \t]*please)?)"
    r"[ \t。.!！~～]*$",
    re.IGNORECASE,
)
"""'…，请记住', '…, remember that', '… Please remember.': the memory comes first."""
EXPLICIT_FORGET = LazyPattern(
    r"^\s*(?:请|帮我)?(?:忘掉|忘记|删掉|别记)[:：,，\s]*(?P<zh>.+)$|^\s*(?:please\s+)?forget(?:\s+that|\s+about)?[:,\s]+(?P<en>.+)$",
    re.IGNORECASE | re.DOTALL,
)


_QUESTION_ENDS = ("?", "？", "吗", "了么", "了没", "了没有")
"""'记住了吗？', 'remember when we met?', 'X, remember that?': questions about memory, not
something to save."""
_TRAILING = " \t\r\n。.!！~～,，;；"


def explicit_request(text: str) -> tuple[str, str] | None:
    """('remember'|'forget', what) for explicit memory requests, else None.

    "Remember" is found wherever a clause asks for it: first ('记住：…', 'please remember
    …', '…; also remember that …') or last ('…，请记住', '…, remember that'), since people
    say it both ways and a request missed here would end up in the heuristic extractor as
    a raw line with the request still in it. Forget is taken only at the start: a stray
    'forget' in a sentence ('I will never forget this') must not delete anything.
    """
    stripped = text.strip()
    if not stripped:
        return None
    remember: str | None = None
    at_end = _REMEMBER_AT_END.search(stripped)
    if at_end is not None and at_end.start() > 0:
        remember = stripped[: at_end.start()]
    elif (first := _REMEMBER_THEN_WHAT.search(stripped)) is not None:
        remember = first.group("what")
    if remember is not None:
        what = remember.rstrip(_TRAILING)
        asks = stripped.rstrip(_TRAILING).endswith(_QUESTION_ENDS)
        # '好的，记住了' is "got it": an answer, not something to keep.
        if not what or what.startswith("了") or asks:
            return None
        return "remember", what
    forget = EXPLICIT_FORGET.match(stripped)
    if forget is not None:
        what = (forget.group("zh") or forget.group("en") or "").strip()
        if what:
            return "forget", what
    return None


REMEMBER_REPLIES = {
    "saved": ("好的，我记住了：", "Got it, I'll remember: "),
    "updated": ("已更新，替换了之前的那条：", "Updated; this replaces what I had: "),
    "reinforced": ("这条我之前就记得，已加强：", "I already knew that; reinforced: "),
}
"""`/remember`'s and "remember …"'s reply (Chinese, English) by what the capture kept
(`merge_values.Kept`'s values), followed by the entry's text."""
MODEL_DOWN_REPLIES = (
    "抱歉，模型暂时不可用，你的消息已保存。",
    "Sorry, the model is unavailable right now; your message is saved.",
)
"""The reply stored when the model fails mid-turn."""
OFFLINE_NOTICES = (
    "(offline) No language model is configured",
    "（离线模式）还没有配置语言模型",
)
"""How the offline notice starts: older sessions stored it as a reply."""
CANNED_REPLIES = (
    *(reply for pair in REMEMBER_REPLIES.values() for reply in pair),
    *MODEL_DOWN_REPLIES,
    *OFFLINE_NOTICES,
)
"""How every reply the chat engine writes itself (not the model) starts."""


def is_request(text: str) -> bool:
    """A command ("/new", "/search x") or an explicit remember/forget request."""
    stripped = text.strip()
    return stripped.startswith("/") or explicit_request(stripped) is not None


def is_canned_reply(text: str) -> bool:
    return text.lstrip().startswith(CANNED_REPLIES)


def evidence(turns: Iterable[tuple[bool, str]]) -> list[bool]:
    """For each turn of a conversation, in order, as (said by the bot, text): whether it
    is evidence, something search, recall and extraction may learn from. Not evidence: a
    person's request or command, every reply of the bot to it, and a reply the chat engine
    made itself (a confirmation, a notice; whoever it is attributed to)."""
    out: list[bool] = []
    answering = False
    for by_bot, text in turns:
        if not by_bot:
            answering = is_request(text)
        out.append(not answering and not is_canned_reply(text))
    return out
