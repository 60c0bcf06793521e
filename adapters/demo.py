"""A demo workspace with a history: `chatmem demo` builds it, the TUI shows it.

Everything is made through the core's own API with a `ManualClock` walked forward through
ten months, so scores really decayed, entries really were archived and forgotten by
consolidation (and appear in the audit log), archive runs really wrote raw copies and
daily/monthly summaries, and one scope's summariser really failed five times (backoff,
`archive_backlog`). Conversations are recorded with fixed session ids (reproducible
screens), and one is recorded `pending`, as a crashed archive run would leave it.

No model, token or server is involved: the failing summariser is a stand-in that raises.
Building twice does nothing the second time (a marker file records the build).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.base.clock import ManualClock, format_when, system_clock
from memory_core.base.entries import Importance
from memory_core.base.errors import ChatmemError, LLMError
from memory_core.base.merge_values import MergeResult, Proposal
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.config.services import LLMSettings
from memory_core.engine import MemoryCore
from memory_core.llm.client import ChatReply, LLMClient, Message

MARKER = "demo.json"
DEFAULT_DIR = "chatmem-demo"
ALICE = ScopeKey("telegram:peer:20010001")
LI_LEI = ScopeKey("telegram:peer:20010002")
TEAM = ScopeKey("group:telegram:-1009988776655")
SCOPES = (MAIN, ALICE, LI_LEI, TEAM)


@dataclass(frozen=True, slots=True)
class Memory:
    scope: ScopeKey
    days_ago: float
    content: str
    category: str = "fact"
    importance: str = "medium"
    again: tuple[float, ...] = ()
    """Days ago it was said again (each one reinforces it)."""
    expires_in: float | None = None
    extracted: bool = False
    """Learned at a `/new` (audit source 'extract') rather than saved directly."""
    then: str = ""
    """'pin', 'archive' or 'forget', done by the user `then_days_ago` days ago."""
    then_days_ago: float = 0.0


MEMORIES: tuple[Memory, ...] = (
    # main: the owner's own assistant, Chinese and English mixed
    Memory(
        MAIN,
        200,
        "用户叫王小明，在上海做后端开发",
        "fact",
        "high",
        (150, 100, 60, 30, 10),
        then="pin",
        then_days_ago=5,
    ),
    Memory(
        MAIN, 90, "Prefers pytest over unittest; runs tests with -q", "preference", "high", (3,)
    ),
    Memory(MAIN, 150, "喜欢喝手冲咖啡，不加糖，偏爱深烘", "preference", "medium", (45,)),
    Memory(MAIN, 160, "Deploys the side project on a Hetzner VPS with Docker Compose", "fact"),
    Memory(MAIN, 290, "家里的猫叫「年糕」，是一只橘猫", "fact", "low"),
    Memory(MAIN, 40, "Renew the passport before the trip to Japan", "todo", "high", expires_in=-20),
    Memory(
        MAIN,
        30,
        "Decided to use SQLite FTS5 rather than Elasticsearch for the memory index",
        "decision",
        "high",
    ),
    Memory(MAIN, 70, "每周三晚上去游泳，一次 1500 米", "experience"),
    Memory(MAIN, 12, "Workflow: write the changelog before tagging a release", "workflow"),
    Memory(MAIN, 2, "对花生过敏，点外卖时要提醒", "fact", "high", extracted=True),
    Memory(MAIN, 1, "Wants the weekly summary written in Chinese", "preference", extracted=True),
    Memory(
        MAIN, 20, "Old phone number 138-0000-0000", "fact", "low", then="forget", then_days_ago=1
    ),
    Memory(
        MAIN,
        60,
        "Reads technical books on a Kindle Paperwhite",
        "fact",
        "low",
        then="archive",
        then_days_ago=8,
    ),
    Memory(MAIN, 120, "Learning Rust on weekends, now at chapter 8 (lifetimes)", "skill_usage"),
    Memory(MAIN, 50, "喜欢周末爬山，常去佘山", "preference", "low"),
    # Alice, a Telegram peer, in English
    Memory(
        ALICE, 20, "Alice is preparing for the AWS Solutions Architect exam in June", "fact", "high"
    ),
    Memory(
        ALICE, 40, "Prefers answers with code examples in TypeScript", "preference", "medium", (5,)
    ),
    Memory(ALICE, 160, "Her dog Biscuit is a corgi", "fact", "low"),
    Memory(
        ALICE,
        4,
        "Remind her about the dentist appointment on Friday",
        "todo",
        "medium",
        expires_in=3,
        extracted=True,
    ),
    Memory(ALICE, 100, "Works in Berlin, time zone Europe/Berlin", "fact"),
    # 李雷, another Telegram peer, in Chinese
    Memory(LI_LEI, 15, "李雷在准备考研，目标是浙江大学计算机专业", "fact", "high"),
    Memory(LI_LEI, 80, "喜欢用 Vim，讨厌鼠标操作", "preference"),
    Memory(LI_LEI, 280, "周末在咖啡店兼职做咖啡师", "fact", "low"),
    Memory(LI_LEI, 7, "想学机器学习，已经看完吴恩达的课程", "experience", extracted=True),
    Memory(LI_LEI, 35, "上次推荐给他的书是《深入理解计算机系统》", "fact"),
    # a Telegram group of a small team
    Memory(
        TEAM, 60, "Team standup is at 10:00 Beijing time on weekdays", "workflow", "high", (10,)
    ),
    Memory(TEAM, 25, "发布流程：先在 staging 验证，再打 tag 发布", "workflow"),
    Memory(TEAM, 45, "Decided: move CI from Jenkins to GitHub Actions by Q2", "decision", "high"),
    Memory(TEAM, 130, "小张负责前端，老李负责数据库", "fact"),
    Memory(TEAM, 250, "Friday lunch is usually dumplings at 老地方", "experience", "low"),
)

NOTES: tuple[tuple[ScopeKey, float, str], ...] = (
    (MAIN, 2.2, "和医生约了下周二复查"),
    (MAIN, 1.1, "Sketched the TUI for chatmem: rankings, decay what-if, archive state"),
    (MAIN, 0.05, "今天把 demo 工作区做好了"),
    (ALICE, 1.0, "Alice passed the practice exam with 78%"),
    (TEAM, 3.0, "Sprint 14 planning: focus on the release pipeline"),
)

Line = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Conversation:
    scope: ScopeKey
    session: str
    days_ago: float
    lines: tuple[Line, ...]
    """(speaker, text); the bot's lines have speaker 'bot'."""


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        MAIN,
        "main-0001",
        70,
        (
            ("xiaoming", "帮我记一下，每周三晚上去游泳"),
            ("bot", "好的，记住了：每周三晚上游泳。"),
            ("xiaoming", "What's a good Rust book for lifetimes?"),
            ("bot", "The Rust Programming Language, chapter 10, then Rust for Rustaceans."),
        ),
    ),
    Conversation(
        MAIN,
        "main-0002",
        12,
        (
            ("xiaoming", "Remind me: changelog first, then tag the release"),
            ("bot", "Noted: write the changelog before tagging."),
        ),
    ),
    Conversation(
        MAIN,
        "main-0003",
        2,
        (
            ("xiaoming", "我对花生过敏，点外卖记得提醒我"),
            ("bot", "记住了，点外卖时会提醒你避开花生。"),
        ),
    ),
    Conversation(
        MAIN,
        "main-0004",
        0.02,
        (
            ("xiaoming", "上次说的 Hetzner 服务器配置是什么？"),
            ("bot", "你在 Hetzner VPS 上用 Docker Compose 部署了副业项目。"),
        ),
    ),
    Conversation(
        ALICE,
        "alice-0001",
        3,
        (
            ("alice", "Can you quiz me on VPC peering tonight?"),
            ("bot", "Sure. First question: can peered VPCs have overlapping CIDR blocks?"),
            ("alice", "No, they can't overlap."),
        ),
    ),
    Conversation(
        LI_LEI,
        "lilei-0001",
        9,
        (
            ("lilei", "考研数学一的复习计划能帮我排一下吗"),
            ("bot", "可以：先高数三个月，再线代一个月，最后概率论。"),
            ("lilei", "英语单词每天背多少合适？"),
            ("bot", "建议每天 80 个新词，加上复习。"),
        ),
    ),
    Conversation(
        TEAM,
        "team-0001",
        40,
        (
            ("zhang", "Jenkins 又挂了，什么时候迁移到 GitHub Actions？"),
            ("li", "Decided: by Q2, I'll write the workflows."),
        ),
    ),
    Conversation(
        ALICE,
        "alice-0002",
        0.1,
        (
            ("alice", "Which AWS services should I focus on this week?"),
            ("bot", "Focus on VPC, IAM and S3 this week; EC2 pricing next."),
        ),
    ),
    Conversation(
        TEAM,
        "team-0002",
        1,
        (
            ("zhang", "staging 验证通过了，可以打 tag 了吗"),
            ("li", "Yes, tag v1.4.0 after the changelog is merged."),
        ),
    ),
)

