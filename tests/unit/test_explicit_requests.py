"""Issue 34, item 3: only a request addressed to the bot is a request, and every turn a
person said is indexed, a request included.

"Remember" anywhere in a message made it a request: stored with no search entry and
answered "Got it, I'll remember" ("C'mon, remember how great you are! … I got a new
Ferrari!"; 24 turns of LoCoMo's public conversations). Now an imperative at the start
(after a short lead-in) or a polite closing clause is one; the rest is talk, indexed and
learnt from like any turn. A real request stays findable as a turn and makes its entry,
which ranks above it; the extractor does not learn it a second time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.merge_values import ChangeKind
from memory_core.base.requests import explicit_request, searchable
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from testkit.openai_server import FakeOpenAI
from testkit.quality import locomo
from tests.unit.chat_support import model_config

pytestmark = pytest.mark.timeout(120)

FERRARI = "C'mon, remember how great you are! … I got a new Ferrari! It's a masterpiece on wheels."
LOCOMO_TURNS = (
    # Public LoCoMo turns (snap-research/LoCoMo, conv-4x) that were taken for requests.
    "Remember, it takes time to form a bond, don't rush!",
    "Grooming slowly and gently, paying attention to sensitive areas like ears and paws. "
    "And remember to stay patient and positive throughout the grooming process.",
    "Remember that epic block in Game 7 of the '16 Finals? He chased down Iguodala and "
    "pinned the ball against the backboard. That kind of determination and heart is why I "
    "love basketball.",
    "And remember, you don't have to be friends with every character in this game. "
    "I don't want to spoil it, but just remember this!",
)
DENTIST = "my dentist is on Friday"


@pytest.mark.parametrize(
    "text",
    [
        FERRARI,
        *LOCOMO_TURNS,
        "I remember when we moved to Lisbon",
        "Do you remember my name?",
        "remember to buy milk tomorrow",  # asks for an action, said to oneself or a person
        "Remember me?",
        "记住，坚持就是胜利",  # advice, as "Remember, …"
        "记住要保持耐心",  # "remember to …"
        "别忘了带伞",  # a reminder to act
        "你还记得我们第一次见面吗？",
        "我永远记住那一天",
        "You're stronger than you think, remember that.",
        "Remember this!",
        "记住这一点！",
        # Some of the LoCoMo turns above in Chinese (our translation).
        "记住，建立感情需要时间，别着急！",
        "梳毛要慢要轻，注意耳朵和爪子。记住要保持耐心和积极。",
        "还记得16年总决赛第七场那个盖帽吗？他追身封盖了伊戈达拉。",
        "记住，你不必和游戏里的每个角色都做朋友。我不想剧透，但记住这一点就好！",
    ],
)
def test_remember_inside_talk_is_no_request(text: str) -> None:
    assert explicit_request(text) is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("remember that my dentist is on Friday", DENTIST),
        ("please remember my dentist is on Friday", DENTIST),
        ("ok, remember that my dentist is on Friday", DENTIST),
        ("/remember my dentist is on Friday", DENTIST),
        ("Remember: my dentist is on Friday.", DENTIST),
        ("My dentist is on Friday. Please remember.", "My dentist is on Friday"),
        ("记住我的牙医在周五", "我的牙医在周五"),
        ("帮我记一下，牙医在周五", "牙医在周五"),
        ("对了，记住我的牙医在周五", "我的牙医在周五"),
        ("我的牙医在周五，请记住", "我的牙医在周五"),
    ],
)
def test_an_imperative_to_the_bot_is_a_request(text: str, what: str) -> None:
    assert explicit_request(text) == ("remember", what)


def locomo_turns() -> list[str]:
    if not (locomo.DEFAULT_DIR / locomo.FILE).is_file():
        pytest.skip(f"LoCoMo dev split not found under {locomo.DEFAULT_DIR}")
    data = json.loads((locomo.DEFAULT_DIR / locomo.FILE).read_text(encoding="utf-8"))
    return [
        turn["text"]
        for sample in data
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]


def test_no_locomo_dev_turn_is_a_request_and_every_one_is_searchable() -> None:
    """Two people talking to each other ask the bot for nothing: on main 8 of the dev
    split's turns were requests (and so never indexed)."""
    turns = locomo_turns()
    saying = [t for t in turns if "remember" in t.lower()]
    requests = [t for t in turns if explicit_request(t) is not None]
    print(f"LoCoMo dev: {len(turns)} turns, {len(saying)} say 'remember', {len(requests)} requests")
    assert len(saying) >= 40 and requests == []
    assert all(searchable((False, t) for t in turns))


