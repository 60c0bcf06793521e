"""Text analysis shared by the BM25 index, the query side and the UI.

One function, `tokenize`, makes the terms of documents and queries alike, so every
rule here is symmetric by construction and a query word meets the same word stored.
Han runs are cut by rjieba in search mode with the HMM off: search mode gives a long
word's dictionary sub-words too, so a short query word finds the long document word,
and the HMM's guesses depend on the surrounding text, which would break that symmetry.
Single Han characters are whole words in chat and are kept (less stopwords); numbers
are kept as written and split at separators; Latin words are NFKC-folded, lowercased,
stripped of diacritics and Snowball-stemmed; kana runs of two or more are kept;
Hangul words are kept whole; closed compounds add their joined form
(`memory_core.base.compounds`). Every term is lowercase `str.isalnum()` text that
SQLite FTS5's `unicode61` splits back into exactly itself (the 21 letters its tables
call separators are separators here too). rjieba was chosen over jieba for the same
segmentation at several times the speed; the figures behind each choice are in
docs/decisions/0003-tokenizer.md and bench/RESULTS.md ("tokenizer_bench").

A change to what this module returns moves `TOKENIZER_VERSION`: stored indexes are
tokenized again at their next open. The dictionary is loaded lazily (`warm_up`,
`ensure_loaded`), never at import, and only for text with a Han run, so importing this
module cannot stall an event loop and a command that never meets Chinese never loads it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memory_core.base.compounds import (
    NON_BREAKING,
    closed_compound,
    closed_compounds,
    has_hyphen,
    hyphen_joins,
)
from memory_core.base.patterns import LazyPattern

__all__ = [
    "TOKENIZER_VERSION",
    "ensure_loaded",
    "estimate_tokens",
    "has_cjk",
    "matched_terms",
    "tokenize",
    "warm_up",
]

TOKENIZER_VERSION = 2
"""Moves with every change to what `tokenize` returns for some text. A stored index keeps
the version its terms were made by and is tokenized again, in place, when it differs
(memory_core/recall/index/retokenize.py). 1: before versions were kept; 2: compounds
(memory_core/base/compounds.py)."""

# ---------------------------------------------------------------------------
# Character classes (regex class bodies)

_HAN = (
    "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f\U00030000-\U000323af"
)
_HIRAGANA = "\u3041-\u3096\u309d-\u309f"
_KATAKANA = "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
_HANGUL = "\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"
_HALFWIDTH_KANA_HANGUL = "\uff66-\uff9f\uffa0-\uffdc"
# CJK punctuation and full-width forms cost about one model token each, too.
_CJK_PUNCTUATION = "\u3000-\u303f\uff00-\uffef"
# Alphanumeric for Python (Unicode 14+) but separators for SQLite's unicode61 tables.
_FTS5_SEPARATORS = "\u19b0-\u19c0\u19c8\u19c9\u1cf2\u1cf3"

_CJK_SCRIPT = _HAN + _HIRAGANA + _KATAKANA + _HANGUL + _HALFWIDTH_KANA_HANGUL

# Groups: 1 Han run, 2 hiragana run, 3 katakana run, 4 any other alphanumeric run.
_WORD_RE = LazyPattern(
    f"([{_HAN}]+)|([{_HIRAGANA}]+)|([{_KATAKANA}]+)"
    f"|([^\\W_{_HAN}{_HIRAGANA}{_KATAKANA}{_FTS5_SEPARATORS}]+)"
)
_ALNUM_RUN_RE = LazyPattern(r"[^\W_]+")
_HAS_CJK_RE = LazyPattern(f"[{_CJK_SCRIPT}]")
_CJK_COST_RE = LazyPattern(f"[{_CJK_SCRIPT}{_CJK_PUNCTUATION}]")

_DOTTED_CAPITAL_I = "\u0130"  # the only character whose lower() is two characters
_STEM_MAX_LEN = 40


@dataclass(frozen=True)
class _Segmentation:
    """Segmentation switches; a dataclass so the bench can compare alternatives."""

    search_mode: bool = True
    hmm: bool = False
    keep_single_han: bool = True


_SEGMENTATION = _Segmentation()


class _Segmenter(Protocol):
    def cut(self, text: str, hmm: bool = True) -> list[str]: ...

    def cut_for_search(self, text: str, hmm: bool = True) -> list[str]: ...

    def tokenize(
        self, text: str, mode: str = "default", hmm: bool = True
    ) -> list[tuple[str, int, int]]: ...


@dataclass
class _LoaderState:
    """Process-wide loading state, grouped so tests can swap in a fresh one."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    future_lock: threading.Lock = field(default_factory=threading.Lock)
    segmenter: _Segmenter | None = None
    pending: concurrent.futures.Future[None] | None = None


