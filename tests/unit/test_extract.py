"""Extraction: the model call, its tolerant parsing, the 50-line
summary of existing memories, the offline heuristic and explicit remember/forget."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.entries import ArchiveReason, Importance, MemoryEntry
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.base.requests import explicit_request
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.config.services import LLMSettings
from memory_core.engine import MemoryCore
from memory_core.llm.client import LLMClient
from memory_core.llm.extract import (
    SUMMARY_ENTRIES,
    TranscriptLine,
    build_extraction_messages,
    candidates_from_json,
    existing_summary,
    extract_with_llm,
    heuristic_candidates,
    render_conversation,
)
from testkit.openai_server import FakeOpenAI
from tests.postgres import with_storage

pytestmark = pytest.mark.timeout(60)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

CONVERSATION = [
    TranscriptLine("user", "我平时写测试都用 pytest，不喜欢 unittest"),
    TranscriptLine("assistant", "好的，记下了。"),
    TranscriptLine("user", "下周三我有产品评审会议，要准备演示材料"),
    TranscriptLine("assistant", "需要我帮你列个提纲吗？"),
]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    client = LLMClient(
        LLMSettings(
            model="gpt-fake",
            base_url=fake.base_url,
            api_key="sk-test-123",
            max_retries=0,
            timeout_seconds=2.0,
        )
    )
    try:
        yield client
    finally:
        await client.close()


def entry(
    n: int,
    score: float,
    *,
    content: str | None = None,
    archived: ArchiveReason | None = None,
    category: str = "fact",
) -> MemoryEntry:
    return MemoryEntry(
        id=f"e{n:03d}",
        content=content or f"memory number {n} about topic {n * 7919 % 1000}",
        category=category,
        score=score,
        created_at=NOW,
        last_activated=NOW,
        scored_at=NOW,
        archived=archived,
    )


def prompt_of(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"])


# --- the model call --------------------------------------------------------------------------


async def test_normal_conversation_gives_candidates(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.reply_json(
        [
            {
                "content": "用户偏好用 pytest 而非 unittest",
                "category": "preference",
                "importance": "medium",
            },
            {"content": "用户下周三有产品评审会议", "category": "todo", "importance": "high"},
        ]
    )
    candidates = await extract_with_llm(llm, CONVERSATION, [], NOW)
    assert candidates == [
        Proposal("用户偏好用 pytest 而非 unittest", "preference", Importance.MEDIUM),
        Proposal("用户下周三有产品评审会议", "todo", Importance.HIGH),
    ]
    [body] = fake.chat_requests()
    prompt = prompt_of(body)
    assert "user: 我平时写测试都用 pytest，不喜欢 unittest" in prompt
    assert "assistant: 需要我帮你列个提纲吗？" in prompt
    assert "content" in prompt and "category" in prompt and "importance" in prompt
    assert NOW.isoformat() in prompt
    assert "（无 / none）" in prompt  # no existing memories yet
    assert body["temperature"] == 0.0


async def test_items_are_validated_one_by_one(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.reply_raw_content(
        "```json\n"
        '{"memories": ['
        '{"content": "  用户住在杭州  ", "category": "location", "importance": "HIGH"},'
        '{"content": "用户喜欢爬山", "category": "preference", "importance": "urgent"},'
        '{"content": "", "category": "fact"},'
        '{"category": "fact"},'
        '"just a string",'
        "42,"
        '{"content": "用户在学日语"}'
        "]}\n```"
    )
    candidates = await extract_with_llm(llm, CONVERSATION, [], NOW)
    assert candidates == [
        Proposal("用户住在杭州", "fact", Importance.HIGH),  # unknown category → fact
        Proposal("用户喜欢爬山", "preference", Importance.MEDIUM),  # bad importance → medium
        Proposal("用户在学日语", "fact", Importance.MEDIUM),
    ]


@pytest.mark.parametrize(
    "lines",
    [
        [],
        [TranscriptLine("assistant", "你好！有什么可以帮你？")],
        [TranscriptLine("user", "   ")],
        [TranscriptLine("user", "嗯"), TranscriptLine("assistant", "还有别的事吗？")],
        [TranscriptLine("user", "ok")],
        [
            TranscriptLine("user", "好的"),
            TranscriptLine("assistant", "好"),
            TranscriptLine("user", "!"),
        ],
    ],
    ids=["empty", "assistant-only", "blank", "嗯", "ok", "好的-!"],
)
async def test_empty_or_very_short_conversation_makes_no_call(
    fake: FakeOpenAI, llm: LLMClient, lines: list[TranscriptLine]
) -> None:
    fake.reply_json([{"content": "hallucinated", "category": "fact"}])
    assert await extract_with_llm(llm, lines, [entry(1, 0.9)], NOW) == []
    assert fake.chat_requests() == []


async def test_short_but_meaningful_statement_is_extracted(
    fake: FakeOpenAI, llm: LLMClient
) -> None:
    fake.reply_json([{"content": "用户叫张三", "category": "fact", "importance": "high"}])
    result = await extract_with_llm(llm, [TranscriptLine("user", "我叫张三")], [], NOW)
    assert [c.content for c in result] == ["用户叫张三"]
    assert len(fake.chat_requests()) == 1


@pytest.mark.parametrize(
    "content",
    [
        '[{"content": "用户喜欢',
        "抱歉，我无法完成这个请求。",
        '{"content": "一个对象而不是数组", "category": "fact"}',
        "null",
        '"just a string"',
        "",
    ],
)
async def test_invalid_json_gives_empty_list(
    fake: FakeOpenAI, llm: LLMClient, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake.reply_raw_content(content)
    with caplog.at_level(logging.WARNING):
        assert await extract_with_llm(llm, CONVERSATION, [], NOW) == []


def test_existing_summary_is_capped_at_fifty_active_lines() -> None:
    active = [entry(n, 0.25 + n * 0.01) for n in range(60)]  # 0.25 .. 0.84
    archived = [
        entry(100, 0.15, content="archived by score"),
        entry(101, 0.95, content="archived by hand", archived=ArchiveReason.MANUAL),
    ]
    summary = existing_summary(active + archived)
    lines = summary.splitlines()
    assert len(lines) == SUMMARY_ENTRIES == 50
    # The top 50 by score, best first, as '[id] content'.
    expected = sorted(active, key=lambda e: -e.score)[:50]
    assert lines == [f"[{e.id}] {e.content}" for e in expected]
    assert "archived by" not in summary
    assert "[e000]" not in summary  # the lowest-scoring active entries fell off


async def test_prompt_sent_to_model_carries_at_most_fifty_existing(
    fake: FakeOpenAI, llm: LLMClient
) -> None:
    entries = [entry(n, 0.3 + n * 0.005) for n in range(80)]
    entries[5] = entry(5, 0.9, content="多行\n内容\n  被压成一行")
    fake.reply_json([])
    assert await extract_with_llm(llm, CONVERSATION, entries, NOW) == []
    prompt = prompt_of(fake.chat_requests()[0])
    listed = re.findall(r"^\[(e\d{3})\] ", prompt, re.MULTILINE)
    assert len(listed) == 50
    assert len(set(listed)) == 50
    assert "[e005] 多行 内容 被压成一行" in prompt
    assert "e079" in listed and "e000" not in listed


def test_long_conversation_keeps_newest_lines() -> None:
    lines = [TranscriptLine("user", f"line {i} " + "x" * 400) for i in range(200)]
    rendered = render_conversation(lines, max_tokens=1000)
    kept = rendered.splitlines()
    assert 1 < len(kept) < 200
    assert kept[-1].startswith("user: line 199 ")
    assert not any(k.startswith("user: line 0 ") for k in kept)
    messages = build_extraction_messages(lines, [], NOW)
    assert [m["role"] for m in messages] == ["system", "user"]


def test_matches_and_contradicts_only_for_known_ids() -> None:
    data = [
        {"content": "a", "matches": "e001", "contradicts": ["e002", "nope"]},
        {"content": "b", "matches": "ghost", "contradicts": "e002"},
        {"content": "c", "matches": 7, "contradicts": [None, 3, "e001"]},
        {"content": "d", "contradicts": "ghost"},
    ]
    got = candidates_from_json(data, ["e001", "e002"])
    assert [(c.content, c.matches, c.contradicts) for c in got] == [
        ("a", "e001", ("e002",)),
        ("b", None, ("e002",)),
        ("c", None, ("e001",)),
        ("d", None, ()),
    ]


async def test_model_ids_checked_against_existing_entries(fake: FakeOpenAI, llm: LLMClient) -> None:
    existing = [entry(1, 0.7, content="用户用 unittest"), entry(2, 0.6, content="用户住在上海")]
    fake.reply_json(
        [
            {
                "content": "用户偏好 pytest",
                "category": "preference",
                "contradicts": ["e001", "zzz"],
            },
            {"content": "用户住在上海", "matches": "e002"},
            {"content": "用户养了一只猫", "matches": "e999"},
        ]
    )
    got = await extract_with_llm(llm, CONVERSATION, existing, NOW)
    assert [(c.matches, c.contradicts) for c in got] == [
        (None, ("e001",)),
        ("e002", ()),
        (None, ()),
    ]


def test_todo_expires_at_parsed() -> None:
    got = candidates_from_json(
        [
            {"content": "周三评审", "category": "todo", "expires_at": "2026-03-04T18:00:00+08:00"},
            {"content": "月底交报告", "category": "todo", "expires_at": "2026-03-31"},
            {"content": "周五聚餐", "category": "todo", "expires_at": "2026-03-06T19:00:00Z"},
            {"content": "不是日期", "category": "todo", "expires_at": "next wednesday"},
            {"content": "事实没有到期", "category": "fact", "expires_at": "2026-03-04"},
            {"content": "数字到期", "category": "todo", "expires_at": 1234},
        ]
    )
    assert [c.expires_at for c in got] == [
        datetime(2026, 3, 4, 10, 0, tzinfo=UTC),
        datetime(2026, 3, 31, tzinfo=UTC),
        datetime(2026, 3, 6, 19, 0, tzinfo=UTC),
        None,
        None,
        None,
    ]


# --- dedupe against existing memories, through the real merge --------------------------------


async def test_restated_memory_reinforces_instead_of_duplicating(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = load_config(
        None,
        env=with_storage({"CHATMEM_MODEL": "gpt-fake", "OPENAI_BASE_URL": fake.base_url}),
        workspace=tmp_path / "ws",
    )
    config = config.model_copy(
        update={"llm": config.llm.model_copy(update={"max_retries": 0, "timeout_seconds": 2.0})}
    )
    clock = ManualClock(NOW)
    scope = ScopeKey("peer:alice")
    async with MemoryCore.open(config, clock=clock) as core:
        old, _ = await core.memories.capture(
            scope, "用户偏好用 pytest 而非 unittest", category="preference"
        )
        other, _ = await core.memories.capture(scope, "用户住在上海", category="fact")
        clock.advance(timedelta(days=1))
        fake.reply_json(
            [
                {"content": "用户喜欢 pytest", "category": "preference", "matches": old.id},
                {"content": "用户住在上海。", "category": "fact"},  # same text, no id given
                {"content": "用户养了一只猫", "category": "fact", "importance": "low"},
            ]
        )
        existing = await core.memories.entries(scope)
        candidates = await extract_with_llm(core.llm, CONVERSATION, existing, core.now())
        prompt = prompt_of(fake.chat_requests()[0])
        assert f"[{old.id}] 用户偏好用 pytest 而非 unittest" in prompt
        result = await core.memories.merge_candidates(
            scope, candidates, session_id="s-1", source="extract"
        )
        assert (result.count(ChangeKind.ADDED), result.count(ChangeKind.REINFORCED)) == (1, 2)
        after = {e.content: e for e in await core.memories.entries(scope)}
        assert sorted(after) == sorted(
            ["用户偏好用 pytest 而非 unittest", "用户住在上海", "用户养了一只猫"]
        )
        assert after["用户偏好用 pytest 而非 unittest"].hits == 1
        assert after["用户住在上海"].id == other.id and after["用户住在上海"].hits == 1


# --- the offline heuristic ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category", "importance"),
    [
        ("我喜欢用 vim 写代码", "preference", Importance.MEDIUM),
        ("我比较喜欢喝美式咖啡。", "preference", Importance.MEDIUM),
        ("我不喜欢开会太长", "preference", Importance.MEDIUM),
        ("我叫王小明", "fact", Importance.MEDIUM),
        ("我在北京的字节工作", "fact", Importance.MEDIUM),
        ("我来自成都", "fact", Importance.MEDIUM),
        ("我们决定用 FastAPI 而不是 Flask", "decision", Importance.HIGH),
        ("下周要准备演示材料", "todo", Importance.MEDIUM),
        ("我明天要去医院复查", "todo", Importance.MEDIUM),
        ("我对花生过敏", "fact", Importance.HIGH),
        ("I prefer tabs over spaces", "preference", Importance.MEDIUM),
        ("I really like dark roast coffee.", "preference", Importance.MEDIUM),
        ("My name is Alice", "fact", Importance.MEDIUM),
        ("I work at Acme as a data engineer", "fact", Importance.MEDIUM),
        ("I'm from Lisbon", "fact", Importance.MEDIUM),
        ("We decided to use PostgreSQL for the billing service", "decision", Importance.HIGH),
        ("I need to submit the tax report by Friday", "todo", Importance.MEDIUM),
        ("I'm allergic to shellfish", "fact", Importance.HIGH),
    ],
)
def test_heuristic_finds_clear_statements(text: str, category: str, importance: Importance) -> None:
    got = heuristic_candidates([TranscriptLine("user", text)])
    assert got == [Proposal(text.rstrip("。."), category, importance)]


@pytest.mark.parametrize(
    "text",
    [
        "你喜欢什么颜色？",
        "我喜欢这个方案吗",
        "你是谁",
        "你好",
        "谢谢",
        "哈哈哈",
        "今天天气不错",
        "Can you tell me what I prefer?",
        "What do I like to drink?",
        "Do you remember my name?",
        "How are you doing today",
        "hello there",
        "ok",
        "Do I prefer tabs?",
        "I think so.",
    ],
)
def test_heuristic_ignores_questions_and_small_talk(text: str) -> None:
    assert heuristic_candidates([TranscriptLine("user", text)]) == []


def test_heuristic_reads_only_the_user_and_splits_sentences() -> None:
    lines = [
        TranscriptLine("assistant", "我喜欢帮助你。我叫小助手。"),
        TranscriptLine("user", "你好！我叫李雷。我喜欢打篮球。你呢？"),
        TranscriptLine("user", "我叫李雷"),  # a repeat is one candidate
        TranscriptLine("tool", "我喜欢 JSON"),
    ]
    got = heuristic_candidates(lines)
    assert [(c.content, c.category) for c in got] == [
        ("我叫李雷", "fact"),
        ("我喜欢打篮球", "preference"),
    ]


# --- explicit requests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("记住：我下周三要出差", ("remember", "我下周三要出差")),
        ("请记住我不吃香菜", ("remember", "我不吃香菜")),
        ("帮我记一下，周五交周报", ("remember", "周五交周报")),
        ("记住 我的车牌是浙A12345", ("remember", "我的车牌是浙A12345")),
        ("remember that I use zsh", ("remember", "I use zsh")),
        ("Please remember: my birthday is May 3", ("remember", "my birthday is May 3")),
        ("忘掉我喜欢咖啡这件事", ("forget", "我喜欢咖啡这件事")),
        ("请忘记我的旧地址", ("forget", "我的旧地址")),
        ("别记 我的体重", ("forget", "我的体重")),
        ("forget about the Tokyo trip", ("forget", "the Tokyo trip")),
        ("Forget that I like tea", ("forget", "I like tea")),
        ("please forget: my old phone number", ("forget", "my old phone number")),
        # An imperative at the start (after a short lead-in), or a polite closing clause.
        ("我喜欢乌龙茶，请记住", ("remember", "我喜欢乌龙茶")),
        ("我对花生过敏，请记住这一点。", ("remember", "我对花生过敏")),
        ("我对花生过敏请记住", ("remember", "我对花生过敏")),
        ("别忘了我不吃辣", ("remember", "我不吃辣")),
        ("对了，记住我下周二出差", ("remember", "我下周二出差")),
        ("了解。记住：周五交周报。", ("remember", "周五交周报")),
        ("I prefer jasmine tea. Please remember.", ("remember", "I prefer jasmine tea")),
        ("don't forget that I'm vegan", ("remember", "I'm vegan")),
        ("please remember my badge number is 7788", ("remember", "my badge number is 7788")),
        ("Oh, and remember that standup is at nine.", ("remember", "standup is at nine")),
        ("By the way, please remember that I'm vegan", ("remember", "I'm vegan")),
        ("Remember: the wifi password is hunter2", ("remember", "the wifi password is hunter2")),
        ("Please remember, the code is 42", ("remember", "the code is 42")),
        ("请记住，我对花生过敏", ("remember", "我对花生过敏")),
        ("ok, remember that my dentist is on Friday", ("remember", "my dentist is on Friday")),
        ("/remember I use zsh", ("remember", "I use zsh")),
        ("I'm vegan, please remember that", ("remember", "I'm vegan")),
    ],
)
def test_explicit_requests(text: str, expected: tuple[str, str]) -> None:
    assert explicit_request(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "你还记得我叫什么吗",
        "do you remember my name?",
        "I will never forget this",
        "记住",
        "remember",
        "remembering names is hard",
        "forgetful people lose keys",
        "记住了吗？",
        "记住我说的话了吗",
        "remember when we went to Paris?",
        "remember what I told you yesterday?",
        "我喜欢咖啡",
        "好的，记住了",  # "got it"
        "我对花生过敏，记住了吗？",
        "ok, remember that?",
        "I can't remember that",  # no clause asks for it
        "You should remember that",
        "这个你一定要记住",
        "我永远记住",
        "Don't forget to call mom",  # a reminder to act, not a fact to keep
        "I always forget to remember that",
        # Said to people, not to the bot: advice idioms and closing reminders.
        "Remember, the wifi password is hunter2",
        "我不吃辣，别忘了",
        "I prefer jasmine tea, remember that",
        "I'm vegan, don't forget",
        # Not at the start: the turn is indexed and the extractor learns from it.
        "I moved. Remember that my address is 5 Main St.",
    ],
)
def test_not_explicit_requests(text: str) -> None:
    assert explicit_request(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "，" * 200_000 + "x",
        "。 " * 100_000,
        "\n" * 200_000 + "记住",
        "记住" * 100_000 + "？",
        "remember " * 50_000 + "?",
    ],
    ids=["commas", "full-stops", "newlines", "remember-zh", "remember-en"],
)
def test_explicit_request_on_huge_input_ends(text: str) -> None:
    """Long runs of separators made nested repeats of the "anywhere" patterns quadratic
    (minutes for a megabyte); each repeat is now bounded by one character class. No time
    is asserted: a quadratic search would not finish within the test's timeout."""
    assert explicit_request(text) is None


def test_a_candidate_utf8_cannot_hold_is_skipped_and_the_rest_kept() -> None:
    """A model's `"\\ud800"` decodes to a lone surrogate: no file could take it."""
    data = [
        {"content": "likes \ud800 tea", "category": "preference"},
        {"content": "line one\r\nline two", "category": "fact"},
    ]
    assert [c.content for c in candidates_from_json(data)] == ["line one\r\nline two"]
