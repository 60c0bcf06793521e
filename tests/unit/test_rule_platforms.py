"""Rule: the core knows no platform. A front end's settings, checks and formats live in
adapters/; memory_core/ serves every front end alike.

The exact rule. No module under memory_core/ names a messaging platform (`PLATFORMS`,
matched case-insensitively anywhere in a word) in its code. Code is:
- every identifier: module and import names, classes, functions, arguments, keywords,
  variables and attributes;
- every string literal that is not prose: a key, a path, a host, a variable's name.
Prose may name one as an example: docstrings, comments, and string literals of three
words or more (a message or a help text such as "--person takes CHANNEL:ID (e.g.
telegram:42)"). `ORDINARY_WORDS` are identifiers that spell a platform's name as the
plain word it is (a top-k's `SLACK` margin).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLATFORMS = (
    "telegram",
    "dingtalk",
    "slack",
    "discord",
    "whatsapp",
    "wechat",
    "feishu",
    "mattermost",
    "zulip",
)
NAMED = re.compile("|".join(PLATFORMS), re.IGNORECASE)
ORDINARY_WORDS = frozenset({"SLACK", "slack"})
PROSE_WORDS = 3


def _docstrings(tree: ast.AST) -> set[int]:
    """The string statements: module, class and function docstrings, and the bare
    strings that document an attribute."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _identifiers(node: ast.AST) -> list[str]:
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name) | ast.arg(arg=name):
            return [name]
        case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name) | ast.ClassDef(name=name):
            return [name]
        case ast.keyword(arg=str(name)):
            return [name]
        case ast.alias(name=name, asname=asname):
            return [name, asname or ""]
        case ast.ImportFrom(module=str(module)):
            return [module]
    return []


def platform_names(source: str) -> list[str]:
    """Each place `source`'s code names a platform, as 'line: what'."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        for name in _identifiers(node):
            if NAMED.search(name) and name not in ORDINARY_WORDS:
                found.append(f"{node.lineno}: {name}")  # type: ignore[attr-defined]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if id(node) not in prose and len(text.split()) < PROSE_WORDS and NAMED.search(text):
                found.append(f"{node.lineno}: {text!r}")
    return found


def core_violations(root: Path) -> dict[str, list[str]]:
    return {
        path.relative_to(root).as_posix(): found
        for path in sorted((root / "memory_core").rglob("*.py"))
        if (found := platform_names(path.read_text(encoding="utf-8")))
    }


def test_the_core_names_no_platform() -> None:
    assert core_violations(REPO) == {}


def test_the_rule_sees_code_and_lets_prose_be() -> None:
    """What the rule catches and what it lets be, on a made-up module: the moved-out
    settings import, a section, a key, a host, an environment variable are code."""
    code = '''
"""A docstring may say Telegram or DingTalk."""
from adapters.settings import TelegramSettings
import slack_sdk

class Settings:
    dingtalk: int = 0
    """The DingTalk robot (an attribute's docstring)."""

def check(channel: str, token=TELEGRAM_TOKEN) -> bool:
    # a comment naming Discord is prose
    raise ValueError("--person takes CHANNEL:ID (e.g. telegram:42)")
    return channel == "wechat" or hosts == ["oapi.dingtalk.com"] or env["FEISHU_KEY"]

SLACK = 3  # an ordinary word
'''
    assert sorted(platform_names(code)) == sorted(
        [
            "3: TelegramSettings",
            "4: slack_sdk",
            "7: dingtalk",
            "10: TELEGRAM_TOKEN",
            "13: 'wechat'",
            "13: 'oapi.dingtalk.com'",
            "13: 'FEISHU_KEY'",
        ]
    )


CORE_SECTIONS = (
    "scoring",
    "long_term",
    "prompt",
    "snapshot",
    "recall",
    "history",
    "archive",
    "schedule",
    "llm",
    "embedding",
    "storage",
    "logging",
)
"""The core's own tables of chatmem.toml: the memory's (config/memory.py) and those of
what it talks to (config/services.py). A front end's table (`[mcp]`, `[metrics]`, a bot's)
is `AppConfig`'s (adapters/settings.py), never one of these."""


def test_the_core_config_holds_no_front_ends_section() -> None:
    """The core's `Config` is its own keys and sections, exactly: a section added to it
    for a front end fails here, and goes to adapters/settings.py's `AppConfig` instead."""
    from adapters.settings import AppConfig
    from memory_core.config import Config
    from memory_core.config.fields import fields

    sections = tuple(info.name for info in fields(Config) if info.section is not None)
    assert sections == CORE_SECTIONS
    keys = {info.name for info in fields(Config) if info.section is None}
    assert keys == {"workspace", "dm_scope", "topic_scope", "timezone", "log_level"}
    front_ends = {info.name for info in fields(AppConfig)} - {info.name for info in fields(Config)}
    assert front_ends == {"mcp", "telegram", "dingtalk", "metrics"}