_FAILING_AT = 10 / 24
ARCHIVE_RUNS: tuple[tuple[float, tuple[ScopeKey, bool]], ...] = (
    (0.5, (MAIN, False)),
    (0.5, (TEAM, False)),
    (0.2, (ALICE, False)),
    # the summariser of 李雷's scope is down: five attempts with the core's backoff
    # (10 min, 30 min, 2 h, 6 h), then an archive_backlog event and a retry a day later
    *((_FAILING_AT - minutes / 1440, (LI_LEI, True)) for minutes in (0, 10, 40, 160, 520)),
)
"""(days ago, (scope, summariser fails)) of each archive run."""

CRASHED = frozenset({"alice-0002"})
"""Sessions recorded as a crashed archive run leaves them: every message `pending` (no
archive run of their scope comes after them)."""

CONSOLIDATIONS = (180.0, 120.0, 60.0, 20.0, 0.1)
"""Days ago when every scope was consolidated (a bot does it in a quiet hour each day)."""


class _DemoModel(LLMClient):
    """No model at all (summaries are extractive), except while `down`: then a summariser
    whose endpoint fails every call. Nothing leaves the machine either way."""

    def __init__(self) -> None:
        super().__init__(LLMSettings(model=""))
        self.down = False

    @property
    def configured(self) -> bool:
        return self.down

    async def chat(self, messages: Sequence[Message], **_: Any) -> ChatReply:
        raise LLMError("demo: the summary endpoint is unreachable")


