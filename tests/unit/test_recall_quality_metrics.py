"""The recall quality harness (bench/recall_quality.py): matching hits to labelled turns,
the metrics, the loaders, and one small run of each kind of set through a real core."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_core.config import Config
from testkit.quality import labelled, locomo, madial, published
from testkit.quality.metrics import (
    Scores,
    finds,
    found_ids,
    found_turns,
    frac_at,
    hit_lines,
    ndcg_at,
    recall_at,
    score,
    summarise,
)
from testkit.quality.report import Group, Key, main_table, pooled, type_table
from testkit.quality.setup import (
    apply_overrides,
    merge_overrides,
    parse_set,
    peer_scope,
    sets_to_overrides,
    zone_of,
)

E = frozenset[int]()


def f(*items: int) -> frozenset[int]:
    return frozenset(items)


# --- matching -------------------------------------------------------------------------


def test_hit_lines_drop_speaker_time_and_bullet() -> None:
    text = (
        "Maya: did 3 runs\n18:52:00 Maya: IT band\n19:01 assistant: rest it\n- a summary line\n\n"
    )
    assert hit_lines(text) == ["did 3 runs", "IT band", "rest it", "a summary line"]


def test_hit_lines_strip_one_prefix_only() -> None:
    """A turn that itself starts 'Note: …' keeps it once the speaker is gone."""
    assert hit_lines("Maya: Note: bring the keys") == ["Note: bring the keys"]


def test_a_turn_inside_an_exchange_is_found() -> None:
    hit = "assistant: What did they say?\nMaya: IT band.  he's called   Callum, at the clinic"
    assert finds("IT band. he's called Callum, at the clinic", hit)
    assert not finds("he's called Tom", hit)


def test_a_turn_split_over_lines_of_a_message_is_found() -> None:
    assert finds("first line second line", "Maya: first line\nsecond line")


def test_a_fragment_of_a_long_turn_is_found_only_when_long_enough() -> None:
    turn = "we moved the wedding to saturday 5 September, same venue, all plans out the window"
    assert finds(turn, "Maya: we moved the wedding to saturday 5 September")
    assert not finds(turn, "Maya: same venue")  # under MIN_FRAGMENT characters


def test_chinese_turns_match_with_archive_prefix() -> None:
    turn = "对 就是上海那家做跨境电商的，用户体验设计岗，涨了差不多35%"
    assert finds(turn, f"21:12:00 晓雯: {turn}")
    assert finds(turn, "- 对 就是上海那家做跨境电商的，用户体验设计岗")


def test_found_turns_lists_every_turn_a_hit_shows() -> None:
    turns = ["alpha beta gamma", "delta epsilon"]
    hits = ["Maya: nothing here", "Maya: alpha beta gamma\nassistant: delta epsilon"]
    assert found_turns(turns, hits) == [E, f(0, 1)]


def test_found_ids_counts_a_repeated_id_once() -> None:
    assert found_ids([3, 7], [9, 7, 7, 3]) == [E, f(1), E, f(0)]


# --- metrics --------------------------------------------------------------------------


def test_frac_and_recall() -> None:
    found = [E, f(0), E, f(0), E, f(1)]
    assert frac_at(found, 2, 5) == 0.5
    assert frac_at(found, 2, 10) == 1.0
    assert recall_at(found, 5) == 1.0
    assert recall_at(found, 1) == 0.0
    assert frac_at([], 0, 5) == 0.0


def test_ndcg_counts_only_new_items_and_caps_the_ideal() -> None:
    found = [E, f(0), f(0), f(1)]
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at(found, 2, 5) == pytest.approx(expected)
    # Seven wanted items: the ideal holds five relevant hits, not seven.
    perfect = [f(i) for i in range(5)]
    assert ndcg_at(perfect, 7, 5) == pytest.approx(1.0)
    # One hit finding two items is one relevant rank.
    assert ndcg_at([f(0, 1)], 2, 5) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at([E, E], 1, 5) == 0.0


def test_score_and_summarise() -> None:
    one = score([f(0), E], 1)
    assert one == Scores(recall5=1.0, ndcg5=1.0, frac5=1.0, frac10=1.0, shown5=1.0)
    # A hit counts for what it is anchored on; what it only shows is a diagnostic.
    beside = score([E, E], 1, shown=[f(0), E])
    assert (beside.frac5, beside.recall5, beside.shown5) == (0.0, 0.0, 1.0)
    two = score([E] * 5 + [f(0)], 1)
    assert (two.recall5, two.frac5, two.frac10) == (0.0, 0.0, 1.0)
    mean = summarise([one, two])
    assert (mean.n, mean.recall5, mean.frac10) == (2, 0.5, 1.0)
    assert summarise([]).n == 0


def test_locomo_reading() -> None:
    """The public split's own forms: session times and evidence ids as written there."""
    assert locomo.session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert locomo.session_time("12:09 am on 1 January, 2024").hour == 0
    known = {"D8:6", "D9:17", "D11:26"}
    assert locomo.evidence_ids(["D8:6; D9:17", "D:11:26", "D99:1"], known) == (
        "D8:6",
        "D9:17",
        "D11:26",
    )