_STATE = _LoaderState()


# ---------------------------------------------------------------------------
# Loading


def _load_segmenter() -> _Segmenter:
    """Import rjieba, which builds its dictionary as a side effect of the import."""
    import rjieba

    return rjieba


def warm_up() -> None:
    """Load the dictionary and stopwords now, so the first real call is not slow.

    Idempotent and thread-safe: concurrent callers wait for a single load.
    """
    if _STATE.segmenter is not None:
        return
    state = _STATE
    with state.lock:
        if state.segmenter is None:
            _stopwords()
            state.segmenter = _load_segmenter()


def _warm_up_into(future: concurrent.futures.Future[None]) -> None:
    """Run in a worker thread; resolves `future` even if the awaiting task is cancelled."""
    try:
        warm_up()
    except BaseException as exc:
        with _STATE.future_lock:
            if _STATE.pending is future:
                _STATE.pending = None  # let a later call retry
        future.set_exception(exc)
    else:
        future.set_result(None)


async def ensure_loaded() -> None:
    """Load the dictionary off the event loop, once per process.

    Concurrent first callers (even on different loops) share one worker-thread
    load; once it has finished, calls return without awaiting anything.
    """
    state = _STATE
    if state.segmenter is not None:
        return
    with state.future_lock:
        future = state.pending
        owner = future is None
        if future is None:
            future = concurrent.futures.Future()
            # RUNNING futures cannot be cancelled, so a cancelled waiter below
            # (wrap_future propagates cancellation) cannot poison the others.
            future.set_running_or_notify_cancel()
            state.pending = future
    if owner:
        await asyncio.to_thread(_warm_up_into, future)
    await asyncio.wrap_future(future)


def _segmenter() -> _Segmenter:
    segmenter = _STATE.segmenter
    if segmenter is None:
        warm_up()
        segmenter = _STATE.segmenter
        assert segmenter is not None
    return segmenter


# ---------------------------------------------------------------------------
# Stopwords and word normalisation


DATA = Path(__file__).with_name("data")
"""The package data beside this module (read as files: `importlib.resources` and the zip
reader it imports cost a `capture` or a `search` ~5 ms, for an installed directory)."""


def _read_word_list(name: str) -> frozenset[str]:
    raw = (DATA / name).read_text(encoding="utf-8")
    words = (unicodedata.normalize("NFKC", line.strip()).lower() for line in raw.splitlines())
    return frozenset(word for word in words if word and not word.startswith("#"))


@functools.cache
def _stopwords() -> tuple[frozenset[str], frozenset[str]]:
    """(Chinese, English) stopwords, read once; the files ship as package data."""
    return _read_word_list("stopwords_zh.txt"), _read_word_list("stopwords_en.txt")


@functools.cache
def _latin_fold() -> dict[int, str]:
    """Map precomposed Latin letters to their base letter (é -> e), like FTS5 does.

    Only letters whose canonical decomposition is an ASCII letter plus combining
    marks are folded; ø, ł, ß have no such decomposition and stay, as in SQLite.
    Built at the first word that is not ASCII (some milliseconds of decompositions that
    an English-only process never needs).
    """
    table: dict[int, str] = {0x03C2: "\u03c3"}  # final sigma folds to sigma
    for start, end in ((0x00C0, 0x0250), (0x1E00, 0x1F00)):
        for code in range(start, end):
            decomposed = unicodedata.normalize("NFD", chr(code))
            base, marks = decomposed[0], decomposed[1:]
            if (
                marks
                and base.isascii()
                and base.isalpha()
                and all(unicodedata.combining(mark) for mark in marks)
            ):
                table[code] = base.lower()
    return table