@dataclass(frozen=True, slots=True)
class DemoResult:
    path: Path
    built: bool
    """False when the workspace was already a built demo (nothing was changed)."""


def is_demo(path: Path) -> bool:
    return (path / ".chatmem" / MARKER).is_file()


def _check_target(path: Path | str) -> tuple[Path, bool]:
    """(absolute path, already a built demo); refuses a workspace that has memories."""
    root = Path(path).expanduser().absolute()
    if is_demo(root):
        return root, True
    memory = root / "memory"
    if (root / "MEMORY.md").exists() or (memory.is_dir() and any(memory.rglob("*.md"))):
        raise ChatmemError(
            f"{root} already holds memories and is not a demo workspace; choose another directory"
        )
    return root, False


def _write_marker(root: Path, end: datetime) -> None:
    marker = root / ".chatmem" / MARKER
    text = json.dumps({"built_for": format_when(end), "version": 1}) + "\n"
    Workspace.at(root).replace_file(marker, text)


async def build_demo(path: Path | str, *, now: datetime | None = None) -> DemoResult:
    """Build the demo workspace at `path` as of `now` (default: the current minute)."""
    root, built = await asyncio.to_thread(_check_target, path)
    if built:
        return DemoResult(root, built=False)
    end = (now or system_clock()).astimezone(UTC).replace(second=0, microsecond=0)
    clock = ManualClock(end - timedelta(days=300))
    model = _DemoModel()
    async with MemoryCore.open(Config(workspace=str(root)), clock=clock, llm=model) as core:
        await _Builder(core, model, clock, end).run()
    await asyncio.to_thread(_write_marker, root, end)
    return DemoResult(root, built=True)


