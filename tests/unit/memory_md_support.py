"""What the MEMORY.md tests share: the seed's example file, two moments, and helpers that
read a rendered file's headers and entries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from memory_core.base.entries import MemoryEntry
from memory_core.longterm.memory_md_parser import ParsedMemory

SEED_EXAMPLE = """\
# Agent Memory

<!-- Last updated: 2026-02-20T10:30:00 -->
<!-- Total entries: 15 -->

## Active Memories

### [a1b2c3] preference | 0.92 | 2026-02-20 | 12
用户喜欢简洁的代码风格，不喜欢过多注释

### [d4e5f6] fact | 0.88 | 2026-02-19 | 8
用户的主要开发语言是 Python，常用 FastAPI 框架

### [g7h8i9] workflow | 0.85 | 2026-02-20 | 15
用户每天早上 9 点查看 A 股行情，关注新能源板块

## Archived Memories

### [x1y2z3] fact | 0.18 | 2026-01-10 | 2
用户曾尝试用 Vue 写前端，但后来放弃了
"""


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=3, hours=5)


def headers(text: str) -> list[str]:
    return re.findall(r"^### \[([^\]]+)\]", text, flags=re.MULTILINE)


def without_stamp(text: str) -> str:
    return re.sub(r"<!-- Last updated: .* -->", "<!-- Last updated: X -->", text)


def by_id(parsed: ParsedMemory) -> dict[str, MemoryEntry]:
    return {e.id: e for e in parsed.entries}
