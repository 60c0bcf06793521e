"""Pure: from a question (and the messages before it) to what recall ranks with.

A query is routed in layers: Layer 0 reads explicit requests and time references
(O(1), here: `find_time_reference` and `has_recall_intent`), Layer 1 matches keywords
(BM25 over these terms), Layer 2 maps the kind of question to how wide to retrieve and how
narrow to inject (`QueryType`, `BUDGETS`), Layer 3 is the semantic match (the dense half of
the hybrid ranking, when an embedder is installed).

Terms carry weights: the pending message's words count fully, the recent messages' words
much less (they name the topic, not the question), the words that named a time less still
(the window does their work). Words that only shape a question ("name", "first",
"remember", "时候", "来着") count half and never find a chunk alone (`Query.shaping`):
they are in too many turns to choose one, yet an answer often says them too ("her name
is…", "the first time…"). Which terms finally rank is decided by the index, by
informativeness (idf in the scope) times weight, not by position in the sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from functools import cache

from memory_core.base.answer_kind import AnswerKind, wanted_answer
from memory_core.base.text import has_cjk, tokenize
from memory_core.base.when import find_time_reference

__all__ = [
    "BUDGETS",
    "SHAPING_WEIGHT",
    "Query",
    "QueryBudget",
    "QueryType",
    "as_query",
    "asks_for_several",
    "build_query",
    "classify_query",
    "warm_up",
]

TIME_WORD_WEIGHT = 0.3
"""Weight of the words that named a time: the window does the work, but a summary
headed "February" should still match "february"."""
SHAPING_WEIGHT = 0.5
"""Weight of a word that only shapes the question (`Query.shaping`): it adds to a chunk
that holds the question's other words, never finds one alone."""
CONTEXT_WEIGHT = 0.3
"""Weight of a recent message's terms next to the pending message's (1.0); the newest
recent message has it, each older one 0.8 times the next."""
RECENT_MESSAGES = 5
MAX_QUERY_CHARS = 4000
"""A question is read from at most this many characters, its first and last halves
(terms, time, kind; its vector from fewer still, `vectors.EMBED_CHARS`): past that it is
a pasted document, whose every word the ranking would tokenize and weigh for 16 terms
(a 10 MB search took gigabytes). Recent messages are cut alike."""

_TEMPLATE_EN = """
remember recall recalled remind tell told say said saying mention mentioned talk talked
talking discuss discussed know knew think thought again ever kind sort type often time
times thing things something anything exactly actually please hey hi hello hmm okay ok
long much many name called last first happen happened happening get got go went
already still really guess wonder wondering sure right ask asked question
"""
_TEMPLATE_ZH = """
时候 什么时候 记得 还记得 记不记得 来着 说过 提过 聊过 讲过 告诉 问过 上次 之前 以前 知道 一下
到底 多久 几次 多少次 是不是 有没有 哪天 那天 叫 名字 啥 咋 一次 当时 几个 哪家 哪些 那家 曾
发生 干嘛 干什么 做什么 怎么回事 请问 帮 帮我 想想 回忆 提到 说 讲 聊 问 起来 呀 哈哈
"""
_BROAD = re.compile(
    r"\b(?:summar(?:ize|ise|y)|overview|recap|everything|all (?:the|my|of)|so far)\b"
    r"|总结|回顾|概括|所有|全部|都干了|都做了|都聊了|这段时间",
    re.IGNORECASE,
)
_TOPIC = re.compile(
    r"\b(?:what (?:kinds?|sorts?|types?) of|which \w+s\b|what \w+s (?:have|did|do)|what are my"
    r"|list|any (?:other|more)|hobbies|plans|ideas|options|things)\b"
    r"|哪些|有什么|有哪几|都有|什么样的|几种|清单|列表",
    re.IGNORECASE,
)


_SEVERAL = re.compile(
    # "What desserts has Maria made?", "Which cities has John been to?": a perfect tense
    # gathers what happened over time, unlike "what did she make at the party?"
    r"\b(?:what|which)\b(?:\s+[\w'-]+){0,4}?\s+(?:has|have)\b(?!\s+(?:to|got to)\b)"
    r"|\bhow many\b(?:\s+[\w'-]+){0,4}?\s+(?:has|have)\b|\bhow many times\b"
    # "What shelters does she volunteer at?": a plural asked for (not "kind of ... did")
    r"|\b(?:what|which)\s+(?:[\w-]+\s+)?[\w-]*[^\Wsu]s\s+(?:does|do|has|have|are|were)\b"
    r"|\bwhat are (?:the|some|my|his|her|their|\w+'s?)\b"
    r"|\bboth\b|\ball (?:the|my|of)\b|\bso far\b|\blately\b|\boverall\b|\ball told\b"
    r"|\bin total\b|\baltogether\b|\bsince\b"
    r"|哪些|哪几|都有|都[做干学买去花让]|一共|总共|加起来|前后|分别|各自|几次|多少次|这阵子"
    r"|这段时间|这几个月|这两个月|以来|到现在",
    re.IGNORECASE,
)
"""Questions whose answer is gathered from several moments: a list ("What X has Maria
done", "哪些"), a count over time ("how many times"), a change ("since", "到现在")."""


class QueryType(StrEnum):
    PRECISE = "precise"
    TOPIC = "topic"
    BROAD = "broad"


@dataclass(frozen=True, slots=True)
class QueryBudget:
    retrieve: int
    """Candidates ranked in full (BM25 and vectors)."""
    rerank: int
    """Kept for the context window, time and diversity steps."""
    final: int
    """At most this many injected; the token budget may stop earlier."""