class _Builder:
    def __init__(
        self, core: MemoryCore, model: _DemoModel, clock: ManualClock, end: datetime
    ) -> None:
        self.core = core
        self.model = model
        self.clock = clock
        self.end = end
        self.ids: dict[str, str] = {}

    def at(self, days_ago: float) -> datetime:
        return self.end - timedelta(days=days_ago)

    async def run(self) -> None:
        steps: list[tuple[datetime, int, Any]] = []
        for order, memory in enumerate(MEMORIES):
            steps.append((self.at(memory.days_ago), order, ("learn", memory)))
            steps.extend((self.at(d), order, ("again", memory)) for d in memory.again)
            if memory.then:
                steps.append((self.at(memory.then_days_ago), order, ("then", memory)))
        steps.extend((self.at(d), 900, ("consolidate", None)) for d in CONSOLIDATIONS)
        steps.extend((self.at(n[1]), 800 + i, ("note", n)) for i, n in enumerate(NOTES))
        steps.extend(
            (self.at(c.days_ago), 700 + i, ("talk", c)) for i, c in enumerate(CONVERSATIONS)
        )
        steps.extend((self.at(days), 950, ("archive", run)) for days, run in ARCHIVE_RUNS)
        for when, _, (kind, payload) in sorted(steps, key=lambda s: (s[0], s[1])):
            self.clock.set(when)
            await getattr(self, f"_{kind}")(payload)

    async def _learn(self, memory: Memory) -> None:
        expires = (
            None if memory.expires_in is None else self.end + timedelta(days=memory.expires_in)
        )
        if memory.extracted:
            candidate = Proposal(
                memory.content, memory.category, Importance(memory.importance), expires_at=expires
            )
            result = await self._extracted(memory, candidate)
            added = next(c for c in result.changes if c.content == memory.content)
            self.ids[memory.content] = added.entry_id
            return
        entry, _ = await self.core.memories.capture(
            memory.scope,
            memory.content,
            category=memory.category,
            importance=memory.importance,
            source="capture",
            expires_at=expires,
        )
        self.ids[memory.content] = entry.id

    async def _again(self, memory: Memory) -> None:
        """Said again in a later conversation: the next `/new` reinforces the entry."""
        candidate = Proposal(memory.content, memory.category, matches=self.ids[memory.content])
        await self._extracted(memory, candidate)

    async def _extracted(self, memory: Memory, candidate: Proposal) -> MergeResult:
        """What `/new` does after extraction: merge under the closed session's id."""
        stamp = self.clock().strftime("%Y%m%d%H%M")
        session = f"{memory.scope.value.rsplit(':', 1)[-1]}-{stamp}"
        return await self.core.memories.merge_candidates(
            memory.scope, [candidate], session_id=session, source="extract"
        )

    async def _then(self, memory: Memory) -> None:
        entry_id = self.ids[memory.content]
        if memory.then == "pin":
            await self.core.memories.set_pinned(memory.scope, entry_id, True)
        elif memory.then == "archive":
            await self.core.memories.archive(memory.scope, entry_id)
        else:
            await self.core.memories.forget(memory.scope, entry_id)

    async def _consolidate(self, _: None) -> None:
        for scope in SCOPES:
            await self.core.memories.consolidate(scope, now=self.clock())

    async def _note(self, note: tuple[ScopeKey, float, str]) -> None:
        await self.core.notes.append(note[0], note[2])

    async def _talk(self, talk: Conversation) -> None:
        start = self.at(talk.days_ago)
        messages = [
            RecordedMessage(
                role="assistant" if speaker == "bot" else "user",
                speaker=speaker,
                content=text,
                at=start + timedelta(minutes=number),
                archived="pending" if talk.session in CRASHED else "false",
            )
            for number, (speaker, text) in enumerate(talk.lines)
        ]
        status = "open" if talk.days_ago < 1 else "extracted"
        await self.core.record_session(talk.scope, talk.session, start, messages, status=status)

    async def _archive(self, run: tuple[ScopeKey, bool]) -> None:
        scope, failing = run
        if not failing:
            await self.core.conversation.archive(scope)
            return
        quiet = logging.getLogger("memory_core.conversation.archiver")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # the failures are the point; no warnings on stderr
        self.model.down = True
        try:
            await self.core.conversation.archive(scope)
        finally:
            self.model.down = False
            quiet.setLevel(level)
