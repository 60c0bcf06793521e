"""A long-term entry beats the chatter about it: after "remember that the staging server is
at 10.0.0.7", a search for "staging" shows the MEMORY.md entry first (the request's turn
and the bot's "Got it, I'll remember: …" used to rank first and hide the entry as their
near-copy); a conversation turn saying what an entry says ranks below the entry.

The request is a turn like any other: indexed, and findable below its entry (issue 34).
Commands and the chat engine's own replies are stored in the session (nothing said is
lost) but never indexed, as session messages or once archived."""

from __future__ import annotations

import asyncio
from datetime import UTC, timedelta
from pathlib import Path

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.records import Hit, RecordedMessage
from memory_core.base.requests import evidence, searchable
from memory_core.base.scope import MAIN
from memory_core.config import load_config
from memory_core.conversation.archive import render_raw
from memory_core.engine import MemoryCore
from memory_core.recall.chunking import chunk_file
from memory_core.recall.index.rerank import entries_over_turns
from memory_core.recall.request import SearchRequest
from memory_core.storage.sessions import ArchiveState, StoredMessage
from tests.conftest import START
from tests.support import candidate, recent_messages
from tests.unit.cli_support import Run, _clean_env, cli_fixture, ws_fixture  # noqa: F401  (fixtures)

STAGING = "the staging server is at 10.0.0.7"
HOME = "我住在杭州，在阿里巴巴做数据工程师"
STAGING_TALK = (f"remember that {STAGING}", "we had pizza for lunch")
HOME_TALK = (
    f"记住：{HOME}",
    "杭州的天气这几天很好",
    "周末想去杭州西湖走走",
    "杭州的龙井茶很有名",
)


def confirmation(hit: Hit) -> bool:
    """Whether a hit shows the bot's canned confirmation of a request."""
    return any(mark in hit.text for mark in ("Got it", "好的，我记住了"))


async def anchored(core: MemoryCore, hits: list[Hit], said: str) -> list[int]:
    """The ranks of the hits anchored on a conversation turn holding `said` (another
    turn's hit may show it beside its own)."""
    return [
        i
        for i, h in enumerate(hits)
        if h.kind is not ChunkKind.LONG_TERM
        and h.anchor is not None
        and said in (await core.finder.read(MAIN, h.path, h.anchor, 1)).text
    ]


async def talk(core: MemoryCore, *texts: str) -> None:
    for text in texts:
        await core.conversation.turn(MAIN, text)


# --- pure rules ------------------------------------------------------------------------


def test_requests_are_searchable_not_evidence_and_canned_replies_neither() -> None:
    turns = [
        (False, f"remember that {STAGING}"),
        (True, f"Got it, I'll remember: {STAGING}"),
        (False, "the deploy failed again"),
        (True, "Sorry to hear that."),
        (False, "/search staging"),
        (True, "1.20 MEMORY.md:8 …"),
        (False, "what now?"),
        (True, "Sorry, the model is unavailable right now; your message is saved."),
        (False, f"好的，我记住了：{HOME}"),  # a canned reply, whoever it is put down to
    ]
    assert evidence(turns) == [False, False, True, True, False, False, True, False, False]
    assert searchable(turns) == [True, False, True, True, False, False, True, False, False]


def test_an_entry_goes_above_the_turns_that_say_what_it_says() -> None:
    said = candidate(1, f"remember that {STAGING}", kind=ChunkKind.MESSAGE)
    other = candidate(2, "the staging deploy failed again today", kind=ChunkKind.MESSAGE)
    entry = candidate(3, STAGING, kind=ChunkKind.LONG_TERM)
    partly = candidate(4, "the staging rack is new", kind=ChunkKind.LONG_TERM)
    said.score, other.score, entry.score, partly.score = 3.0, 2.0, 1.0, 0.5
    entries_over_turns([said, other, entry, partly], 0.8)
    assert said.score < entry.score < 3.1
    assert (said.score, other.score) == (3.0, 2.0)  # turns keep their scores and order
    assert partly.score == 0.5  # "staging" alone does not say what a turn says


def message(number: int, role: str, text: str) -> StoredMessage:
    return StoredMessage(
        id=number,
        scope="main",
        session_id="s1",
        role=role,
        speaker="",
        content=text,
        created_at=START + timedelta(minutes=number),
        archived=ArchiveState.PENDING,
        archive_attempts=0,
        archive_next_at=None,
        compacted=False,
        meta={},
    )


def test_an_archived_request_gets_a_chunk_and_its_confirmation_none() -> None:
    messages = [
        message(1, "user", f"remember that {STAGING}"),
        message(2, "assistant", f"Got it, I'll remember: {STAGING}"),
        message(3, "user", "the staging deploy failed again today"),
        message(4, "assistant", "That is annoying."),
    ]
    text = render_raw(START.date(), messages, UTC)
    chunks = chunk_file("memory/2026-03-01-staging.md", text)
    assert [c.text.split(": ", 1)[1] for c in chunks] == [
        f"remember that {STAGING}",
        "the staging deploy failed again today",
        "That is annoying.",
    ]


