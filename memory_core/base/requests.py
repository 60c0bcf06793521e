"""Messages spoken to the memory, not about the world: a person's commands ("/new") and
explicit requests ("remember that …", "记住…", "forget …"), and the replies the chat engine
makes to them itself ("Got it, I'll remember: …", "好的，我记住了：…").

A request is an imperative addressed to the bot, at the start of a message ("remember that
…", "please remember …", "记住：…", "帮我记一下…", "/remember …", after at most a short
lead-in such as "ok," or "对了，"), or a polite closing clause ("…，请记住", "…. Please
remember."). "Remember" inside a sentence is talk between people ("C'mon, remember how
great you are!", "I remember when…", "Remember, it takes time", "…, remember that."): taken
for a request, such a message got a canned "Got it, I'll remember" and no search entry.
A request missed here loses nothing: the turn is indexed and the extractor learns from it.

Every stored turn a person said is indexed (`searchable`), a request included: "remember
that my dentist is on Friday" stays findable as a turn; the entry it made ranks above it
(`rerank.entries_over_turns`). Not indexed: commands, forget requests (older versions
stored them; indexed, they kept the text to forget findable), and the bot's replies to them
and its canned replies. The extractor learns from less (`evidence`): a remember request was
captured when it was said, and learnt again it came back as a second entry ("我喜欢乌龙茶，
请记住" beside "我喜欢乌龙茶"). Pure, and below the index (chunking reads archived
conversations with it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from memory_core.base.patterns import LazyPattern

_LEAD_IN = (
    r"(?:(?:and|also|oh|ok|okay|so|btw|by the way|one more thing|对了|另外|还有|顺便|"
    r"好的|好|嗯|哦|了解|明白|收到)(?![A-Za-z])[ \t]*[,，、.。!！]?[ \t]*){0,2}"
)
"""At most two short words before the imperative ("Oh, and remember …", "对了，记住…")."""
_EN_START = LazyPattern(
    rf"^{_LEAD_IN}(?:(?P<polite>please)[ \t]+)?(?P<verb>remember|don['’]?t[ \t]+forget)\b"
    r"(?:[ \t]+(?P<that>that|this)\b)?[ \t]*(?P<sep>[:：,，]|-|—)?\s*(?P<what>\S.*)?$",
    re.IGNORECASE | re.DOTALL,
)
"""'remember that …', 'Please remember: …', 'Oh, and remember …', "don't forget that …"."""
_ZH_START = LazyPattern(
    rf"^{_LEAD_IN}(?P<polite>请你?|帮我|麻烦你?)?(?P<verb>记住|记一下|记下来?|别忘了)"
    r"(?P<sep>[:：,，])?[ \t]*(?P<what>\S.*)?$",
    re.IGNORECASE | re.DOTALL,
)
"""'记住：…', '请记住…', '帮我记一下，…', '对了，记住…', '别忘了我…'."""
_COMMAND = LazyPattern(r"^/remember(?:@\S+)?\s+(?P<what>\S.*)$", re.IGNORECASE | re.DOTALL)
"""'/remember …' typed into a chat that passes it on as a message."""
_CLAUSE_MARKS = ",，。.;；!！:：~～—\n"
# Each pattern below starts at one separator and then needs a literal word, so a search
# stays linear even on a megabyte of commas (nested or adjacent greedy runs would not).
_ZH_AT_END = LazyPattern(
    rf"(?:[{_CLAUSE_MARKS}]|(?=请|帮我|麻烦))[ \t]*"
    r"(?:(?:请你?|帮我|麻烦你?)(?:记住|记一下|记下来?)|记一下|记下来)"
    r"(?:这一?(?:个|点|件事|条))?(?:哦|啊|吧|呀|哈)?[ \t。.!！~～]*$"
)
"""'…，请记住', '…，帮我记一下', '…，记下来': polite, or a note taker's verb."""
_EN_AT_END = LazyPattern(
    rf"[{_CLAUSE_MARKS}][ \t]*(?:please[ \t]+remember(?:[ \t]+(?:that|this|it))?"
    r"|remember(?:[ \t]+(?:that|this|it))?,?[ \t]*please)[ \t.!~]*$",
    re.IGNORECASE,
)
"""'…. Please remember.', '…, please remember that', '…, remember this, please'."""
_NOT_A_FACT = LazyPattern(
    r"^(?:when|how|what|why|where|who|whom|whose|which|if|whether|to|me|him|her|us|them|"
    r"you|it|those|these|back|the (?:time|day|night|moment|first|last)|"
    r"(?:time|day|night|moment|trip|one|guy|girl)\b)\b",
    re.IGNORECASE,
)
"""What follows "remember" when it recalls or tells someone to act, not a fact to keep:
'remember when …', 'remember how great you are', 'remember to buy milk', 'remember me?'."""
_ZH_NOT_A_FACT = ("了", "要", "吗", "啊", "哦", "呀")
"""'记住了' ("got it"), '记住要…' ("remember to …": an action), '记住吗'."""
_ZH_THIS = LazyPattern(r"这一?(?:个|点|件事|条)?(?:就好|哦|啊|吧)?")
"""'记住这一点！' alone names nothing to keep."""
_ZH_SUBJECTS = ("我", "咱", "他", "她", "它", "你")
"""'别忘了' is a request about a fact ('别忘了我不吃辣') when a person is its subject; before a
verb it is a reminder to act ('别忘了带伞')."""
EXPLICIT_FORGET = LazyPattern(
    r"^\s*(?:请|帮我)?(?:忘掉|忘记|删掉|别记)[:：,，\s]*(?P<zh>.+)$|^\s*(?:please\s+)?forget(?:\s+that|\s+about)?[:,\s]+(?P<en>.+)$",
    re.IGNORECASE | re.DOTALL,
)


