"""README's examples work as written: its config loads, its MCP entry starts a server a
client can find on a scope that exists by default, its demo screen is the current one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from adapters.settings import load_app_config
from memory_core.base.scope import InboundContext, resolve_scope
from memory_core.config import Config
from tui.app import ChatmemApp

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def test_the_config_examples_load(tmp_path: Path) -> None:
    examples = blocks("toml")
    assert examples
    for number, text in enumerate(examples):
        path = tmp_path / f"example-{number}.toml"
        path.write_text(text, encoding="utf-8")
        load_app_config(path, env={})


def test_the_mcp_entry_names_the_full_path_and_a_scope_that_exists_by_default() -> None:
    (entry,) = [json.loads(text)["mcpServers"]["chatmem"] for text in blocks("json")]
    assert Path(entry["command"]).is_absolute()
    assert Path(entry["command"]).name == "chatmem"
    args = entry["args"]
    scope = args[args.index("--scope") + 1]
    direct = InboundContext("telegram", "bot", "12345", "direct", "12345")
    assert scope == resolve_scope(direct, Config().dm_scope).value


def test_the_demo_screen_is_the_captured_one() -> None:
    start = README.index("## The demo screen")
    (screen, *_) = re.findall(r"^```text\n(.*?)^```", README[start:], flags=re.S | re.M)
    assert screen == (ROOT / "docs" / "demo-screen.txt").read_text(encoding="utf-8")
    tab_line = screen.splitlines()[1]
    assert [title for _, title in ChatmemApp.TABS if title not in tab_line] == []
