"""The quality bench's plain-BM25 floor (testkit/quality/floor.py) and the pooled
Chinese set (testkit/quality/pooled.py): the pure parts, and one small run of each
through a real core."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.base.chunks import ChunkKind
from testkit.quality import labelled, madial, pooled
from testkit.quality.floor import StoredChunk, rank, tokenize, top

from .test_recall_quality_metrics import SAMPLE

pytest.importorskip("jieba")


def test_tokens_are_jieba_words_without_punctuation_or_stopwords() -> None:
    assert tokenize("我喜欢喝咖啡！") == ["喜欢", "喝咖啡"]
    assert tokenize("Hello, the WORLD!") == ["hello", "world"]
    assert tokenize("。，！ ") == []


def test_top_ranks_best_first_ties_in_stored_order_and_never_a_zero() -> None:
    assert top([0.0, 2.0, 1.0, 2.0, 0.0], 10) == [1, 3, 2]
    assert top([0.5, 3.0, 1.0], 2) == [1, 2]


def test_rank_is_okapi_bm25_over_the_documents() -> None:
    docs = [["猫", "鱼"], ["狗", "骨头"], ["猫", "猫", "玩具"], ["天气"]]
    ranked = rank(docs, ["猫"], 5)
    assert set(ranked) == {0, 2} and ranked[0] == 2  # two mentions beat one
    assert rank(docs, ["骨头", "天气"], 1) in ([1], [3])
    assert rank(docs, ["不在"], 5) == [] and rank([], ["猫"], 5) == [] and rank(docs, [], 5) == []


def test_an_archived_turn_is_scored_without_its_time() -> None:
    chunk = StoredChunk(
        "memory/x.md", 3, 3, ChunkKind.ARCHIVE_RAW, None, None, "21:10:00 周航: 雅思考了"
    )
    assert chunk.words() == "周航: 雅思考了"
    hit = chunk.hit(1.5)
    assert (hit.path, hit.line_from, hit.kind, hit.score) == ("memory/x.md", 3, "archive_raw", 1.5)


# --- the pooled set -------------------------------------------------------------------


def _madial() -> madial.MadialSet:
    memories = (
        madial.Memory(1, 1, date(2023, 5, 2), "活动类", "Bart在海边放风筝，感到非常开心。"),
        madial.Memory(2, 1, date(2023, 5, 2), "喜好类", "Bart吃了芒果冰淇淋。"),
        madial.Memory(3, 2, date(2023, 5, 2), "活动类", "Lisa在海边放风筝。"),
    )
    dialogues = (
        madial.Dialogue(
            0,
            1,
            (
                madial.Line(None, ""),
                madial.Line("Bart", "我今天又想去放风筝了"),
                madial.Line("Assistant", "好呀"),
            ),
            2,
            (1,),
        ),
        madial.Dialogue(
            1,
            2,
            (madial.Line(None, ""), madial.Line("Lisa", "风筝"), madial.Line("Assistant", "嗯")),
            2,
            (3,),
        ),
    )
    return madial.MadialSet("zh", memories, dialogues)


def _labelled() -> labelled.LabelledSet:
    data = {**SAMPLE, "conversations": [{**SAMPLE["conversations"][0]}]}
    questions = list(SAMPLE["conversations"][0]["questions"])
    questions.append({**questions[0], "id": "xx-a-01-q03", "evidence": [["s1", 1]]})
    data["conversations"][0]["questions"] = questions
    return labelled.parse_set(data, "xx-a")


def test_weeks_to_moves_by_whole_weeks_into_the_week_before() -> None:
    target = datetime(2026, 6, 18, tzinfo=UTC)
    for moment in (datetime(2023, 1, 1, tzinfo=UTC), datetime(2026, 6, 12, tzinfo=UTC)):
        shift = pooled.weeks_to(moment, target)
        assert shift.days % 7 == 0 and shift.seconds == 0
        assert target - timedelta(days=7) < moment + shift <= target


def test_the_pool_keeps_user_turns_and_labels_as_the_sources_do() -> None:
    data = pooled.build(_madial(), [_labelled()])
    messages = data.messages()
    # MADial: every memory is its user's message; labelled: the user's turns only.
    assert {m.speaker for m in messages.values()} == {"Bart", "Lisa", "Maya"}
    assert len(messages) == 3 + 3
    assert not any("physio." in m.text for m in messages.values())  # an assistant turn
    by_id = {q.id: q for q in data.questions}
    assert "xx-a-01-q03" not in by_id  # its evidence is an assistant turn
    assert by_id["xx-a-01-q01"].evidence == ("xx-a-01/s1/2",)
    assert by_id["madial-zh-0"].evidence == ("madial/1",)
    assert by_id["madial-zh-0"].question == "我今天又想去放风筝了"
    assert by_id["madial-zh-0"].type == "open"
    # Weekdays kept; every message at its own second; questions in time order.
    assert messages["madial/1"].at.weekday() == date(2023, 5, 2).weekday()
    assert len({pooled.second(m.at) for m in messages.values()}) == len(messages)
    times = [q.asked_at for q in data.questions]
    assert times == sorted(times)
    assert data.limited(1).questions == data.questions[:1]


async def test_a_small_pool_runs_through_the_product_and_the_floor(tmp_path: Path) -> None:
    data = pooled.build(_madial(), [_labelled()])
    overrides = {"embedding": {"provider": "none"}}
    product = await pooled.run_set(data, labelled.MODES, overrides, tmp_path / "a")
    floor = await pooled.run_set(data, labelled.MODES, overrides, tmp_path / "b", floor=True)
    for runs in (product, floor):
        history, archived = runs["history"], runs["archived"]
        assert history.stored["messages false"] == 6
        assert archived.stored["archived verbatim"] == 6
        for run in (history, archived):
            assert len(run.outcomes) == 2 * len(data.questions)
            physio = [o for o in run.outcomes if o.question == "xx-a-01-q01"]
            assert all(o.scores.recall5 == 1.0 for o in physio)
    assert {k for o in floor["archived"].outcomes for k in o.kinds} == {"archive_raw"}
