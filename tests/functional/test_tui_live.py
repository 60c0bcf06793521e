"""The TUI live: a capture by another process appears within two seconds."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.functional.tui_support import (
    CHATMEM,
    demo_template_fixture,  # noqa: F401  (a fixture)
    demo_ws_fixture,  # noqa: F401  (a fixture)
    running,
)
from tests.support import unbound_environ

# --- live --------------------------------------------------------------------------------


async def test_a_capture_by_another_process_appears_within_two_seconds(
    demo_ws: Path, tmp_path: Path
) -> None:
    env = unbound_environ()
    async with running(demo_ws) as run:
        process = await asyncio.create_subprocess_exec(
            str(CHATMEM),
            "capture",
            "Moved the VPS to Falkenstein",
            "--category",
            "fact",
            "--importance",
            "high",
            "--workspace",
            str(demo_ws),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if "Moved the VPS to Falkenstein" in run.column("#rankings", "content"):
                break
            await run.pilot.pause(0.05)
        else:
            raise AssertionError("the captured memory did not appear within 2 s")
        waited = 2.0 - (deadline - time.monotonic())
        while time.monotonic() < deadline + 2.0 and not any(
            "Falkenstein" in c for c in run.column("#activity", "content")
        ):
            await run.pilot.pause(0.05)
        assert any("Falkenstein" in c for c in run.column("#activity", "content"))
        assert waited < 2.0
        # the other process merged at its own (real) clock, decaying everything to that
        # day; whatever it wrote, the scopes pane and the rankings agree on it
        model = run.app.model
        assert model is not None
        await run.settle()
        assert run.rows("#scopes")[0][1] == str(model.counts().active)