BUDGETS: dict[QueryType, QueryBudget] = {
    # "Retrieve wide, inject narrow": candidates, ranked, injected, for each kind.
    QueryType.PRECISE: QueryBudget(15, 10, 8),
    QueryType.TOPIC: QueryBudget(25, 16, 13),
    QueryType.BROAD: QueryBudget(35, 25, 18),
}


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    terms: dict[str, float] = field(default_factory=dict)
    """Term → weight (1.0 for the question's own words)."""
    window: tuple[date, date] | None = None
    """Local dates the question names, inclusive."""
    kind: QueryType = QueryType.PRECISE
    answer: AnswerKind | None = None
    """The shape of answer the question wants (a date, a number, a name, a place)."""
    several: bool = False
    """Whether its answer is gathered from several moments (`asks_for_several`)."""
    shaping: frozenset[str] = frozenset()
    """Terms of words that only shape the question (weight `SHAPING_WEIGHT`): they score
    a chunk, but a chunk holding no other term of the query is no candidate."""

    @property
    def budget(self) -> QueryBudget:
        return BUDGETS[self.kind]


@cache
def _template_terms(chinese: bool) -> frozenset[str]:
    """The template words' terms; the Chinese ones only for a text that has CJK (the
    terms of any other text can hold none of them, and cutting them loads the
    tokenizer's dictionary)."""
    english = frozenset(t for w in _TEMPLATE_EN.split() for t in tokenize(w))
    if not chinese:
        return english
    words = _TEMPLATE_ZH.split()
    return english | frozenset(t for w in words for t in tokenize(w)) | frozenset(words)


def classify_query(text: str) -> QueryType:
    """Layer 2: the kind of question decides how wide to look."""
    if _BROAD.search(text):
        return QueryType.BROAD
    if _TOPIC.search(text):
        return QueryType.TOPIC
    return QueryType.PRECISE


def asks_for_several(text: str) -> bool:
    """Whether a question asks for what was said at several moments (a list, a count, a
    change over time) rather than for one fact: its evidence lies in several sessions."""
    return _SEVERAL.search(text) is not None


def _without_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(" ")
        last = end
    out.append(text[last:])
    return "".join(out)


def _split_terms(text: str) -> tuple[list[str], list[str]]:
    """The text's terms without the words that only shape a question, then those words'
    terms (each once): one tokenization for both."""
    template = _template_terms(has_cjk(text))
    content: list[str] = []
    shaping: dict[str, None] = {}
    for term in tokenize(text):
        if term in template:
            shaping[term] = None
        else:
            content.append(term)
    return content, list(shaping)


def content_terms(text: str) -> list[str]:
    """The text's terms without the words that only shape a question."""
    return _split_terms(text)[0]


def bounded(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """`text`, or its first and last `limit // 2` characters when it is longer: a long
    message's question is as often at its end as at its start."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n" + text[-half:]


def build_query(
    pending: str,
    recent: Sequence[str] = (),
    *,
    today: date | None = None,
    context_weight: float = CONTEXT_WEIGHT,
) -> Query:
    """The query of one recall: the pending message's terms, then the recent ones'
    (each read within `MAX_QUERY_CHARS`)."""
    pending = bounded(pending)
    reference = find_time_reference(pending, today) if today is not None else None
    lexical = _without_spans(pending, reference.spans) if reference else pending
    content, shaping = _split_terms(lexical)
    terms: dict[str, float] = dict.fromkeys(content, 1.0)
    if not terms:
        shaping = []  # shaping words only add to a question's own words
    for start, end in reference.spans if reference else ():
        for term in content_terms(pending[start:end]):
            terms.setdefault(term, TIME_WORD_WEIGHT)
    # Template terms: none of them is a content or a time word's term.
    terms.update(dict.fromkeys(shaping, SHAPING_WEIGHT))
    if not terms and reference is None:
        # A question made only of template words ("what did you say?") still searches.
        terms = dict.fromkeys(tokenize(pending), 1.0)
    weight = context_weight
    for message in reversed(list(recent)[-RECENT_MESSAGES:]):
        if weight <= 0:
            break
        for term in content_terms(bounded(message)):
            terms.setdefault(term, weight)
        weight *= 0.8
    return Query(
        text=pending,
        terms=terms,
        window=(reference.first, reference.last) if reference else None,
        kind=classify_query(pending),
        answer=wanted_answer(pending),
        several=asks_for_several(pending),
        shaping=frozenset(shaping),
    )


def as_query(query: str | Sequence[str] | Query, today: date) -> Query:
    """Text is read as a question; a list of words is taken as it is (all weight 1)."""
    if isinstance(query, Query):
        return query
    if isinstance(query, str):
        return build_query(query, today=today)
    text = bounded(" ".join(query))
    return Query(text=text, terms=dict.fromkeys(tokenize(text), 1.0))


WARM_QUESTIONS = (
    "上周五我们说了哪些关于公路旅行的事？",
    "What did Anna say about the road trip last week, and who came?",
)
"""One question of each script, read by `warm_up`: time words, templates, answer kinds,
several answers and compounds all compile or load on their first question."""


def warm_up() -> None:
    """Read a question of each script now (blocking: a worker thread's), so a serving
    process's first question does not compile the rules of reading one (~20 ms of
    patterns) nor load the compound list."""
    for question in WARM_QUESTIONS:
        build_query(question, today=date(2000, 1, 1))
