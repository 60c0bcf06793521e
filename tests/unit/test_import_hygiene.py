"""The core must be usable without any front end: importing every memory_core module in a
fresh interpreter pulls in no Telegram, DingTalk, Textual, adapters or tui code."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("textual", "telegram", "dingtalk_stream", "adapters", "tui")

PROBE = """
import importlib, pkgutil, sys
import memory_core
for info in pkgutil.iter_modules(memory_core.__path__, "memory_core."):
    importlib.import_module(info.name)
bad = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
print("\\n".join(bad))
"""


def test_memory_core_imports_no_front_end() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(forbidden=set(FORBIDDEN))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "", f"memory_core imported front-end modules: {out.stdout}"