# --- report ---------------------------------------------------------------------------


def test_tables_pool_languages_and_break_down_types() -> None:
    a = Group(Key("en-a", "explicit", "history", "current"))
    a.add(score([f(0)], 1), "single")
    b = Group(Key("en-b", "explicit", "history", "current"))
    b.add(score([E], 1), "multi")
    (merged,) = pooled("en (all)", [a, b])
    assert merged.summary.n == 2 and merged.summary.recall5 == 0.5
    table = main_table([a, merged])
    assert "| en (all) | explicit | history | current | 2 | 50.0 |" in table
    types = type_table([merged])
    assert "| 100.0 (1) | 0.0 (1) | - | - |" in types


# --- setup ----------------------------------------------------------------------------


def test_set_values_parse_as_json_else_string() -> None:
    assert parse_set("recall.context_window=[]") == ("recall", "context_window", [])
    assert parse_set("embedding.provider=none") == ("embedding", "provider", "none")
    assert sets_to_overrides(["recall.k1=1.5", "recall.b=0.5"]) == {"recall": {"k1": 1.5, "b": 0.5}}
    with pytest.raises(ValueError):
        parse_set("k1=1.5")


def test_overrides_are_validated_like_the_config_file() -> None:
    layered = merge_overrides({"recall": {"k1": 1.0, "b": 0.5}}, {"recall": {"k1": 2}})
    config = apply_overrides(Config(), layered)
    assert (config.recall.k1, config.recall.b) == (2.0, 0.5)
    with pytest.raises(ValueError):
        apply_overrides(Config(), {"recall": {"no_such_key": 1}})
    with pytest.raises(ValueError):
        apply_overrides(Config(), {"nowhere": {"k1": 1}})


def test_zone_and_scope() -> None:
    from datetime import datetime

    assert zone_of(datetime.fromisoformat("2026-01-06T21:10:00+08:00")) == "Etc/GMT-8"
    assert zone_of(datetime.fromisoformat("2026-01-06T21:10:00+00:00")) == "UTC"
    assert zone_of(datetime.fromisoformat("2026-01-06T21:10:00+05:30")) == "UTC"
    assert peer_scope("en-a-01").value == "peer:en-a-01"


# --- labelled sets --------------------------------------------------------------------

SAMPLE: dict[str, Any] = {
    "part": "xx-a",
    "language": "en",
    "conversations": [
        {
            "id": "xx-a-01",
            "user": "Maya",
            "sessions": [
                {
                    "id": "s1",
                    "started_at": "2026-01-12T19:05:00+00:00",
                    "turns": [
                        {"role": "user", "text": "my knee hurts after running"},
                        {"role": "assistant", "text": "Sounds like the IT band. See a physio."},
                        {"role": "user", "text": "booked the physio, he's called Callum"},
                        {"role": "assistant", "text": "Good luck with Callum."},
                    ],
                },
                {
                    "id": "s2",
                    "started_at": "2026-02-02T08:00:00+00:00",
                    "turns": [
                        {"role": "user", "text": "we are painting the kitchen sage green"},
                        {"role": "assistant", "text": "Sage green suits a kitchen."},
                    ],
                },
            ],
            "questions": [
                {
                    "id": "xx-a-01-q01",
                    "asked_at": "2026-03-03T20:10:00+00:00",
                    "type": "single",
                    "question": "What is the name of my physio?",
                    "answer": "Callum",
                    "evidence": [["s1", 2]],
                },
                {
                    "id": "xx-a-01-q02",
                    "asked_at": "2026-03-03T20:12:00+00:00",
                    "type": "multi",
                    "question": "Which colour are we painting the kitchen, and what hurt?",
                    "answer": "sage green; the knee",
                    "evidence": [["s2", 0], ["s1", 0]],
                },
            ],
        }
    ],
}


def test_parse_set_checks_every_label() -> None:
    dataset = labelled.parse_set(SAMPLE, "xx-a")
    conv = dataset.conversations[0]
    assert dataset.questions == 2
    assert conv.evidence_texts(conv.questions[0]) == ["booked the physio, he's called Callum"]
    assert conv.sessions[0].at(2).isoformat() == "2026-01-12T19:07:00+00:00"
    assert dataset.limited(1).questions == 1
    broken = {**SAMPLE, "conversations": [{**SAMPLE["conversations"][0]}]}
    broken["conversations"][0]["questions"] = [
        {**SAMPLE["conversations"][0]["questions"][0], "evidence": [["s1", 9]]}
    ]
    with pytest.raises(ValueError, match="names no turn"):
        labelled.parse_set(broken, "xx-a")


def test_recorded_messages_carry_the_users_name() -> None:
    conv = labelled.parse_set(SAMPLE, "xx-a").conversations[0]
    messages = labelled.recorded(conv, conv.sessions[0])
    assert [(m.role, m.speaker) for m in messages[:2]] == [("user", "Maya"), ("assistant", "")]


