"""A chat message over `MAX_MESSAGE_CHARS` is answered in one line and not stored: a turn
reads, tokenizes and indexes its whole text several times (a 10 MB line took 23 s and
gigabytes). One at the limit is an ordinary turn."""

from __future__ import annotations

from memory_core.base.scope import ScopeKey
from memory_core.conversation.chat import MAX_MESSAGE_CHARS
from memory_core.engine import MemoryCore

ALICE = ScopeKey("peer:alice")


async def test_a_message_over_the_limit_is_refused_in_one_line_and_not_kept(
    core: MemoryCore,
) -> None:
    at_limit = ("green tea " * MAX_MESSAGE_CHARS)[:MAX_MESSAGE_CHARS]
    over = at_limit + "x"
    refused = await core.conversation.turn(ALICE, over)
    assert "too long" in refused.reply and str(MAX_MESSAGE_CHARS) in refused.reply
    assert "\n" not in refused.reply
    zh = await core.conversation.turn(ALICE, "绿茶" * MAX_MESSAGE_CHARS)
    assert "太长" in zh.reply
    taken = await core.conversation.turn(ALICE, at_limit)
    assert "too long" not in taken.reply
    history = core.history
    stored = await history.session_messages(taken.session_id, include_compacted=True)
    assert [m.content for m in stored] == [at_limit.strip()]
