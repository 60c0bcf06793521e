"""The bots' log filter: no configured secret in any line, message or traceback."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from adapters.cli.logs import SecretsHidden
from adapters.settings import load_app_config
from memory_core.config import secret_values

TOKEN = "123456:secret-bot-token"


def test_secrets_are_cut_from_messages_arguments_and_tracebacks(tmp_path: Path) -> None:
    empty = tmp_path / "chatmem.toml"
    empty.touch()
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "CHATMEM_MCP_TOKEN": "mcp-token-0123456789"}
    config = load_app_config(empty, env=env)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(SecretsHidden(secret_values(config)))
    log = logging.getLogger("test.secrets")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("url %s", f"https://api.telegram.org/bot{TOKEN}/getMe")
        log.warning("in the message itself: " + TOKEN)
        log.warning("arguments that do not fit %s %s", TOKEN)
        try:
            raise RuntimeError(f"The token `{TOKEN}` was rejected")
        except RuntimeError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert TOKEN not in text
    assert set(secret_values(config)) == {TOKEN, "mcp-token-0123456789"}
    assert text.count("<secret>") == 4
    assert "RuntimeError" in text