_STEM_LOCK = threading.Lock()


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...


@functools.cache
def _english_stemmer() -> _Stemmer:
    """snowballstemmer's English stemmer: PyStemmer's C one (a dependency) when it is
    installed, the same stems; its own pure-Python modules, every language's, cost
    ~15 ms to import."""
    import snowballstemmer

    stemmer: _Stemmer = snowballstemmer.stemmer("english")
    return stemmer


@functools.lru_cache(maxsize=65536)
def _word_term(word: str) -> str:
    """Term for a lowercased non-CJK word: diacritics folded, English stemmed."""
    if not word.isascii():
        word = word.translate(_latin_fold())
        if not word.isascii():
            return word
    if not word.isalpha() or len(word) > _STEM_MAX_LEN:
        return word
    with _STEM_LOCK:  # Snowball stemmers keep per-call state on the instance
        stem = _english_stemmer().stemWord(word)
    return stem or word


def _normalise(text: str) -> str:
    """NFKC + lowercase without changing the length of already-normalised text."""
    if text.isascii():
        return text.lower()
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    if _DOTTED_CAPITAL_I in text:
        text = text.replace(_DOTTED_CAPITAL_I, "I")
    return text.lower()


def _han_pieces(run: str) -> Iterator[tuple[str, int]]:
    """Split a Han-range run on unassigned code points (which are not alphanumeric)."""
    if run.isalnum():
        yield run, 0
    else:
        for match in _ALNUM_RUN_RE.finditer(run):
            yield match.group(), match.start()


def _cut_pieces(cut: Callable[[str, bool], list[str]], run: str, hmm: bool) -> list[str]:
    return [word for piece, _ in _han_pieces(run) for word in cut(piece, hmm)]


# ---------------------------------------------------------------------------
# Public API


def has_cjk(text: str) -> bool:
    """True if `text` contains Han, kana or Hangul characters."""
    return _HAS_CJK_RE.search(text) is not None


_LATIN_WORD_RE = LazyPattern(r"[^\W\d_]{2,}")
CJK_CHARS_PER_WORD = 2
"""About how many Han characters a Chinese word takes: the unit `writes_cjk` weighs
them in against Latin words."""


def writes_cjk(text: str) -> bool:
    """Whether a reply to `text` should be in Chinese: its CJK part outweighs its Latin
    words. "remember that my cat is called 小橘" is English with a name in it, "我在学
    Python" is Chinese with a word of English; `has_cjk` alone answers both in Chinese."""
    cjk = len(_HAS_CJK_RE.findall(text))
    if not cjk:
        return False
    latin = sum(1 for word in _LATIN_WORD_RE.findall(text) if not has_cjk(word))
    return cjk / CJK_CHARS_PER_WORD >= latin


def tokenize(text: str) -> list[str]:
    """Terms for BM25 indexing and querying (the same function serves both sides).

    See the module docstring for the rules and why they were chosen.
    """
    if not text:
        return []
    config = _SEGMENTATION
    cut: Callable[[str, bool], list[str]] | None = None  # the dictionary, at the first Han run
    hmm = config.hmm
    min_han = 1 if config.keep_single_han else 2
    zh_stop, en_stop = _stopwords()
    firsts, closed = closed_compounds()
    terms: list[str] = []
    append = terms.append
    normalised = _normalise(text)
    previous = ""  # the Latin word just before, for compounds written apart
    for han, hiragana, katakana, other in _WORD_RE.findall(normalised):
        if other:
            if previous and (previous + other) in closed:  # `closed_compound`, inlined
                append(_word_term(previous + other))
            previous = other if other in firsts else ""
            if other not in en_stop:
                append(_word_term(other))
            continue
        previous = ""
        if han:
            if cut is None:
                segmenter = _segmenter()
                cut = segmenter.cut_for_search if config.search_mode else segmenter.cut
            # A run can hold unassigned code points, which are not alphanumeric.
            words = cut(han, hmm) if han.isalnum() else _cut_pieces(cut, han, hmm)
            for word in words:
                if len(word) >= min_han and word not in zh_stop:
                    append(word)
        else:
            kana = hiragana or katakana
            if len(kana) >= 2:
                append(kana)
    if "-" in normalised or NON_BREAKING in normalised:  # `has_hyphen`, inlined
        terms.extend(_word_term(joined) for joined, _, _ in hyphen_joins(normalised))
    return terms


