"""An update is never folded into the fact it replaces.

Pairs of alike texts that differ by a number, a date, a negation or a name are captured
one after the other, through the real `chatmem capture` in a subprocess and through
`MemoryCore`: every second text is kept as its own entry (0 folded), the caller is told
"updated" (a number, date or negation: the old entry is contradicted, still readable) or
"saved" (another name: the old entry untouched), and saying the new text again reinforces
the new entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from memory_core.base.merge_values import Kept
from memory_core.base.scope import MAIN
from memory_core.config import Config, env_bindings
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import parse_memory
from tests.reliability.support import REPO, storage_env_of

UPDATES = [
    (
        "My son Leo is in grade 3 at Hillview primary school",
        "My son Leo is in grade 4 at Hillview primary school",
    ),
    (
        "Alice's new phone number is 555-0142, she prefers texts to calls",
        "Alice's new phone number is 555-0143, she prefers texts to calls",
    ),
    (
        "The quarterly planning meeting with the design team is on Monday",
        "The quarterly planning meeting with the design team is on Thursday",
    ),
    ("The user is allergic to peanuts and carries an epipen", "The user is not allergic to peanuts and carries an epipen"),
    ("我儿子上三年级", "我儿子上四年级"),
    ("用户不喜欢喝咖啡，早上只喝绿茶", "用户喜欢喝咖啡，早上只喝绿茶"),
    ("用户的女儿今年七岁，在海淀实验小学读书", "用户的女儿今年八岁，在海淀实验小学读书"),
]  # fmt: skip
NAMES = [
    (
        "My daughter Emma takes piano lessons every week at the music school",
        "My daughter Alice takes piano lessons every week at the music school",
    ),
    ("用户的猫叫小橘，每天早上要喂两次猫粮", "用户的猫叫小白，每天早上要喂两次猫粮"),
    ("用户的同事张伟负责后端开发和数据库运维", "用户的同事李娜负责后端开发和数据库运维"),
]
CLI_PAIRS = [UPDATES[0], UPDATES[1], UPDATES[4], NAMES[1]]
"""What goes through the real command (a process per capture): English and Chinese,
numbers and a name."""


def expected(pair: tuple[str, str]) -> Kept:
    return Kept.SAVED if pair in NAMES else Kept.UPDATED


def chatmem(config: Config, *argv: str) -> dict[str, Any]:
    """`python -m adapters.cli ARGV --json` on `config`'s workspace and storage."""
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    env.update(storage_env_of(config))
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", *argv, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@pytest.fixture
def cli_workspace(config: Config) -> Config:
    chatmem(config, "init", "--workspace", str(config.workspace_path))
    return config


@pytest.mark.slow
def test_the_command_keeps_every_update(cli_workspace: Config) -> None:
    config = cli_workspace
    where = ("--workspace", str(config.workspace_path))
    folded = []
    for old, new in CLI_PAIRS:
        first = chatmem(config, "capture", old, *where)
        second = chatmem(config, "capture", new, *where)
        if second["id"] == first["id"] or second["entry"]["content"] != new:
            folded.append(new)
            continue
        assert first["action"] == Kept.SAVED
        assert second["action"] == expected((old, new)), (old, new)
        if second["action"] == Kept.UPDATED:
            assert second["replaced"] == first["id"]
        again = chatmem(config, "capture", new, *where)
        assert (again["action"], again["id"]) == (Kept.REINFORCED, second["id"])
    assert folded == []
    text = config.workspace_path.joinpath("MEMORY.md").read_text(encoding="utf-8")
    contents = {entry.content for entry in parse_memory(text).entries}
    assert contents == {text for pair in CLI_PAIRS for text in pair}


async def test_the_core_keeps_every_update(core: MemoryCore) -> None:
    folded = []
    for old, new in [*UPDATES, *NAMES]:
        first, _ = await core.memories.capture(MAIN, old)
        second, result = await core.memories.capture(MAIN, new)
        outcome = result.outcome
        assert outcome is not None
        if second.id == first.id or second.content != new:
            folded.append(new)
            continue
        assert outcome.kept is expected((old, new)), (old, new)
        assert outcome.entry_id == second.id
        assert outcome.replaced == (first.id if outcome.kept is Kept.UPDATED else None)
    assert folded == []
    await core.memories.flush()
    entries = {e.content: e for e in await core.memories.entries(MAIN)}
    assert set(entries) == {text for pair in [*UPDATES, *NAMES] for text in pair}
    for old, new in UPDATES:
        assert entries[old].score == pytest.approx(0.3)  # contradicted: 0.6 * 0.5
        assert entries[new].score == pytest.approx(0.6), (new, entries[new])
    for old, new in NAMES:
        assert entries[old].score == entries[new].score == pytest.approx(0.6)
