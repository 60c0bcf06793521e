"""Seeded, realistic bilingual chat-memory text for the benches.

A handful of template slot words makes every word occur in several per cent of all
chunks, which no real chat history does, and it flatters or punishes a BM25 index in
ways real data would not.  Here the frames are filled from large vocabularies sampled by
real word frequencies:

* Chinese nouns, verbs, adjectives, places, organisations and time words from jieba's
  dictionary (`dict.txt`: `word freq pos`), sampled proportionally to `freq ** 0.8`;
* English words counted in the prose (docstrings and comments) of Python's standard
  library, sampled by their counts, plus a short list of everyday chat words with a Zipf
  (1/rank) profile, so English is not only about programming;
* generated people's names (Chinese full names and nicknames, English first names),
  numbers, prices, dates and times, product and tech names, version numbers, ticket and
  PR numbers, commit hashes, code identifiers and file paths.

Chunks are 20-120 characters, like daily notes, memories or chat messages: about half
Chinese, a quarter English and a quarter mixed.  Everything is a pure function of the
seed (and of the two word sources shipped with jieba and Python).

Exports: `sentences`, `queries` (and `query_targets`, the same queries
with the index of the sentence each was made from), `memory_entries`.

Run `python bench/corpus.py [--quick]` to print vocabulary statistics.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus_words import Rng, Slot, Slots, en_vocab, lognormal_int, zh_vocab

from memory_core.base import text as mtext
from memory_core.base.entries import CATEGORIES, ArchiveReason, MemoryEntry

SEED = 20260601
MIN_CHARS = 20
MAX_CHARS = 120


# ---------------------------------------------------------------------------
# Frames


ZH_FRAMES = [
    "{who}{v}{n}",
    "{who}在{ns}{v}{n}",
    "{t}{who}{v}了{n}",
    "{who}的{n}很{a}",
    "{n}已经{v}了",
    "{who}和{nr}{v}了{n}",
    "{who}{v}的{n}是{n}",
    "{who}{think}{n}太{a}",
    "把{n}{v}给{nr}",
    "{who}要{v}{n}和{n}",
    "{nr}{say}{n}比较{a}",
    "{ns}的{n}{a}",
    "{who}{plan}{v}{n}",
    "{who}{plan}{t}{go}{ns}",
    "{who}对{n}{react}",
    "{who}{like}{n}",
    "{who}{dislike}{n}",
    "{nr}的{event}是{date}",
    "{date}{v}{n}",
    "{wd}{clock}{v}{n}",
    "{who}{buy}{n}，{price}",
    "{nt}{v}了{n}",
    "{n}的{n}{v}了",
    "{who}{recent}{v}{n}",
    "{who}每天{v}{num}分钟{n}",
    "{nr}{like}{n}",
    "{remind}{v}{n}",
    "{who}在{v}{n}的{n}",
    "{n}和{n}都{a}",
    "{who}从{ns}{v}回来了",
    "{nr}和{nr}{v}{n}",
    "{who}还没{v}{n}",
    "{n}{v}至{t}",
    "{who}{recent}{a}地{v}了{n}",
    "{t}的{n}{v}",
    "关于{n}，{nr}{say}要{v}",
    "{who}{use}{product}{v}{n}",
    "{num}个{n}{v}了",
    "{who}被{n}{v}了",
    "{recent}在{ns}{v}{n}",
    "{n}的{n}{think}{a}",
    "{who}{say}{n}",
    "{who}的{n}在{ns}",
    "{nr}{plan}{v}{n}",
    "{who}{recent}{buy}{product}",
    "{n}{a}，{n}{a}",
    "{nt}的{nr}{v}了{n}",
    "{who}{think}{nr}{a}",
    "{who}{go}{ns}{v}{n}",
    "{remind}{who}{date}{v}{n}",
]

EN_FRAMES = [
    "{name} {en_say} the {w} should be {w} before {wday}.",
    "Remember that {name} {en_like} {w} more than {w}.",
    "I {en_need} {en_do} the {w} {w} by {date_en}.",
    "We moved the {w} service from {tech} to {tech} last {wday}.",
    "{ticket}: {w} {w} fails when the {w} is empty.",
    "My {rel} is allergic to {w}.",
    "{name} about the {w} {w} at {clock}.",
    "{name} wants a new {w}, budget around {usd}.",
    "Bug in {ident}(): returns the {w} instead of the {w}.",
    "Upgraded {tech} to {version} and the {w} tests broke.",
    "Table for {num} at {W} {W} on {date_en}.",
    "Reading about {w} and {w}, {name} {en_say} it was {w}.",
    "{name} {en_like} {tech} for {w} work.",
    "Don't use {tech} for new {w} services.",
    "Flight to {W} on {date_en}, bring the {w}.",
    "The {w} config lives in {path}.",
    "{name} ({handle}) owns the {w} {w} now.",
    "Fixed the {w} regression in {sha}, see PR {pr}.",
    "Call {name} back about the {w} before {wday}.",
    "{W} {w} moved to {wday} {clock}.",
    "{name}'s {w} costs {usd}.",
    "Running {tech} {w} takes {num} minutes.",
    "Tried {product} for {w}, not sure it is {w}.",
    "{en_do} the {w} {w} before {date_en}.",
    "{W} {w} is {w} again.",
    "{name} {en_need} {en_do} {ident}.",
    "Notes on {w}: {w} {w}, {w} {w}.",
    "{W} and {w} for {name}.",
    "{name} {en_like} {w} {w}.",
    "{num} {w} {w} left in the {w}.",
    "Ask {name} whether the {w} {w} is {w}.",
    "{W} {w} {w} on {wday}.",
    "Kid's {w} {w} is on {date_en}.",
    "{tech} {version}: {w} {w} works now.",
]

MIXED_FRAMES = [
    "{nr}{say} {tech} 的{n}有点{a}",
    "{use} {tech} 做{n}，{ident} 要改",
    "{who}在{ns}{buy} {product}",
    "PR {pr} {fixed}{n}，{nr} review 过了",
    "{date} {nr} {say} {w} {w}",
    "{t}把 {path} {inside} {w} 改成 {w}",
    "{ticket} 还没关，{nr}在{track}{n}",
    "升级到 {tech} {version} 之后{n}{v}了",
    "{who}的 GitHub 是 {handle}",
    "{n}从 {tech} {migrate} {tech}",
    "{nr} {use} {product} 记{n}",
    "{wd}的 {w} meeting 挪到{clock}",
    "{who}{like} {tech}",
    "{name} 下{wd}来{ns}，要安排{n}",
    "commit {sha} 引入了{n}",
    "{who}{plan}学 {tech}，{v}{n}",
    "{n}的 {w} 是 {w}",
    "{name} {say}{n}很{a}",
    "{product} 的{n}{v}了",
    "{who}的 {w} {w} 在{ns}",
    "{tech} {w} 的{n}{a}",
    "{ident} {inside}{n}要{v}",
    "{remind}给 {name} 发{n}",
    "{who}{recent}在看 {W} {w}",
    "{nr}的 {event} 在 {date_en}",
    "{who}{react} {w}",
    "{handle} {say}{n}{a}",
    "{tech} 的 {ident} {fixed}",
    "{version} 版本{fixed}{n}",
    "{who}{recent}{track} {ticket}",
    "{product} {usd}，{who}{plan}买",
    "{W} {w} 和{n}",
]

_SLOT_RE = re.compile(r"\{(\w+)\}")
Frame = tuple[tuple[str, ...], tuple[Slot, ...]]


def _compile(frame: str, slots: Slots) -> Frame:
    parts = _SLOT_RE.split(frame)
    literals = tuple(parts[0::2])
    fillers = tuple(slots.table[name] for name in parts[1::2])
    return literals, fillers


def _render(frame: Frame, rng: Rng) -> str:
    literals, fillers = frame
    out = [literals[0]]
    for filler, literal in zip(fillers, literals[1:], strict=True):
        out.append(filler(rng))
        out.append(literal)
    return "".join(out)


class Generator:
    def __init__(self) -> None:
        slots = Slots()
        self.slots = slots
        self.zh = [_compile(f, slots) for f in ZH_FRAMES]
        self.en = [_compile(f, slots) for f in EN_FRAMES]
        self.mixed = [_compile(f, slots) for f in MIXED_FRAMES]

    def chunk(self, rng: Rng) -> str:
        """One note: clauses of one language mode until a sampled target length."""
        roll = rng.random()
        frames, joiner, end = (
            (self.zh, "，", "。")
            if roll < 0.5
            else (self.en, " ", "")
            if roll < 0.75
            else (self.mixed, "；", "")
        )
        target = lognormal_int(rng, 40, 0.45, MIN_CHARS, MAX_CHARS)
        text = _render(rng.choice(frames), rng)
        for _ in range(3):
            if len(text) >= target:
                break
            extra = _render(rng.choice(frames), rng)
            if len(text) + len(joiner) + len(extra) > MAX_CHARS:
                if len(text) >= MIN_CHARS:
                    break
                continue
            text = text + joiner + extra
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS].rstrip()
        if len(text) < MIN_CHARS:
            text += f"（{self.slots.date_zh(rng)}）" if frames is not self.en else " (noted)"
        if end and rng.random() < 0.5 and len(text) < MAX_CHARS:
            text += end
        return text


@functools.cache
def _generator() -> Generator:
    return Generator()


def sentences(count: int, seed: int = SEED) -> list[str]:
    """`count` chat-memory-like chunks of 20-120 characters (about 50 % Chinese, 25 %
    English, 25 % mixed), identical for the same seed."""
    gen = _generator()
    rng = random.Random(seed)
    return [gen.chunk(rng) for _ in range(count)]


# ---------------------------------------------------------------------------
# Queries

_LATIN_RE = re.compile(r"[A-Za-z][A-Za-z0-9+#.]*[A-Za-z0-9+#]|[A-Za-z]|\d[\d.-]*\d|\d")
_HAN_RUN_RE = re.compile(r"[\u4e00-\u9fff]+")

ZH_QUESTIONS = [
    "{}",
    "{}是什么时候的事",
    "我之前说过{}吗",
    "{}怎么样了",
    "还记得{}吗",
    "关于{}的记录",
    "{}是谁说的",
    "上次提到的{}",
]
EN_QUESTIONS = [
    "{}",
    "what did I say about {}?",
    "when is the {}?",
    "who mentioned {}",
    "anything about {}",
    "remind me about {}",
    "{} again?",
]


def _keywords(sentence: str) -> list[str]:
    """Content words of a sentence as a user might type them (original case)."""
    zh_stop, en_stop = mtext._stopwords()
    segmenter = mtext._segmenter()
    words: list[str] = []
    for match in re.finditer(f"{_HAN_RUN_RE.pattern}|{_LATIN_RE.pattern}", sentence):
        token = match.group()
        if _HAN_RUN_RE.fullmatch(token):
            words.extend(w for w in segmenter.cut(token, False) if len(w) >= 2 and w not in zh_stop)
        elif token.lower() not in en_stop and (len(token) >= 3 or token.isdigit()):
            words.append(token)
    return list(dict.fromkeys(words))


def query_targets(sentences: Sequence[str], count: int, seed: int = SEED) -> list[tuple[int, str]]:
    """(index of the target sentence, query) pairs: a few of its keywords or a short
    question about them, sometimes a subset paraphrased with an unrelated word, sometimes
    in the other language's phrasing."""
    gen = _generator()
    rng = random.Random(seed)
    out: list[tuple[int, str]] = []
    while len(out) < count:
        target = rng.randrange(len(sentences))
        words = _keywords(sentences[target])
        if not words:
            continue
        take = min(len(words), rng.choice((1, 2, 2, 2, 3, 3)))
        chosen = rng.sample(words, take)
        style = rng.random()
        if style < 0.2 and len(words) > 1:
            # Paraphrase: keep part of it, add a word the user associates with it.
            chosen = chosen[: max(1, take - 1)]
            extra = gen.slots.zh["n"].pick(rng) if rng.random() < 0.5 else gen.slots.en.pick(rng)
            chosen.insert(rng.randrange(len(chosen) + 1), extra)
        joined = " ".join(chosen)
        han = bool(_HAN_RUN_RE.search(joined))
        if style < 0.55:
            query = joined
        else:
            # Mostly the keywords' own language; now and then the other one (mixed).
            zh_frame = han if rng.random() < 0.8 else not han
            frame = rng.choice(ZH_QUESTIONS if zh_frame else EN_QUESTIONS)
            query = frame.format("".join(chosen) if zh_frame and han and take == 1 else joined)
        if rng.random() < 0.3:
            query = query.lower()
        out.append((target, query))
    return out


