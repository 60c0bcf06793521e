"""An index whose terms an older tokenizer made is tokenized again when it is opened
(memory_core/recall/index/retokenize.py): every chunk, in place, exactly as a new index
would hold it, with its postings, frequencies and counters."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import memory_core.base.text as text_module
from memory_core.base.compounds import Listed
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.text import TOKENIZER_VERSION, tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index.retokenize import index_text
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import database, index_message, index_of, sql, sql_write

pytestmark = pytest.mark.storage

PEER = ScopeKey("peer:5")
ARCHIVE = "memory/2026-02-01-chat-export.md"


async def state(core: MemoryCore) -> dict[str, Any]:
    """What BM25 reads of the index, per scope, without ids."""
    out: dict[str, Any] = {}
    index = index_of(core)
    for scope in (MAIN, PEER):
        sid = await index.scope_id(scope)
        out[scope.value] = (
            await sql(
                core,
                "SELECT path, line_from, piece, kind, text, tokens FROM chunks"
                " WHERE scope_id = ? ORDER BY path, line_from, piece",
                sid,
            ),
            await sql(core, "SELECT term, df FROM terms WHERE scope_id = ? ORDER BY term", sid),
            await sql(core, "SELECT chunk_count, token_count FROM scopes WHERE id = ?", sid),
        )
    return {k: [[tuple(r) for r in part] for part in v] for k, v in out.items()}


async def found(core: MemoryCore, scope: ScopeKey, query: str) -> list[str]:
    return [
        h.text
        for h in await core.finder.search(scope, SearchRequest(query, limit=20, min_score=0.0))
    ]


async def test_an_older_tokenizers_index_is_tokenized_again_at_open(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    when = START - timedelta(hours=2)
    with monkeypatch.context() as old:
        # The tokenizer before compounds (version 1).
        old.setattr(text_module, "closed_compounds", lambda: Listed(frozenset(), frozenset()))
        old.setattr(text_module, "hyphen_joins", lambda text: iter(()))
        assert tokenize("road trip") == ["road", "trip"]
        async with MemoryCore.open(config) as core:
            await core.notes.append(MAIN, "we planned a road trip to the coast")
            await core.notes.append(PEER, "the dentist check-up went fine")
            await core.memories.capture(MAIN, "user loves ice cream in summer")
            await core.memories.flush()
            path = core.workspace.root / ARCHIVE
            path.write_text(
                "# 2026-02-01 conversation\n\n19:02:00 Mia: my e-mail is down again\n",
                encoding="utf-8",
            )
            await index_of(core).sync_scope(MAIN)
            await index_message(core, PEER, "sess-1", 7, "Mia", "a week-end of self care", when)
            await sql_write(
                core, ("UPDATE index_meta SET value = ? WHERE key = 'tokenizer'", ("1",))
            )
            assert await found(core, MAIN, "roadtrip") == []
    assert tokenize("road trip") == ["road", "roadtrip", "trip"]

    async with MemoryCore.open(config) as core:
        # Found by the new terms: the index was brought to the running tokenizer.
        assert await found(core, MAIN, "roadtrip") == ["we planned a road trip to the coast"]
        assert await found(core, MAIN, "icecream")
        assert any("e-mail" in text for text in await found(core, MAIN, "email"))
        assert await found(core, PEER, "checkups") == ["the dentist check-up went fine"]
        assert any("self care" in text for text in await found(core, PEER, "selfcare"))
        assert await sql(core, "SELECT value FROM index_meta WHERE key = 'tokenizer'") == [
            (str(TOKENIZER_VERSION),)
        ]
        # Exactly what reading every file again makes (the messages keep their terms).
        tokenized = await state(core)
        await index_of(core).rebuild()
        assert await state(core) == tokenized
        messages = await sql(core, "SELECT kind, text, tokens FROM chunks WHERE kind = 'message'")
        assert [
            (tokens, " ".join(tokenize(index_text(kind, text, None))))
            for kind, text, tokens in messages
        ] == [(tokens, tokens) for _, _, tokens in messages]
        if database(core).dialect.name == "sqlite":
            await sql(core, "INSERT INTO fts_scoped (fts_scoped) VALUES ('integrity-check')")


async def test_a_current_index_is_not_tokenized_again(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check costs a read: a later open with the same version rewrites nothing."""
    async with MemoryCore.open(config) as core:
        await core.notes.append(MAIN, "a road trip")
    calls: list[int] = []
    import memory_core.recall.index.retokenize as retokenize

    real = retokenize.retokenize
    monkeypatch.setattr(retokenize, "retokenize", lambda conn: calls.append(1) or real(conn))
    async with MemoryCore.open(config) as core:
        assert await found(core, MAIN, "roadtrip") == ["a road trip"]
    assert calls == []
