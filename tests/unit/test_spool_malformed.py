"""A spool record the replay cannot use (no `kind`, a field missing, no JSON) is set
aside as it was, with one warning: the replay of the good records goes on, nothing is
dropped (storage/spool_records.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.storage.spool import SpoolingAudit, SpoolingHistory
from memory_core.storage.spool_records import QUARANTINE_DIR
from tests.support import sql

GOOD = {
    "kind": "message",
    "seq": 2,
    "scope": "peer:7",
    "session_id": "spooled-1",
    "role": "user",
    "content": "the good record zqgoodspool",
    "at": "2026-03-01T12:01:00Z",
    "speaker": "Ann",
}
SESSION = {"kind": "session", "id": "spooled-1", "scope": "peer:7", "at": "2026-03-01T12:00:00Z"}


@pytest.mark.storage
async def test_a_malformed_spool_record_is_kept_aside_not_replayed_or_lost(
    config: Config, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    no_kind = {k: v for k, v in GOOD.items() if k != "kind"} | {"content": "no kind zqnokind"}
    bad_lines = [
        json.dumps(no_kind),
        json.dumps({"kind": "message", "seq": 3, "scope": "peer:7"}),
        "not json at all zqnotjson",
        json.dumps(["a", "list"]),
    ]
    dead = spool / "ghost.jsonl"
    dead.write_text(
        "\n".join([json.dumps(SESSION), bad_lines[0], json.dumps(GOOD), *bad_lines[1:]]) + "\n",
        encoding="utf-8",
    )
    async with MemoryCore.open(config) as core:
        history = SpoolingHistory(core.database, config.history, None, spool)
        caplog.set_level(logging.WARNING, logger="memory_core.storage.spool")
        assert await history.flush_spool()
        await history.close()
        stored = await sql(core, "SELECT content FROM messages WHERE scope = 'peer:7'")
    assert [r[0] for r in stored] == [GOOD["content"]]
    assert not dead.exists()  # the good records written, the file done with
    kept = (spool / QUARANTINE_DIR / "ghost.jsonl").read_text(encoding="utf-8")
    assert kept.splitlines() == bad_lines
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "4 record(s)" in warnings[0].getMessage()


@pytest.mark.storage
async def test_a_malformed_audit_spool_record_is_kept_aside(config: Config, tmp_path: Path) -> None:
    spool = tmp_path / "audit"
    spool.mkdir()
    row = ["2026-03-01T12:00:00Z", "peer:7", "abc123", "add", None, 1.0, "test", "fact"]
    row += ["zqauditgood", ""]
    bad = json.dumps({"rows": [row]})  # no seq
    (spool / "ghost.jsonl").write_text(
        bad + "\n" + json.dumps({"seq": 1, "rows": [row]}) + "\n", encoding="utf-8"
    )
    async with MemoryCore.open(config) as core:
        audit = SpoolingAudit(core.database, spool)
        assert await audit.flush_spool()
        await audit.close()
        stored = await sql(core, "SELECT content FROM audit WHERE entry_id = 'abc123'")
    assert [r[0] for r in stored] == ["zqauditgood"]
    assert (spool / QUARANTINE_DIR / "ghost.jsonl").read_text(encoding="utf-8") == bad + "\n"