def queries(sentences: Sequence[str], count: int, seed: int = SEED) -> list[str]:
    """What users would type to find something in `sentences` (see `query_targets`)."""
    return [query for _, query in query_targets(sentences, count, seed)]


# ---------------------------------------------------------------------------
# Long-term memory entries


def memory_entries(count: int, seed: int = SEED, now: datetime | None = None) -> list[MemoryEntry]:
    """`count` MemoryEntry objects with spread ages, scores, hits and categories, as a
    long-lived MEMORY.md would hold (some pinned, some archived, some expiring todos)."""
    now = (now or datetime(2026, 6, 1, 12, 0, tzinfo=UTC)).astimezone(UTC)
    now = now.replace(microsecond=0)
    rng = random.Random(seed)
    texts = sentences(count, seed + 1)
    category_weights = [30, 30, 12, 8, 8, 4, 8]
    ids: set[str] = set()
    entries: list[MemoryEntry] = []
    for content in texts:
        entry_id = f"{rng.getrandbits(32):08x}"
        while entry_id in ids:
            entry_id = f"{rng.getrandbits(32):08x}"
        ids.add(entry_id)
        category = rng.choices(CATEGORIES, weights=category_weights)[0]
        age_days = min(rng.expovariate(1 / 90), 1000)
        created = now - timedelta(days=age_days, seconds=rng.randrange(86400))
        last = created + (now - created) * rng.random() ** 2
        scored = last + (now - last) * rng.random()
        hits = min(int(rng.expovariate(1 / 3)), 200)
        score = round(min(1.0, max(0.05, rng.betavariate(2.5, 2.0))), 4)
        pinned = rng.random() < 0.02
        archived = None
        roll = rng.random()
        if roll < 0.03:
            archived = ArchiveReason.MANUAL
        expires = None
        if category == "todo" and rng.random() < 0.5:
            expires = now + timedelta(days=rng.uniform(-30, 60))
            if expires <= now and rng.random() < 0.5:
                archived = ArchiveReason.EXPIRED
        sessions = tuple(f"s{rng.getrandbits(24):06x}" for _ in range(min(hits, rng.randint(0, 3))))
        entries.append(
            MemoryEntry(
                id=entry_id,
                content=content,
                category=category,
                score=score,
                created_at=created.replace(microsecond=0),
                last_activated=last.replace(microsecond=0),
                scored_at=scored.replace(microsecond=0),
                hits=hits,
                source_session=sessions[0] if sessions else None,
                confidence=round(rng.uniform(0.5, 1.0), 2) if rng.random() < 0.3 else None,
                expires_at=expires.replace(microsecond=0) if expires else None,
                pinned=pinned,
                archived=archived,
                sessions=sessions,
            )
        )
    return entries


