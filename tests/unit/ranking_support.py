"""What the ranking tests share: settings with every step after BM25 off, two short talks
(English and Chinese) whose answer shares no word with its question, filler turns, and
helpers that write and record them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.conversation.archive import render_raw
from memory_core.engine import MemoryCore
from memory_core.recall.index import Hit
from memory_core.recall.index.rerank import Candidate, RankSettings
from memory_core.storage.sessions import ArchiveState, StoredMessage
from tests.conftest import START

TODAY = START.date()


NEUTRAL = RankSettings(
    context_weights=(),
    recency_boost=0.0,
    long_term_boost=0.0,
    summary_factor=1.0,
    duplicate_similarity=1.01,
    answer_boost=0.0,
)


def with_recall(config: Config, **update: Any) -> Config:
    return config.model_copy(update={"recall": config.recall.model_copy(update=update)})


def texts(hits: Sequence[Hit]) -> list[str]:
    return [h.text for h in hits]


def write(core: MemoryCore, relative: str, text: str) -> None:
    path = core.workspace.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


Turn = tuple[str, str, str]


@dataclass(frozen=True)
class Talk:
    question: str
    answer: str
    """Shares no word with the question; the turn before it does."""
    talk: list[Turn]
    noise: list[Turn]


TALKS: dict[str, Talk] = {
    "en": Talk(
        question="How long have I been playing the cello?",
        answer="Five years already!",
        talk=[
            ("user", "Mia", "Guess what, I tuned the cello by myself today"),
            ("assistant", "Bot", "Nice! How long have you been playing the cello?"),
            ("user", "Mia", "Five years already!"),
            ("assistant", "Bot", "That shows in your tuning."),
        ],
        noise=[
            ("user", "Mia", "My neighbour plays the cello far too loud at night"),
            ("assistant", "Bot", "Maybe have a word with them in the morning."),
            ("user", "Mia", "The cello concert tickets sold out in an hour"),
            ("assistant", "Bot", "There is a second date in April."),
            ("user", "Mia", "I need to renew my passport before summer"),
            ("assistant", "Bot", "The office opens at nine on weekdays."),
        ],
    ),
    "zh": Talk(
        question="我学大提琴多久了来着？",
        answer="已经五年了！",
        talk=[
            ("user", "小美", "今天我自己给大提琴调了音"),
            ("assistant", "助手", "真棒！你学大提琴多久了？"),
            ("user", "小美", "已经五年了！"),
            ("assistant", "助手", "难怪调得这么准。"),
        ],
        noise=[
            ("user", "小美", "邻居晚上拉大提琴太吵了"),
            ("assistant", "助手", "可以早上和他们商量一下。"),
            ("user", "小美", "大提琴音乐会的票一小时就卖光了"),
            ("assistant", "助手", "四月还有一场加演。"),
            ("user", "小美", "夏天之前要去换护照"),
            ("assistant", "助手", "出入境大厅工作日九点开门。"),
        ],
    ),
}


def recorded(turns: Sequence[Turn], start: datetime) -> list[RecordedMessage]:
    return [
        RecordedMessage(role, speaker, text, start + timedelta(minutes=n))
        for n, (role, speaker, text) in enumerate(turns)
    ]


def archived(turns: Sequence[Turn], day: date) -> str:
    """The file the archiver writes for a day of conversation (verbatim turns)."""
    start = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=19)
    messages = [
        StoredMessage(
            id=n + 1,
            scope=MAIN.value,
            session_id="archived",
            role=role,
            speaker=speaker,
            content=text,
            created_at=start + timedelta(minutes=n),
            archived=ArchiveState.TRUE,
            archive_attempts=0,
            archive_next_at=None,
            compacted=False,
            meta={},
        )
        for n, (role, speaker, text) in enumerate(turns)
    ]
    return render_raw(day, messages, UTC)


NOISE = [
    "office",
    "lunch",
    "team",
    "budget",
    "weather",
    "traffic",
    "coffee",
    "meeting",
    "email",
    "printer",
    "parking",
    "train",
    "laptop",
    "report",
    "deadline",
    "slides",
    "client",
    "invoice",
    "desk",
    "calendar",
]


def link(pool: dict[int, Candidate], a: int, b: int, distance: int) -> None:
    pool[a].neighbours.append((distance, b))
    pool[b].neighbours.append((distance, a))