# --- through a core -------------------------------------------------------------------


async def test_search_and_recall_show_the_entry_then_the_request(core: MemoryCore) -> None:
    await talk(core, *STAGING_TALK)
    hits = await core.finder.search(MAIN, "staging")
    assert hits[0].text == STAGING
    assert not any(confirmation(h) for h in hits)
    # The request is the entry's near-copy, so it takes no slot of its own beside the
    # entry; it is a turn all the same (it used to have no index row at all).
    turns = await core.finder.search(MAIN, SearchRequest("staging", kinds=[ChunkKind.MESSAGE]))
    assert await anchored(core, turns, f"remember that {STAGING}") == [0]
    recalled = (await core.finder.recall(MAIN, "where is the staging server")).hits
    assert recalled[0].text == STAGING
    assert not any(confirmation(h) for h in recalled)
    # Nothing said is lost: the session keeps the request and the reply.
    stored = [m.content for m in await recent_messages(core, MAIN, 10)]
    assert f"remember that {STAGING}" in stored
    assert f"Got it, I'll remember: {STAGING}" in stored


async def test_a_chinese_entry_is_found_among_the_talk_about_its_city(core: MemoryCore) -> None:
    """杭州 in more than three chunks is no rare name: the entry used to be dropped as the
    near-copy of the "记住：…" turn ranked above it."""
    await talk(core, *HOME_TALK)
    hits = await core.finder.search(MAIN, "杭州")
    texts = [h.text for h in hits]
    assert HOME in texts
    assert all(i > texts.index(HOME) for i in await anchored(core, hits, HOME))
    assert not any(confirmation(h) for h in hits)


async def test_an_entry_ranks_above_a_plain_turn_saying_the_same(core: MemoryCore) -> None:
    """Said in passing and saved (by extraction, a capture): the entry goes first and the
    turn, its near-copy, does not take a slot of its own."""
    await talk(core, HOME, *HOME_TALK[1:])
    await core.memories.capture(MAIN, HOME)
    hits = await core.finder.search(MAIN, "杭州")
    texts = [h.text for h in hits]
    assert HOME in texts
    said = [
        i
        for i, h in enumerate(hits)
        if h.kind is ChunkKind.MESSAGE
        and h.anchor is not None
        and HOME in (await core.finder.read(MAIN, h.path, h.anchor, 1)).text
    ]  # hits anchored on the turn that said it (another turn's hit may show it beside)
    assert all(i > texts.index(HOME) for i in said)


async def test_archived_chatter_stays_in_the_file_out_of_the_index(core: MemoryCore) -> None:
    await talk(core, *STAGING_TALK, "the staging deploy failed again today")
    report = await core.conversation.archive(MAIN)
    [path] = report.files
    archived = (core.workspace.root / path).read_text(encoding="utf-8")
    assert f"remember that {STAGING}" in archived
    assert f"Got it, I'll remember: {STAGING}" in archived
    hits = await core.finder.search(MAIN, "staging server")
    assert hits[0].kind is ChunkKind.LONG_TERM and hits[0].text == STAGING
    assert not any(confirmation(h) for h in hits)
    assert any(h.kind is ChunkKind.ARCHIVE_RAW for h in hits)  # the rest of the talk


async def test_a_recorded_conversation_indexes_requests_not_confirmations(
    core: MemoryCore, clock: ManualClock
) -> None:
    at = clock()
    await core.record_session(
        MAIN,
        "imported",
        at,
        [
            RecordedMessage("user", "Ann", f"remember that {STAGING}", at),
            RecordedMessage("assistant", "", f"Got it, I'll remember: {STAGING}", at),
            RecordedMessage("user", "Ann", "the staging deploy failed again today", at),
        ],
    )
    hits = await core.finder.search(MAIN, "staging")
    assert any(f"remember that {STAGING}" in h.text for h in hits)
    assert any("the staging deploy failed again today" in h.text for h in hits)
    assert not any(confirmation(h) for h in hits)


# --- through the command line ----------------------------------------------------------


def seed(workspace: Path, *texts: str) -> None:
    async def chat() -> None:
        async with MemoryCore.open(load_config(None, workspace=workspace)) as core:
            await talk(core, *texts)

    asyncio.run(chat())


def test_chatmem_search_staging_shows_the_entry_first(cli: Run, ws: Path) -> None:
    """It used to show only the request's turn: the entry appeared with --kind long_term."""
    seed(ws, *STAGING_TALK)
    hits = cli.json("search", "staging")
    assert (hits[0]["kind"], hits[0]["text"]) == ("long_term", STAGING)
    assert not any("Got it" in h["text"] for h in hits)


def test_chatmem_search_finds_the_chinese_entry(cli: Run, ws: Path) -> None:
    seed(ws, *HOME_TALK)
    hits = cli.json("search", "杭州")
    assert HOME in [h["text"] for h in hits]
    assert not any("好的，我记住了" in h["text"] for h in hits)
