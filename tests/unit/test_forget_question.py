"""The answer to a forget question and the replies (`conversation/forget_question.py`)."""

from __future__ import annotations

from memory_core.conversation.forget_question import chosen_entries, forgotten_reply

ASKED = [("a1", "likes tea"), ("b2", "likes coffee"), ("c3", "likes water")]


def test_a_confirmation_picks_every_listed_entry() -> None:
    assert chosen_entries(ASKED, " Yes! ") == ASKED
    assert chosen_entries(ASKED, "确认。") == ASKED


def test_numbers_pick_those_entries_of_the_list() -> None:
    assert chosen_entries(ASKED, "1 3") == [ASKED[0], ASKED[2]]
    assert chosen_entries(ASKED, "2和3") == [ASKED[1], ASKED[2]]
    assert chosen_entries(ASKED, "7") == []


def test_anything_else_picks_nothing() -> None:
    assert chosen_entries(ASKED, "what's the weather") == []


def test_the_reply_names_what_was_forgotten() -> None:
    assert forgotten_reply([], False) == "That memory is already gone."
    assert forgotten_reply(["likes tea"], True) == "已忘掉：likes tea"
    assert forgotten_reply(["likes tea", "likes water"], False) == (
        "Forgot 2 memories:\n- likes tea\n- likes water"
    )