def _term_spans(normalised: str) -> Iterator[tuple[str, int, int]]:
    """Like `tokenize` on already-normalised text, with each term's span."""
    config = _SEGMENTATION
    mode = "search" if config.search_mode else "default"
    min_han = 1 if config.keep_single_han else 2
    zh_stop, en_stop = _stopwords()
    listed = closed_compounds()
    previous, previous_start = "", 0
    for match in _WORD_RE.finditer(normalised):
        han, hiragana, katakana, other = match.groups()
        start, end = match.span()
        if other:
            if previous and (closed := closed_compound(listed, previous, other)):
                yield _word_term(closed), previous_start, end
            previous, previous_start = other, start
            if other not in en_stop:
                yield _word_term(other), start, end
            continue
        previous = ""
        if han:
            for piece, offset in _han_pieces(han):
                base = start + offset
                spans = _segmenter().tokenize(piece, mode, config.hmm)
                for word, word_start, word_end in spans:
                    if len(word) >= min_han and word not in zh_stop:
                        yield word, base + word_start, base + word_end
        else:
            kana = hiragana or katakana
            if len(kana) >= 2:
                yield kana, start, end
    if has_hyphen(normalised):
        for joined, start, end in hyphen_joins(normalised):
            yield _word_term(joined), start, end


def _normalise_with_origin(text: str) -> tuple[str, list[int] | None, list[int] | None]:
    """Normalise like `_normalise` and map each output character to its source.

    Returns `(normalised, starts, ends)`; `starts`/`ends` are None when the
    normalisation kept every offset.  Otherwise each character cluster (a base
    character and its combining marks) is normalised on its own so that spans
    can be traced back; this can differ from whole-string NFKC only in exotic
    cases (e.g. conjoining Hangul jamo), which at worst loses a highlight.
    """
    normalised = _normalise(text)
    if len(normalised) == len(text) and (text.isascii() or unicodedata.is_normalized("NFKC", text)):
        return normalised, None, None
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    index, length = 0, len(text)
    while index < length:
        stop = index + 1
        while stop < length and unicodedata.combining(text[stop]):
            stop += 1
        chunk = _normalise(text[index:stop])
        pieces.append(chunk)
        starts.extend([index] * len(chunk))
        ends.extend([stop] * len(chunk))
        index = stop
    return "".join(pieces), starts, ends


def matched_terms(text: str, query: str) -> list[tuple[int, int]]:
    """Spans `(start, end)` of `text` whose terms occur among the query's terms.

    Overlapping spans (search-mode sub-words) are merged, so the result is sorted
    and disjoint and can be highlighted directly.
    """
    wanted = set(tokenize(query))
    if not wanted or not text:
        return []
    normalised, starts, ends = _normalise_with_origin(text)
    spans: list[tuple[int, int]] = []
    for term, start, end in _term_spans(normalised):
        if term in wanted:
            if starts is not None and ends is not None:
                start, end = starts[start], ends[end - 1]
            spans.append((start, end))
    return _merge_spans(spans)


def _merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def estimate_tokens(text: str) -> int:
    """Rough model-token count for prompt budgets, with no tokenizer download.

    CJK characters (and CJK punctuation) cost about one token each; other text
    about one token per four characters.
    """
    if not text:
        return 0
    cjk = len(_CJK_COST_RE.findall(text))
    other = len(text) - cjk
    return max(1, cjk + -(-other // 4))