async def test_locomo_turns_saying_remember_are_indexed_and_get_no_confirmation(
    core: MemoryCore,
) -> None:
    """Stored as the LoCoMo protocol stores them (a group scope, the speaker's name): each
    turn saying "remember" is found by its own words, and none is confirmed."""
    scope = ScopeKey("group:bench:locomo")
    turns = [t.strip() for t in locomo_turns() if "remember" in t.lower()]
    for text in turns:
        result = await core.conversation.turn(scope, text, speaker="Ann")
        assert not result.reply.startswith("Got it")
    assert await core.memories.entries(scope) == []
    missing = [
        t
        for t in turns
        if not any(
            t in h.text
            for h in await core.finder.search(
                scope, SearchRequest(t, kinds=[ChunkKind.MESSAGE], limit=10)
            )
        )
    ]
    print(f"LoCoMo turns saying 'remember': {len(turns)} stored, {len(missing)} not found")
    assert missing == []


@pytest.mark.storage
async def test_a_real_request_makes_its_entry_and_stays_findable_as_a_turn(
    core: MemoryCore,
) -> None:
    said = f"remember that {DENTIST}"
    reply = (await core.conversation.turn(MAIN, said)).reply
    assert reply == f"Got it, I'll remember: {DENTIST}"
    [entry] = await core.memories.entries(MAIN)
    assert entry.content == DENTIST
    hits = await core.finder.search(MAIN, "dentist Friday")
    assert hits[0].kind is ChunkKind.LONG_TERM and hits[0].text == DENTIST  # not hidden
    assert not any("Got it" in h.text for h in hits)
    turns = await core.finder.search(
        MAIN, SearchRequest("dentist Friday", kinds=[ChunkKind.MESSAGE])
    )
    assert [h.text for h in turns] == [f"user: {said}"]
    # The extractor does not learn the request a second time.
    done = await core.conversation.new_session(MAIN)
    assert done.result is not None and done.result.count(ChangeKind.ADDED) == 0
    assert [e.content for e in await core.memories.entries(MAIN)] == [DENTIST]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


async def test_a_live_bot_answers_the_ferrari_message_itself(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    """The model answers it (no "Got it, I'll remember"), nothing is captured, and the
    message is found by search."""
    fake.reply_text("A Ferrari! Congratulations, enjoy the drive.")
    async with MemoryCore.open(model_config(fake, workspace), clock=clock) as core:
        result = await core.conversation.turn(MAIN, FERRARI)
        assert result.reply == "A Ferrari! Congratulations, enjoy the drive."
        assert fake.last_messages()[-1] == {"role": "user", "content": FERRARI}
        assert await core.memories.entries(MAIN) == []
        hits = await core.finder.search(MAIN, "Ferrari")
        assert any(FERRARI in h.text for h in hits)


@pytest.mark.parametrize(
    ("said", "learnt"),
    [
        ("我每天早上跑步五公里", "我每天早上跑步五公里"),
        ("我周末经常去爬山。", "我周末经常去爬山"),
        ("每周三晚上我都去游泳", "每周三晚上我都去游泳"),
        ("I swim every Wednesday evening.", "I swim every Wednesday evening"),
        ("I usually take the bus to work", "I usually take the bus to work"),
    ],
)
async def test_offline_new_learns_a_habit(core: MemoryCore, said: str, learnt: str) -> None:
    """Issue 34, item 8: the heuristic extractor had rules for preferences, facts about a
    person, decisions and plans, none for a routine, so "我每天早上跑步五公里" was lost."""
    await core.conversation.turn(MAIN, said)
    done = await core.conversation.new_session(MAIN)
    assert done.result is not None and done.result.count(ChangeKind.ADDED) == 1
    assert [e.content for e in await core.memories.entries(MAIN)] == [learnt]