# ---------------------------------------------------------------------------
# Statistics (run as a script)


def machine_load() -> str:
    """Load averages: the machine is shared, so every report says how busy it was."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unavailable"
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} cpus"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(_pad(c, w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _width(cell: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if mtext._HAS_CJK_RE.match(ch) or "\uff00" <= ch <= "\uffef" else 1 for ch in cell)


def _pad(cell: str, width: int) -> str:
    return cell + " " * (width - _width(cell))


def vocabulary_report(name: str, chunks: Sequence[str], query_list: Sequence[str]) -> list[str]:
    """Rows of the stats table for one corpus, plus its top-20 document frequencies."""
    start = time.perf_counter()
    token_lists = [mtext.tokenize(c) for c in chunks]
    seconds = time.perf_counter() - start
    df: Counter[str] = Counter()
    for tokens in token_lists:
        df.update(set(tokens))
    n = len(chunks)
    lengths = [len(c) for c in chunks]
    query_dfs = [df.get(t, 0) for q in query_list for t in set(mtext.tokenize(q))]
    han = sum(1 for c in chunks if mtext.has_cjk(c))
    once = sum(1 for v in df.values() if v == 1)
    print(f"== {name}: {n:,} chunks")
    print(f"   e.g. {chunks[0]}")
    print(f"        {chunks[1]}")
    print(f"        {chunks[2]}")
    print(f"   queries e.g. {' | '.join(query_list[:6])}")
    rows = [
        ("chunks", f"{n:,}"),
        ("chunk chars p5 / p50 / p95 / max", _quad(lengths)),
        ("chunks with CJK", f"{han / n:.0%}"),
        ("tokens per chunk (mean)", f"{statistics.fmean(len(t) for t in token_lists):.1f}"),
        ("distinct tokens", f"{len(df):,}"),
        ("tokens in exactly one chunk", f"{once:,} ({once / max(len(df), 1):.0%})"),
        (
            "tokenize throughput",
            f"{n / seconds:,.0f} chunks/s, {sum(lengths) / seconds:,.0f} chars/s",
        ),
        ("query terms", f"{len(query_dfs):,} over {len(query_list)} queries"),
        (
            "query-term DF median (chunks / %)",
            f"{statistics.median(query_dfs):,.0f} / {statistics.median(query_dfs) / n:.3%}",
        ),
        (
            "query-term DF p90 (chunks / %)",
            f"{percentile(query_dfs, 90):,.0f} / {percentile(query_dfs, 90) / n:.2%}",
        ),
        ("query terms absent from corpus", f"{sum(1 for d in query_dfs if d == 0)}"),
    ]
    print(table(["statistic", "value"], rows))
    top = df.most_common(20)
    print(f"   top-20 document frequencies (% of {n:,} chunks):")
    print(
        "   "
        + ", ".join(f"{term} {count / n:.2%}" for term, count in top[:10])
        + "\n   "
        + ", ".join(f"{term} {count / n:.2%}" for term, count in top[10:])
    )
    print()
    return [
        name,
        f"{len(df):,}",
        f"{top[0][1] / n:.2%}",
        f"{top[19][1] / n:.2%}",
        f"{statistics.median(query_dfs) / n:.3%}",
    ]


def _quad(values: Sequence[int]) -> str:
    return " / ".join(f"{percentile(values, q):.0f}" for q in (5, 50, 95, 100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 000 chunks instead of 100 000")
    args = parser.parse_args()
    count = 10_000 if args.quick else 100_000
    mtext.warm_up()
    start = time.perf_counter()
    zh, en = zh_vocab(), en_vocab()
    load = time.perf_counter() - start
    sizes = ", ".join(f"{k} {len(v):,}" for k, v in zh.items())
    print(f"vocabularies loaded in {load:.2f} s: zh ({sizes}), en {len(en):,} words")
    start = time.perf_counter()
    chunks = sentences(count)
    generation = time.perf_counter() - start
    print(f"generated {count:,} chunks in {generation:.2f} s ({count / generation:,.0f}/s)")
    print()
    summary = [vocabulary_report("bench/corpus.py", chunks, queries(chunks, 1000))]

    from testkit.chat_sample import generate_sentences

    stress = generate_sentences(count)
    summary.append(
        vocabulary_report(
            "chat_sample.generate_sentences (tiny vocabulary)", stress, queries(stress, 1000)
        )
    )
    headers = ["corpus", "distinct tokens", "top-1 DF", "20th DF", "median query-term DF"]
    print(f"summary ({count:,} chunks each; DF = share of chunks containing the term)")
    print(table(headers, summary))


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("corpus"):
        main()