async def test_a_small_set_runs_in_both_modes(tmp_path: Path) -> None:
    dataset = labelled.parse_set(SAMPLE, "xx-a")
    runs = await labelled.run_set(dataset, labelled.MODES, {}, tmp_path)
    assert set(runs) == {"history", "archived"}
    history, archived = runs["history"], runs["archived"]
    assert history.stored["messages false"] == 6
    assert archived.stored["archived verbatim"] == 6 and archived.stored["summarised"] == 0
    assert {k for o in history.outcomes for k in o.kinds} == {"message"}
    assert {k for o in archived.outcomes for k in o.kinds} == {"archive_raw"}
    for run in (history, archived):
        assert len(run.outcomes) == 4  # two questions, two paths
        physio = [o for o in run.outcomes if o.question == "xx-a-01-q01"]
        assert all(o.scores.recall5 == 1.0 for o in physio)


# --- MADial-Bench ---------------------------------------------------------------------


def test_dialogue_lines_and_query() -> None:
    assert madial.parse_line('<Bart>: "I won!"\n') == madial.Line("Bart", "I won!")
    assert madial.parse_line(' <Lisa>:"我赢了！"\n') == madial.Line("Lisa", "我赢了！")
    assert madial.parse_line("<BOD>\n") == madial.Line(None, "")
    rows = [
        {
            "dialogue": [
                "<BOD>\n",
                '<Bart>: "hi"\n',
                '<Assistant>: "hello"\n',
                '<Bart>: "ice cream please"\n',
                '<Assistant>: "Remember the mango one?"\n',
                "<EOD>\n",
            ],
            "test-turn": [4],
            "relevant-id": [2],
            "user-id": 1,
        }
    ]
    memories: list[dict[str, Any]] = [
        {"1": {"time": "2023-05-01", "scene": "Activity", "event": "Bart won a race."}},
        {
            "2": {
                "time": "2023-06-01",
                "scene": "Preferences",
                "event": "Bart tried mango ice cream.",
            }
        },
    ]
    dataset = madial.parse_set("en", memories, rows)
    assert [m.user for m in dataset.memories] == [1, 1]
    assert dataset.dialogues[0].query() == ("ice cream please", ["hi", "hello"])
    assert madial.category_of(dataset.memories[1]) == "preference"
    assert dataset.asked_at().isoformat() == "2023-06-02T12:00:00+00:00"


async def test_a_small_madial_set_maps_hits_to_memory_ids(tmp_path: Path) -> None:
    rows = [
        {
            "dialogue": [
                "<BOD>\n",
                '<Bart>: "shall we get mango ice cream today?"\n',
                '<Assistant>: "Like last time!"\n',
                "<EOD>\n",
            ],
            "test-turn": [2],
            "relevant-id": [2],
            "user-id": 1,
        },
        {
            "dialogue": [
                "<BOD>\n",
                '<Lisa>: "the science fair is next week"\n',
                '<Assistant>: "Your ecosphere won!"\n',
                "<EOD>\n",
            ],
            "test-turn": [2],
            "relevant-id": [3],
            "user-id": 2,
        },
    ]
    memories: list[dict[str, Any]] = [
        {
            "1": {
                "time": "2023-05-01",
                "scene": "Activity",
                "event": "Bart won the 100 meters race.",
            }
        },
        {
            "2": {
                "time": "2023-06-01",
                "scene": "Preferences",
                "event": "Bart tried mango ice cream at the new shop.",
            }
        },
        {
            "3": {
                "time": "2023-04-01",
                "scene": "Activity",
                "user-id": 2,
                "event": "Lisa won first prize at the science fair with an ecosphere.",
            }
        },
    ]
    dataset = madial.parse_set("en", memories, rows)
    run = await madial.run_set(dataset, {}, tmp_path)
    assert (run.memories, run.entries) == (3, 3)
    by_path = {(o.dialogue, o.path): o for o in run.outcomes}
    assert by_path[(0, "explicit")].ranked[0] == 2
    assert by_path[(1, "automatic")].ranked[0] == 3
    assert 1 not in by_path[(1, "automatic")].ranked  # another user's scope
    assert all(o.scores.recall5 == 1.0 for o in run.outcomes)


def test_published_baselines_score_as_stored() -> None:
    baselines = published.load()
    assert {b.language for b in baselines} == {"en", "zh"}
    for baseline in baselines:
        assert len(baseline.top5) == 160 and all(len(t) == 5 for t in baseline.top5)
    if not (madial.DEFAULT_DIR / "en" / "dialogue.json").is_file():
        pytest.skip("MADial-Bench is not next to the repository")
    sets = {lang: madial.load_set(madial.DEFAULT_DIR, lang) for lang in madial.LANGUAGES}
    for baseline in baselines:
        summary = published.score_baseline(baseline, sets[baseline.language])
        assert summary.n == 160
        assert summary.recall5 == pytest.approx(baseline.stored["recall@5"], abs=1e-6)
        assert summary.ndcg5 == pytest.approx(baseline.stored["ndcg@5"], abs=1e-6)
        assert summary.frac5 == pytest.approx(baseline.stored["frac@5"], abs=1e-6)
