"""Behaviour of memory_core.base.text: the tokenizer shared by the BM25 index and queries."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from memory_core.base import text
from memory_core.base.text import (
    ensure_loaded,
    estimate_tokens,
    has_cjk,
    matched_terms,
    tokenize,
    warm_up,
    writes_cjk,
)
from memory_core.recall.query import build_query
from testkit.waiting import WITHIN, turns, until, until_sync


@pytest.fixture(scope="module", autouse=True)
def _loaded() -> None:
    warm_up()


# ---------------------------------------------------------------------------
# tokenize: languages


def test_chinese_sentence_yields_words_without_function_words() -> None:
    terms = tokenize("我们决定下周去杭州出差")
    assert {"决定", "下周", "杭州", "出差"} <= set(terms)
    assert "我们" not in terms


def test_english_is_lowercased_and_stemmed() -> None:
    assert tokenize("Running runs run") == ["run", "run", "run"]
    assert tokenize("Databases") == tokenize("database")


def test_tool_names_survive_stemming() -> None:
    assert tokenize("PyTest unittest FastAPI") == ["pytest", "unittest", "fastapi"]


def test_mixed_text_splits_scripts() -> None:
    terms = tokenize("用户喜欢用pytest而非unittest")
    assert "pytest" in terms
    assert "unittest" in terms
    assert {"用户", "喜欢"} <= set(terms)


def test_spaced_mixed_text() -> None:
    terms = tokenize("我们决定用 FastAPI 替代 Flask")
    assert {"决定", "fastapi", "替代", "flask"} <= set(terms)


def test_kana_runs_are_words_and_lone_kana_dropped() -> None:
    terms = tokenize("データベースを使います")
    assert "データベース" in terms
    assert "を" not in terms


def test_hangul_words_kept_whole() -> None:
    assert tokenize("데이터베이스 연결") == ["데이터베이스", "연결"]


# ---------------------------------------------------------------------------
# tokenize: search mode on both sides


@pytest.mark.parametrize(
    ("query", "document"),
    [
        ("数据库", "我们的服务用了数据库连接池"),
        ("向量检索", "公司在做一个向量检索服务"),
        ("共和国", "中华人民共和国成立于1949年"),
        ("电脑", "我的笔记本电脑是 MacBook Pro"),
        ("北京", "他在北京大学读研究生"),
    ],
)
def test_short_chinese_query_finds_longer_compound(query: str, document: str) -> None:
    assert set(tokenize(query)) <= set(tokenize(document))


def test_compound_ranks_first_with_bm25() -> None:
    corpus = [
        "今天中午吃了牛肉面",
        "我们的服务用了数据库连接池",
        "下周要和产品组讨论上线计划",
        "公司在做一个向量检索服务",
        "周末去爬山，天气很好",
    ]
    index = BM25Okapi([tokenize(doc) for doc in corpus])
    for query, expected in (("数据库", 1), ("向量检索", 3), ("连接池", 1)):
        scores = list(index.get_scores(tokenize(query)))
        assert scores.index(max(scores)) == expected, query


# ---------------------------------------------------------------------------
# tokenize: stopwords, numbers, normalisation, punctuation


def test_stopwords_removed_in_both_languages() -> None:
    assert tokenize("the cat is on the mat") == ["cat", "mat"]
    assert tokenize("我的是你的") == []
    assert tokenize("这个 那个 什么 怎么 没有 一个") == []


def test_single_han_characters_kept_unless_stopwords() -> None:
    assert tokenize("猫") == ["猫"]
    assert tokenize("的") == []
    assert "猫" in tokenize("我养了一只猫")


def test_contractions_reduce_to_stopwords() -> None:
    assert tokenize("don't it's I'm we'll") == []
    assert tokenize("the user's cat") == ["user", "cat"]
    assert tokenize("user’s") == ["user"]


def test_identifiers_split_on_underscore_hyphen_and_dot() -> None:
    assert tokenize("memory_search") == [*tokenize("memory"), *tokenize("search")]
    # A hyphenated chain of letters adds its parts joined ("e-mail" meets "email").
    assert tokenize("hello-world") == ["hello", "world", "helloworld"]
    assert tokenize("memory_core.text") == ["memori", "core", "text"]


def test_numbers_are_kept_and_split_on_separators() -> None:
    assert tokenize("2026 502 3.11") == ["2026", "502", "3", "11"]
    assert tokenize("2026年") == ["2026", "年"]
    assert tokenize("python3 h264") == ["python3", "h264"]


def test_full_width_forms_are_nfkc_normalised() -> None:
    assert tokenize("ＡＢＣ１２３") == ["abc123"]
    assert tokenize("ｐｙｔｅｓｔ") == ["pytest"]
    assert tokenize("返回５０２错误") == tokenize("返回502错误")


def test_latin_diacritics_are_folded() -> None:
    assert tokenize("café") == tokenize("cafe") == ["cafe"]
    assert tokenize("e\u0301cole") == tokenize("école")
    assert tokenize("İstanbul") == ["istanbul"]


def test_emoji_and_punctuation_ignored() -> None:
    assert tokenize("🎉🎉 hello!!! 😀 (world) …【测试】") == ["hello", "world", "测试"]
    assert tokenize("!!! ??? 😀") == []
    assert tokenize("") == []


def test_deterministic() -> None:
    sample = "我们决定用 FastAPI 替代 Flask，升级到 Python 3.12。"
    assert tokenize(sample) == tokenize(sample)


# ---------------------------------------------------------------------------
# tokenize: the FTS5 invariant

fts5_available = True
try:
    with sqlite3.connect(":memory:") as _probe:
        _probe.execute("create virtual table t using fts5(x)")
except sqlite3.OperationalError:
    fts5_available = False


@settings(max_examples=300)
@given(st.text())
def test_terms_are_lowercase_alphanumeric(sample: str) -> None:
    for term in tokenize(sample):
        assert term
        assert all(ch.isalnum() for ch in term), term
        assert term == term.lower(), term


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_spans_agree_with_tokenize(sample: str) -> None:
    normalised = text._normalise(sample)
    assert [term for term, _, _ in text._term_spans(normalised)] == tokenize(sample)


@pytest.fixture(scope="module")
def fts5() -> Iterator[Callable[[str], list[list[str]]]]:
    if not fts5_available:
        pytest.skip("SQLite was built without FTS5")
    connection = sqlite3.connect(":memory:")
    options = ["unicode61", "unicode61 remove_diacritics 0", "unicode61 remove_diacritics 2"]
    for number, option in enumerate(options):
        connection.execute(f"create virtual table t{number} using fts5(x, tokenize='{option}')")
        connection.execute(f"create virtual table v{number} using fts5vocab(t{number}, 'instance')")

    def terms_seen_by_fts5(joined: str) -> list[list[str]]:
        seen = []
        for number in range(len(options)):
            connection.execute(f"insert into t{number}(rowid, x) values (1, ?)", (joined,))
            rows = connection.execute(f"select term from v{number} order by offset").fetchall()
            connection.execute(f"delete from t{number} where rowid = 1")
            seen.append([row[0] for row in rows])
        return seen

    yield terms_seen_by_fts5
    connection.close()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text())
def test_fts5_unicode61_sees_exactly_our_terms(
    fts5: Callable[[str], list[list[str]]], sample: str
) -> None:
    terms = tokenize(sample)
    for seen in fts5(" ".join(terms)):
        assert seen == terms


def test_fts5_sees_our_terms_for_tricky_letters(fts5: Callable[[str], list[list[str]]]) -> None:
    tricky = "Straße ŒUVRE naïve ΟΔΟΣ µ ϐ ﬁ ǅ ᦰᦱ Ǖ ǖ ḯ ø ł 鿿 𠀀 ＡＢＣ"
    terms = tokenize(tricky)
    for seen in fts5(" ".join(terms)):
        assert seen == terms


# ---------------------------------------------------------------------------
# estimate_tokens


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("", 0),
        (" ", 1),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("hello world", 3),
        ("你好", 2),
        ("你好abc", 3),
        ("你好，世界", 5),
        ("データ", 3),
        ("한국어", 3),
    ],
)
def test_estimate_tokens(sample: str, expected: int) -> None:
    assert estimate_tokens(sample) == expected


@given(st.text())
def test_estimate_tokens_bounds(sample: str) -> None:
    estimate = estimate_tokens(sample)
    assert (estimate == 0) == (sample == "")
    assert estimate <= max(len(sample), 1)


# ---------------------------------------------------------------------------
# matched_terms


def test_matched_terms_chinese_compound() -> None:
    assert matched_terms("我们的数据库连接池很好用", "数据库") == [(3, 6)]


def test_matched_terms_merges_overlapping_sub_words() -> None:
    # 中华 (0, 2) and 华人 (1, 3) overlap; 人民 and 共和国 only touch.
    assert matched_terms("中华人民共和国", "中华 华人") == [(0, 3)]
    assert matched_terms("中华人民共和国", "人民 共和国") == [(2, 4), (4, 7)]


def test_matched_terms_uses_stems() -> None:
    sample = "Running fast; the runner runs"
    assert matched_terms(sample, "run") == [(0, 7), (25, 29)]


def test_matched_terms_mixed() -> None:
    sample = "用户喜欢用pytest而非unittest"
    spans = matched_terms(sample, "PyTest 喜欢")
    assert [sample[a:b] for a, b in spans] == ["喜欢", "pytest"]


def test_matched_terms_maps_back_through_normalisation() -> None:
    sample = "ﬁle e\u0301cole İstanbul ＰＹＴＨＯＮ"
    spans = matched_terms(sample, "file ecole istanbul python")
    assert [sample[a:b] for a, b in spans] == ["ﬁle", "e\u0301cole", "İstanbul", "ＰＹＴＨＯＮ"]


def test_matched_terms_no_match() -> None:
    assert matched_terms("hello world", "数据库") == []
    assert matched_terms("hello world", "") == []
    assert matched_terms("", "hello") == []
    assert matched_terms("the cat", "the") == []


@given(st.text(max_size=60), st.text(max_size=20))
def test_matched_spans_are_sorted_disjoint_and_in_bounds(sample: str, query: str) -> None:
    spans = matched_terms(sample, query)
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end <= len(sample)
        previous_end = end


@given(st.text(max_size=60))
def test_text_matches_itself_when_it_has_terms(sample: str) -> None:
    if unicodedata.is_normalized("NFKC", sample):
        assert bool(matched_terms(sample, sample)) == bool(tokenize(sample))


# ---------------------------------------------------------------------------
# has_cjk


def test_has_cjk() -> None:
    assert has_cjk("hello 世界")
    assert has_cjk("カタカナ")
    assert has_cjk("한국어")
    assert not has_cjk("hello, world! 123 café")
    assert not has_cjk("，。")
    assert not has_cjk("")


def test_writes_cjk_weighs_the_scripts() -> None:
    """A reply's language follows the message's main script, not any CJK character."""
    assert not writes_cjk("remember that my cat is called 小橘")
    assert not writes_cjk("remember that alice likes green tea")
    assert writes_cjk("记住我喜欢乌龙茶")
    assert writes_cjk("我在学 Python")
    assert writes_cjk("我用 FastAPI 和 PostgreSQL 做后端")
    assert writes_cjk("小橘")
    assert not writes_cjk("") and not writes_cjk("42 !")


# ---------------------------------------------------------------------------
# Loading


class _RecordingLoader:
    """Records the threads that load; `gated`: each load waits for `release`, so a test
    holds the load in progress while it looks at what its callers do."""

    def __init__(self, gated: bool = False, failures: int = 0) -> None:
        self.threads: list[int] = []
        self.release = threading.Event()
        if not gated:
            self.release.set()
        self.failures = failures
        self.segmenter = text._STATE.segmenter

    def __call__(self) -> text._Segmenter:
        self.threads.append(threading.get_ident())
        assert self.release.wait(WITHIN), "the test never let the load end"
        if self.failures:
            self.failures -= 1
            raise RuntimeError("dictionary missing")
        assert self.segmenter is not None
        return self.segmenter


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> Callable[..., _RecordingLoader]:
    def install(gated: bool = False, failures: int = 0) -> _RecordingLoader:
        loader = _RecordingLoader(gated, failures)
        monkeypatch.setattr(text, "_STATE", text._LoaderState())
        monkeypatch.setattr(text, "_load_segmenter", loader)
        return loader

    return install


def test_text_without_han_never_loads_the_dictionary(
    fresh_loader: Callable[..., _RecordingLoader],
) -> None:
    """Latin (diacritics included), kana, Hangul and numbers are tokenized without the
    dictionary, so a command that never meets Chinese never pays for loading it; the
    first Han run loads it, once."""
    loader = fresh_loader()
    sample = "The Café's 3.11 servers crashed again データベース 한국어 naïve"
    assert tokenize(sample) == [
        "cafe", "3", "11", "server", "crash", "データベース", "한국어", "naiv"
    ]  # fmt: skip
    assert matched_terms(sample, "server crashed") == [(16, 23), (24, 31)]
    assert loader.threads == []
    assert tokenize("数据库 servers") == ["数据", "据库", "数据库", "server"]
    assert len(loader.threads) == 1


def test_an_english_question_loads_no_dictionary(
    fresh_loader: Callable[..., _RecordingLoader],
) -> None:
    """A question's template words ("remember", "记得") only shape it (after its own
    words, at half weight); the Chinese ones are only cut for a question that has CJK in
    it."""
    loader = fresh_loader()
    query = build_query("do you remember the staging server?", today=date(2026, 3, 2))
    assert list(query.terms) == ["stage", "server", "rememb"] and query.shaping == {"rememb"}
    assert loader.threads == []
    chinese = build_query("你还记得杭州吗", today=date(2026, 3, 2))
    assert list(chinese.terms) == ["杭州", "记得"] and chinese.shaping == {"记得"}
    assert len(loader.threads) == 1


async def test_ensure_loaded_loads_off_the_event_loop_once(
    fresh_loader: Callable[..., _RecordingLoader],
) -> None:
    loader = fresh_loader()
    await ensure_loaded()
    assert len(loader.threads) == 1
    assert loader.threads[0] != threading.get_ident()
    await ensure_loaded()
    assert len(loader.threads) == 1
    assert tokenize("数据库") == ["数据", "据库", "数据库"]
    assert len(loader.threads) == 1


async def test_concurrent_ensure_loaded_shares_one_load(
    fresh_loader: Callable[..., _RecordingLoader],
) -> None:
    loader = fresh_loader(gated=True)
    loads = asyncio.gather(*(ensure_loaded() for _ in range(10)))
    await until(lambda: loader.threads, what="the load under way")
    await turns()  # every caller has asked meanwhile
    loader.release.set()
    await loads
    assert len(loader.threads) == 1


async def test_ensure_loaded_keeps_event_loop_responsive(
    fresh_loader: Callable[..., _RecordingLoader],
) -> None:
    loader = fresh_loader(gated=True)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    loading = asyncio.create_task(ensure_loaded())
    await until(lambda: loader.threads, what="the load under way")
    seen = ticks
    await until(lambda: ticks >= seen + 5, what="the loop running during the load")
    assert not loading.done()  # the loop ran while the load was under way
    loader.release.set()
    await loading
    task.cancel()


async def test_cancelled_waiter_does_not_break_loading(
    fresh_loader: Callable[..., _RecordingLoader],
) -> None:
    loader = fresh_loader(gated=True)
    first = asyncio.create_task(ensure_loaded())
    second = asyncio.create_task(ensure_loaded())
    await until(lambda: loader.threads, what="the load running in its thread")
    second.cancel()
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    third = asyncio.create_task(ensure_loaded())  # while the load is still under way
    await turns()
    loader.release.set()
    await third
    assert len(loader.threads) == 1


async def test_failed_load_is_retried(fresh_loader: Callable[..., _RecordingLoader]) -> None:
    loader = fresh_loader(failures=1)
    with pytest.raises(RuntimeError, match="dictionary missing"):
        await ensure_loaded()
    await ensure_loaded()
    assert len(loader.threads) == 2


def test_warm_up_is_thread_safe(fresh_loader: Callable[..., _RecordingLoader]) -> None:
    loader = fresh_loader(gated=True)
    arrived: list[int] = []

    def warm() -> None:
        arrived.append(threading.get_ident())
        warm_up()

    threads = [threading.Thread(target=warm) for _ in range(8)]
    for thread in threads:
        thread.start()
    until_sync(lambda: loader.threads and len(arrived) == 8, what="every thread warming up")
    loader.release.set()  # the load ends only once all eight have asked for it
    for thread in threads:
        thread.join()
    assert len(loader.threads) == 1


def test_tokenize_loads_lazily(fresh_loader: Callable[..., _RecordingLoader]) -> None:
    loader = fresh_loader()
    assert tokenize("向量检索") == ["向量", "检索"]
    assert tokenize("向量检索") == ["向量", "检索"]
    assert len(loader.threads) == 1


def test_import_does_not_load_the_dictionary() -> None:
    code = (
        "import sys, memory_core.base.text; "
        "assert 'rjieba' not in sys.modules and 'jieba' not in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
