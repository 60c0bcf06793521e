"""A group member cannot demote another member's self-fact.

Through the real path (the shared router, a group chat's scope, a real workspace):
Alice states three facts about herself, Bob sends six "updates" of them. None of
Alice's facts is demoted; Bob's texts are stored as his claims (a belief with Bob as
speaker, naming the fact it disputes) and shown to the model as claims, after Alice's
facts. When Alice restates her facts they are reinforced and rank above Bob's claims in
search, in recall's injection and in the prompt. The same holds for what the offline
extractor takes from a group session at `/new`. Reported: the counts printed.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter
from memory_core.base.entries import MemoryClass, MemoryEntry
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest

_ids = itertools.count(1)

SELF_FACTS = [
    "My son Leo is in grade 3 at Hillview primary school",
    "My new phone number is 555-0142, I prefer texts to calls",
    "我儿子上三年级",
]
UPDATES = [
    ("remember that ", "Alice's son Leo is in grade 4 at Hillview primary school"),
    ("/remember ", "Alice's son Leo is in grade 5 at Hillview primary school"),
    ("remember that ", "Alice's new phone number is 555-0143, she prefers texts to calls"),
    ("/remember ", "Alice's new phone number is 555-0199, she prefers texts to calls"),
    ("/remember ", "Alice的儿子上四年级"),
    ("/remember ", "Alice的儿子上五年级"),
]
"""Bob's six updates, each one of Alice's facts with another value, said of her by name:
read as Alice would say it ("my son ..."), each is an update of her fact
(tests/reliability/test_updates_not_folded.py). Bob's own first-person texts are about
Bob (`test_a_members_first_person_fact_is_their_own`)."""
QUERIES = ["Leo grade Hillview primary school", "phone number 555 texts calls", "儿子 年级"]


def said(sender: str, text: str) -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        account_id="bot1",
        sender_id=sender.lower(),
        sender_name=sender,
        chat_type="group",
        chat_id="-1001",
        text=text,
        message_id=str(next(_ids)),
        timestamp=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        mentioned=True,
    )


async def send(router: MessageRouter, sender: str, text: str) -> str:
    reply = await router.handle(said(sender, text))
    assert reply is not None, text
    assert reply.scope.value.startswith("group:")
    return reply.text


async def entries(core: MemoryCore, scope: ScopeKey) -> dict[str, MemoryEntry]:
    return {e.content: e for e in await core.memories.entries(scope)}


async def test_another_member_cannot_demote_a_self_fact(core: MemoryCore) -> None:
    router = MessageRouter(core, bot_username="chatmem_bot")
    scope = router.scope_of(said("Alice", "hi"))
    for fact in SELF_FACTS:
        await send(router, "Alice", f"/remember {fact}")
    before = await entries(core, scope)
    stated = {fact: before[fact].score for fact in SELF_FACTS}

    for prefix, update in UPDATES:
        reply = await send(router, "Bob", prefix + update)
        assert reply.endswith(update) and ("claim by Bob" in reply or "Bob 的说法" in reply)
    after = await entries(core, scope)
    demoted = [fact for fact in SELF_FACTS if after[fact].score < stated[fact]]
    claims = [after[text] for _, text in UPDATES]
    print(f"\nself-facts demoted by another member: {len(demoted)} of {len(SELF_FACTS)}")
    assert demoted == []

    # Bob's texts are his claims on Alice's facts, shown to the model as such.
    alice_ids = {after[fact].id: fact for fact in SELF_FACTS}
    assert [c.speaker for c in claims] == ["Bob"] * len(UPDATES)
    assert [alice_ids.get(c.claim_on or "") for c in claims] == [
        SELF_FACTS[0], SELF_FACTS[0], SELF_FACTS[1], SELF_FACTS[1], SELF_FACTS[2], SELF_FACTS[2]
    ]  # fmt: skip
    assert all(c.memory_class is MemoryClass.BELIEF for c in claims)
    assert all(after[fact].speaker == "Alice" for fact in SELF_FACTS)
    print(f"stored as Bob's claims: {len(claims)} of {len(UPDATES)}")
    block = await core.snapshots.prompt_block(scope)
    for fact in SELF_FACTS:
        assert f"(by Alice) {fact}" in block
    for _, text in UPDATES:
        assert f"(claim by Bob) {text}" in block
        assert block.index(f"(claim by Bob) {text}") > max(
            block.index(f"(by Alice) {fact}") for fact in SELF_FACTS
        )
    text = (await core.long_term_text(scope)).replace(" ", "")
    assert text.count('"speaker":"Bob"') == len(UPDATES)
    assert text.count('"claim_on":') == len(UPDATES)

    # Alice says them again: her facts are reinforced and rank above Bob's claims.
    for fact in SELF_FACTS:
        await send(router, "Alice", f"remember that {fact}")
    restated = await entries(core, scope)
    assert all(restated[fact].score > stated[fact] for fact in SELF_FACTS)
    assert all(restated[c.content].score < after[c.content].score for c in claims)

    above = 0
    for fact, query in zip(SELF_FACTS, QUERIES, strict=True):
        hits = await core.finder.search(scope, SearchRequest(query, limit=10))
        shown = [h.text for h in hits]
        mine = shown.index(f"(by Alice) {fact}")
        # Bob's claims on the fact are shown as claims, and what he said is shown as his
        # turns (every turn is indexed, a request too): Alice's fact ranks above all of it.
        claimed = [i for i, t in enumerate(shown) if t.startswith("(claim by Bob)")]
        theirs = claimed + [i for i, t in enumerate(shown) if t.startswith("Bob:")]
        assert claimed, shown
        assert all(mine < i for i in theirs), "\n---\n".join(shown)
        injection = await core.finder.recall(scope, query)
        lines = injection.block.splitlines()
        first_mine = next(i for i, line in enumerate(lines) if f"(by Alice) {fact}" in line)
        assert all(first_mine < i for i, line in enumerate(lines) if "(claim by Bob)" in line)
        assert not any(f"] {t}" in line or f"- {t}" in line for line in lines for _, t in UPDATES)
        above += 1
    block = await core.snapshots.prompt_block(scope)
    for fact in SELF_FACTS:
        mine = block.index(f"(by Alice) {fact}")
        assert all(
            block.find(f"(claim by Bob) {t}") in (-1, *range(mine + 1, len(block)))
            for _, t in UPDATES
        )
    print(f"after restating, Alice's fact ranks above Bob's claims: {above} of {len(SELF_FACTS)}")


async def test_a_group_sessions_extraction_keeps_whose_fact_it_is(core: MemoryCore) -> None:
    """`/new` in a group: the offline extractor's memories carry their speaker, and Bob's
    first-person "I am 35 ..." is Bob's own fact: no claim on Alice's age, no update."""
    router = MessageRouter(core, bot_username="chatmem_bot")
    scope = router.scope_of(said("Alice", "hi"))
    await send(router, "Alice", "I am 34 years old and work as a nurse.")
    await send(router, "Alice", "/new")
    alice = (await entries(core, scope))["I am 34 years old and work as a nurse"]
    assert alice.speaker == "Alice"
    await send(router, "Bob", "I am 35 years old and work as a nurse.")
    await send(router, "Alice", "/new")
    now = await entries(core, scope)
    assert now[alice.content].score == alice.score
    bob = now["I am 35 years old and work as a nurse"]
    assert (bob.speaker, bob.claim_on, bob.memory_class) == ("Bob", None, alice.memory_class)


async def test_a_direct_chat_keeps_no_speaker(core: MemoryCore) -> None:
    """Outside a group nothing changes: no speaker is written, an update demotes."""
    router = MessageRouter(core, bot_username="chatmem_bot")
    scope = router.scope_of(replace(said("Alice", "hi"), chat_type="direct", chat_id="alice"))
    update = "My son Leo is in grade 4 at Hillview primary school"
    for fact in (SELF_FACTS[0], update):
        reply = await router.handle(
            replace(said("Alice", f"/remember {fact}"), chat_type="direct", chat_id="alice")
        )
        assert reply is not None and reply.scope == scope
    kept = await entries(core, scope)
    assert kept[SELF_FACTS[0]].score < kept[update].score
    assert all(e.speaker is None and e.claim_on is None for e in kept.values())
    assert "speaker" not in await core.long_term_text(scope)


async def search_ranks(core: MemoryCore, scope: ScopeKey, query: str) -> list[str]:
    return [hit.text for hit in await core.finder.search(scope, SearchRequest(query, limit=10))]


async def test_each_member_has_their_own_first_person_facts(core: MemoryCore) -> None:
    """Issue 34 item 2, the review's case: Ann "I live in Beijing", Bob "I live in
    Shanghai" (his own fact), Bob "Ann lives in Shanghai" (his claim on Ann's fact), Ann
    says hers again (only the claim is refuted), and Ann's fact ranks above Bob's claim."""
    router = MessageRouter(core, bot_username="chatmem_bot")
    scope = router.scope_of(said("Ann", "hi"))
    ann_fact, bob_fact, bob_claim = (
        "I live in Beijing", "I live in Shanghai", "Ann lives in Shanghai",
    )  # fmt: skip
    await send(router, "Ann", f"remember that {ann_fact}")
    reply = await send(router, "Bob", f"remember that {bob_fact}")
    assert "claim" not in reply
    stored = await entries(core, scope)
    ann, bob = stored[ann_fact], stored[bob_fact]
    # (2) Bob's "I" is Bob: his own fact, Ann's untouched, nothing restated or updated.
    assert (ann.speaker, bob.speaker, bob.claim_on) == ("Ann", "Bob", None)
    assert bob.memory_class is not MemoryClass.BELIEF
    assert (ann.score, ann.hits) == (0.8, 0)
    block = await core.snapshots.prompt_block(scope)
    assert f"(by Bob) {bob_fact}" in block and "(claim by Bob)" not in block

    # (3) Bob's word about Ann is read against what Ann said of herself: a claim on it.
    reply = await send(router, "Bob", f"remember that {bob_claim}")
    assert "claim by Bob" in reply
    stored = await entries(core, scope)
    claim = stored[bob_claim]
    assert (claim.speaker, claim.claim_on) == ("Bob", ann.id)
    assert claim.memory_class is MemoryClass.BELIEF
    assert stored[ann_fact].score == ann.score and stored[bob_fact].score == bob.score
    print(f"\nBob's texts: own fact {bob.score:.2f}, claim on Ann's {claim.score:.2f}")

    # (4) Ann says hers again: reinforced; Bob's claim refuted; Bob's own fact stays.
    await send(router, "Ann", f"remember that {ann_fact}")
    restated = await entries(core, scope)
    assert restated[ann_fact].score > ann.score
    assert restated[bob_claim].score < claim.score
    assert restated[bob_fact].score == bob.score and restated[bob_fact].claim_on is None
    print(
        f"after Ann restates: Ann {restated[ann_fact].score:.2f}, Bob's own fact "
        f"{restated[bob_fact].score:.2f}, Bob's claim {restated[bob_claim].score:.2f}"
    )

    # (5) Search and recall rank Ann's fact above Bob's claim on it.
    for query in ("live", "Where does Ann live?", "Who lives in Shanghai?"):
        shown = await search_ranks(core, scope, query)
        assert f"(by Ann) {ann_fact}" in shown, (query, shown)
        mine = shown.index(f"(by Ann) {ann_fact}")
        theirs = [i for i, text in enumerate(shown) if text.startswith("(claim by Bob)")]
        assert theirs and all(mine < i for i in theirs), (query, shown)
    for query in ("Where does Ann live?", "where do Ann and Bob live"):
        lines = (await core.finder.recall(scope, query)).block.splitlines()
        first_mine = next(i for i, line in enumerate(lines) if f"(by Ann) {ann_fact}" in line)
        assert all(first_mine < i for i, line in enumerate(lines) if "(claim by Bob)" in line)
