"""Log lines of every command: one handler on the root logger, set up once the config is
loaded (adapters/cli/running.py), writing to stderr.

One format everywhere: `2026-11-28T21:40:00.123Z WARNING memory_core.x: message` as text,
or, with `[logging] format = "json"`, one JSON object per line with the fields `time`,
`level`, `logger`, `message` (and `traceback` when there is one). Every line has the
config's secrets cut out (`SecretsHidden`), a library's own lines too (PTB logs the Bot
API URL, token included, at DEBUG).

The level: the processes that run unattended (`UNATTENDED`: the bots, the MCP server) log
at `log_level`; the others have a person reading their output, so they show warnings
and errors only, unless `log_level = "DEBUG"`.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core.config import Config

UNATTENDED = frozenset({"telegram", "dingtalk", "mcp"})
"""Commands that run as services: their log is their only output, at `log_level`."""
QUIET_LIBRARIES = ("httpx", "httpx2", "mcp")
"""Libraries that log every request at INFO (httpx: a Telegram URL holds the bot token)."""
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class SecretsHidden(logging.Filter):
    """A handler filter that writes each record with every secret replaced by `<secret>`,
    in its message and in its traceback."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self._secrets = sorted(set(secrets), key=len, reverse=True)

    def hidden(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<secret>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the message
            message = f"{record.msg} (arguments: {record.args!r})"
        record.msg, record.args = self.hidden(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.hidden(record.exc_text)
        if record.stack_info:
            record.stack_info = self.hidden(record.stack_info)
        return True


def record_time(record: logging.LogRecord) -> str:
    """The record's time in UTC, ISO 8601 to the millisecond: the same in every line,
    whatever the machine's time zone."""
    when = datetime.fromtimestamp(record.created, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return record_time(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a traceback is a field, never lines of its own."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": record_time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["traceback"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, ensure_ascii=False)


class StderrHandler(logging.Handler):
    """Writes to the `sys.stderr` of the moment (a test's capture, `--json`'s rewriter),
    not to the one there was when the handler was made."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def command_level(config: Config, command: str) -> int:
    """The level a command logs at (module docstring)."""
    configured = logging.getLevelNamesMapping().get(config.log_level.upper(), logging.INFO)
    if command in UNATTENDED or configured <= logging.DEBUG:
        return configured
    return max(configured, logging.WARNING)


def setup_logging(config: Config, command: str) -> None:
    """The root logger's one handler, replacing the one a previous call made (commands
    run in one process one after another in tests)."""
    from memory_core.config import secret_values

    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if config.logging.format == "json" else TextFormatter())
    handler.addFilter(SecretsHidden(secret_values(config)))
    root.addHandler(handler)
    root.setLevel(command_level(config, command))
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


def notice(text: str) -> None:
    """A line for the operator on stderr ("chatmem: metrics on …"): as it is, unless the
    log is JSON lines, where it is one more record (logger `chatmem`, INFO, whatever the
    level), so a collector reading stderr never meets a line that is not JSON."""
    handler = next((h for h in logging.getLogger().handlers if isinstance(h, StderrHandler)), None)
    if handler is None or not isinstance(handler.formatter, JsonFormatter):
        print(text, file=sys.stderr, flush=True)
        return
    record = logging.LogRecord(
        "chatmem", logging.INFO, __file__, 0, text.removeprefix("chatmem: "), None, None
    )
    handler.handle(record)
