"""Whose fact it is, through Telegram and a model: a group's session is extracted with
its speakers, and another member's "update" of a member's self-fact is kept as a claim.

The fake model answers chat turns with plain text and the extraction call with the
memories a model would give (each naming its `speaker`); the bot, the router, the
session, the extraction prompt and the merge are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memory_core.base.scope import ScopeKey
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from tests.functional.conftest import ALICE, BOB, GROUP, telegram_bot

MENTION = "@chatmem_bot"
EXTRACTS = "You extract long-term memories"


def extraction(memories: list[dict[str, Any]]) -> Any:
    """A responder: `memories` for the extraction call, a short reply to anything else."""

    def answer(body: dict[str, Any]) -> str:
        system = str(body["messages"][0].get("content") or "")
        return json.dumps(memories) if system.startswith(EXTRACTS) else "Noted."

    return answer


async def test_a_models_extraction_keeps_another_members_update_as_a_claim(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm) as bot:
        scope = ScopeKey(f"group:telegram:{GROUP}")
        fake_llm.set_responder(
            extraction([{"content": "Alice's son Leo is in grade 3", "speaker": "Alice"}])
        )
        await bot.group(GROUP, ALICE, f"{MENTION} my son Leo is in grade 3")
        await bot.group(GROUP, ALICE, "/new")
        [alice] = await bot.core.memories.entries(scope)
        assert alice.speaker == "Alice"
        prompt = next(
            str(r["messages"][1]["content"])
            for r in fake_llm.chat_requests()
            if str(r["messages"][0]["content"]).startswith(EXTRACTS)
        )
        assert "user (Alice): my son Leo is in grade 3" in prompt

        fake_llm.set_responder(
            extraction([{"content": "Alice's son Leo is in grade 4", "speaker": "Bob"}])
        )
        await bot.group(GROUP, BOB, f"{MENTION} no, Leo is in grade 4 now", first_name="Bob")
        await bot.group(GROUP, ALICE, "/new")
        kept = {e.content: e for e in await bot.core.memories.entries(scope)}
        assert kept[alice.content].score >= alice.score  # not demoted (a use reinforces it)
        claim = kept["Alice's son Leo is in grade 4"]
        assert (claim.speaker, claim.claim_on) == ("Bob", alice.id)

        [memory] = await bot.group(GROUP, ALICE, "/memory")
        assert "(by Alice) Alice's son Leo is in grade 3" in memory.text
        assert "(claim by Bob) Alice's son Leo is in grade 4" in memory.text
        await bot.group(GROUP, ALICE, f"{MENTION} which grade is Leo in?")
        asked = [
            "\n".join(str(m.get("content") or "") for m in r["messages"])
            for r in fake_llm.chat_requests()
            if "which grade is Leo in?" in str(r["messages"][-1].get("content"))
        ]
        assert asked and "(claim by Bob) Alice's son Leo is in grade 4" in asked[-1]
        assert "(by Alice) Alice's son Leo is in grade 3" in asked[-1]