_QUESTION_ENDS = ("?", "？", "吗", "么", "了没", "了没有")
"""'记住了吗？', 'remember when we met?', 'X, remember that?': questions about memory, not
something to save."""
_TRAILING = " \t\r\n。.!！~～,，;；"
_SENTENCE_END = re.compile(r"[!?！？。\n]|\.(?=\s|$)")


def _asks(text: str) -> bool:
    """Whether the first sentence of `text`, or all of it, is a question."""
    end = _SENTENCE_END.search(text)
    first = text[: end.end()] if end else text
    return any(part.rstrip(_TRAILING).endswith(_QUESTION_ENDS) for part in (first, text))


def _remembered_at_start(text: str) -> str | None:
    """What an imperative at the start of `text` asks to keep; None if it asks nothing."""
    if (command := _COMMAND.match(text)) is not None:
        return command.group("what")
    if (en := _EN_START.match(text)) is not None:
        what = en.group("what") or ""
        if en.group("sep") in (",", "，") and not en.group("polite"):
            return None  # "Remember, it takes time": advice, said to people
        if en.group("that") == "this" and not en.group("sep"):
            return None  # "Remember this photo?"
        if not en.group("sep") and _NOT_A_FACT.match(what):
            return None
        return what
    if (zh := _ZH_START.match(text)) is not None:
        what, verb = zh.group("what") or "", zh.group("verb")
        if what.startswith(_ZH_NOT_A_FACT) or _ZH_THIS.fullmatch(what.rstrip(_TRAILING)):
            return None
        if verb == "记住" and zh.group("sep") in (",", "，") and not zh.group("polite"):
            return None  # "记住，坚持就是胜利": advice, as "Remember, …"
        if verb == "别忘了" and not zh.group("sep") and not what.startswith(_ZH_SUBJECTS):
            return None
        return what
    return None


def _remembered_at_end(text: str) -> str | None:
    """What comes before a polite closing "请记住" / "Please remember."; None without one."""
    for pattern in (_ZH_AT_END, _EN_AT_END):
        found = pattern.search(text)
        if found is not None and found.start() > 0:
            return text[: found.start()]
    return None


def explicit_request(text: str) -> tuple[str, str] | None:
    """('remember'|'forget', what) for an explicit memory request addressed to the bot,
    else None (the module's docstring says which). Forget is taken only at the start: a
    stray 'forget' in a sentence ('I will never forget this') must not delete anything."""
    stripped = text.strip()
    if not stripped:
        return None
    remember = _remembered_at_end(stripped)
    if remember is None:
        remember = _remembered_at_start(stripped)
    if remember is not None:
        what = remember.rstrip(_TRAILING)
        if not what or _asks(what) or _asks(stripped):
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


def is_command(text: str) -> bool:
    """A command typed as a message ("/new", "/search x", "/frobnicate")."""
    return text.lstrip().startswith("/")


def is_canned_reply(text: str) -> bool:
    return text.lstrip().startswith(CANNED_REPLIES)


def _said(turns: Iterable[tuple[bool, str]]) -> Iterator[tuple[str | None, bool]]:
    """For each turn: what the person's last message was ('remember', 'forget', 'command'
    or None for talk), which a reply of the bot answers, and whether the turn is canned."""
    answering: str | None = None
    for by_bot, text in turns:
        if not by_bot:
            request = explicit_request(text)
            if request is not None:
                answering = request[0]
            else:
                answering = "command" if is_command(text) else None
        yield answering, is_canned_reply(text)


def searchable(turns: Iterable[tuple[bool, str]]) -> list[bool]:
    """For each turn of a conversation, in order, as (said by the bot, text): whether
    search and recall may rank it. Every turn but a command, a forget request, the bot's
    replies to those and a reply the chat engine made itself (a confirmation, a notice;
    whoever it is attributed to). A "remember that …" is searchable."""
    return [
        not canned and answering not in ("command", "forget") for answering, canned in _said(turns)
    ]


def evidence(turns: Iterable[tuple[bool, str]]) -> list[bool]:
    """`searchable`, less what the extractor must not learn from again: a remember request
    (captured when it was said) and the bot's replies to it."""
    return [not canned and answering is None for answering, canned in _said(turns)]
