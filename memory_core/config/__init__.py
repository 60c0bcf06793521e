"""Typed settings from one TOML file plus environment overrides, on pydantic:
`Config` (the whole file) and `load_config`, with the checks that span sections.

The sections live in config/memory.py and config/services.py, their field convention
in config/fields.py, and `config.example.toml` is generated from them (config/example.py;
a test keeps them equal), so the example can never fall behind the code. Validation is
strict and unknown keys are forbidden: a typo or a quoted number must not silently fall
back to a default or be coerced. Errors are one line naming the key and the file (or the
environment variable), not pydantic's multi-line report.

The sources are ours, not pydantic-settings': the TOML file (tomllib) under the
environment variables `env_bindings` lists, merged key by key and validated once.
pydantic-settings did the same through its source classes and cost every command about
60 ms of imports (bench/cli_bench.py), for two sources whose rules we wrote anyway.
"""

from __future__ import annotations

import os
import tomllib
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_data_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from memory_core.base.entries import MemoryClass
from memory_core.base.errors import ConfigError, ScopeError
from memory_core.base.scope import DmScope, ScopeKey
from memory_core.config.fields import defaults_of, field_extra, setting
from memory_core.config.memory import (
    ArchiveSettings,
    HistorySettings,
    LongTermSettings,
    PromptSettings,
    RecallSettings,
    ScheduleSettings,
    ScoringSettings,
    SnapshotSettings,
    parse_hours,
)
from memory_core.config.services import (
    DingTalkSettings,
    EmbeddingSettings,
    LLMSettings,
    McpSettings,
    StorageSettings,
    TelegramSettings,
)


class Config(BaseModel):
    """Everything chatmem reads from `chatmem.toml` and the environment (`load_config`);
    `Config()` is the defaults, never the process environment."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, validate_default=True, defer_build=True
    )

    workspace: str = setting(
        "",
        "Workspace directory; empty means the platform's user data directory.",
        env="CHATMEM_WORKSPACE",
    )
    dm_scope: Literal["main", "per-peer", "per-channel-peer", "per-account-channel-peer"] = setting(
        "main", "How direct chats are separated.", env="CHATMEM_DM_SCOPE"
    )
    topic_scope: bool = setting(False, "Give each forum topic of a group its own scope.")
    timezone: str = setting("UTC", "IANA time zone for daily-note dates and schedules.")
    log_level: str = setting("INFO", "Logging level.")
    scoring: ScoringSettings = Field(default_factory=ScoringSettings)
    long_term: LongTermSettings = Field(default_factory=LongTermSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    snapshot: SnapshotSettings = Field(default_factory=SnapshotSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    dingtalk: DingTalkSettings = Field(default_factory=DingTalkSettings)

    @property
    def workspace_path(self) -> Path:
        return Path(self.workspace or user_data_dir("chatmem", appauthor=False)).expanduser()

    @property
    def dm_scope_mode(self) -> DmScope:
        return DmScope(self.dm_scope)

    def with_workspace(self, path: Path | str) -> Config:
        return self.model_copy(update={"workspace": str(path)})


DEFAULT_CONFIG_NAME = "chatmem.toml"


def load_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    workspace: Path | str | None = None,
) -> Config:
    """File (explicit, else ./chatmem.toml when present), then env, then `workspace` arg."""
    env = os.environ if env is None else env
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    source = "defaults" if path is None else str(path)
    values: dict[str, Any] = {}
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"{source}: config file not found")
        try:
            with open(path, "rb") as file:
                values = tomllib.load(file)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}{_encoding_hint(path)}") from None
        except UnicodeDecodeError:
            raise ConfigError(
                f"{source}: not UTF-8 text, as TOML must be{_encoding_hint(path)}"
            ) from None
        try:  # alone first: a bad value is an error even where the environment overrides it
            Config.model_validate(values)
        except ValidationError as exc:
            raise _config_error(exc, source, {}) from None
    overrides = _env_values(env)
    if not values and not overrides:
        config = defaults()
    else:
        try:
            config = Config.model_validate(_merged(values, overrides))
        except ValidationError as exc:
            raise _config_error(exc, source, env) from None
    if workspace is not None:
        config = config.with_workspace(workspace)
    _validate(config, source)
    return config


def defaults() -> Config:
    """`Config()` when neither a file nor a variable sets anything: nothing came from
    outside to check (`defaults_of`)."""
    return defaults_of(Config)


_BYTE_ORDER_MARKS = {b"\xef\xbb\xbf": "UTF-8", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


def _encoding_hint(path: Path | str) -> str:
    """Names the byte order mark a config file starts with (editors on Windows save
    UTF-16, or UTF-8 with a mark that TOML refuses on the first line); "" without one."""
    with open(path, "rb") as file:
        start = file.read(3)
    for mark, encoding in _BYTE_ORDER_MARKS.items():
        if start.startswith(mark):
            return f" (it starts with a {encoding} byte order mark: save it as UTF-8 without one)"
    return ""


def _leaves(cls: type[BaseModel] = Config, prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    for name, info in cls.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            yield from _leaves(info.annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


SHORTEST_SECRET = 6
"""Secrets shorter than this are not cut out of log lines: they would garble ordinary text
(and are no secret worth the name)."""


def secret_values(config: Config) -> list[str]:
    """Every secret the config holds (bot tokens, app secrets, API keys, the database DSN,
    the MCP clients' tokens): what no log line or message may show."""
    found: list[str] = []
    for dotted, info in _leaves():
        if not field_extra(info).get("secret"):
            continue
        value: Any = config
        for part in dotted.split("."):
            value = getattr(value, part)
        found.extend(value if isinstance(value, dict) else [value])
    return [value for value in found if isinstance(value, str) and len(value) >= SHORTEST_SECRET]


def env_bindings() -> list[tuple[str, str]]:
    """(ENV_NAME, dotted key) pairs: the public environment contract."""
    return [
        (field_extra(info)["env"], dotted)
        for dotted, info in _leaves()
        if "env" in field_extra(info)
    ]


def _env_values(env: Mapping[str, str]) -> dict[str, Any]:
    """The values the environment sets, by today's variable names (`env_bindings`), as
    the file's tables would hold them; an empty value counts as unset."""
    data: dict[str, Any] = {}
    for dotted, info in _leaves():
        name = field_extra(info).get("env")
        if not name or not (value := env.get(name)):
            continue
        parsed: Any = value
        if typing.get_origin(info.annotation) is list:
            try:
                parsed = [int(part) for part in value.replace(" ", "").split(",") if part]
            except ValueError:
                raise ConfigError(
                    f"environment variable {name}: must be comma-separated whole numbers"
                ) from None
        section, _, key = dotted.rpartition(".")
        (data.setdefault(section, {}) if section else data)[key] = parsed
    return data


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s values in its place, table by table (the environment's
    `telegram.bot_token` replaces that one key of the file's `[telegram]`, not the table)."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _merged(below, value)
        else:
            merged[key] = value
    return merged


_EXPECTED = {
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
}


def _config_error(exc: ValidationError, source: str, env: Mapping[str, str]) -> ConfigError:
    """Pydantic's first error as today's one line: the key, and the file or the variable."""
    error = exc.errors()[0]
    loc = list(error["loc"])
    if loc[:2] == ["mcp", "clients"] and len(loc) > 2:
        loc = loc[:2]  # the next part would be a token: a secret, never printed
    key = "".join("[]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    for name, dotted in env_bindings():
        if env.get(name) and key.partition("[")[0] == dotted:
            source = f"environment variable {name}"
    if error["type"] == "extra_forbidden":
        return ConfigError(f"{source}: unknown key '{key}'")
    if error["type"] == "literal_error":
        expected = f"one of {error['ctx']['expected']}"
    elif not (expected := _EXPECTED.get(error["type"], "")):
        return ConfigError(f"{source}: '{key}': {error['msg']}")
    return ConfigError(f"{source}: '{key}' must be {expected}, not {error['input']!r}")


def _validate(config: Config, source: str) -> None:
    s, h, lt = config.scoring, config.history, config.long_term
    checks: list[tuple[bool, str]] = [
        (0 < s.daily_decay <= 1, "scoring.daily_decay must be in (0, 1]"),
        (config.recall.rank_budget >= 1, "recall.rank_budget must be >= 1"),
        (
            0 <= s.forget_below <= s.archive_below <= 1,
            "scoring thresholds must satisfy 0 <= forget_below <= archive_below <= 1",
        ),
        (0 < s.reinforce_rate < 1, "scoring.reinforce_rate must be in (0, 1)"),
        (0 <= lt.write_delay_seconds <= 60, "long_term.write_delay_seconds must be in [0, 60]"),
        (lt.forgotten_keep_days >= 0, "long_term.forgotten_keep_days must be >= 0"),
        (lt.max_capture_bytes >= 1, "long_term.max_capture_bytes must be >= 1"),
        (0 < s.contradict_factor < 1, "scoring.contradict_factor must be in (0, 1)"),
        (s.grace_days >= 0, "scoring.grace_days must be >= 0"),
        (
            all(0 < v <= 1 for v in s.category_decay.values()),
            "scoring.category_decay values must be in (0, 1]",
        ),
        (
            sorted(s.class_decay) == sorted(m.value for m in MemoryClass),
            "scoring.class_decay must give exactly fact, belief, summary and event",
        ),
        (
            all(0 <= v <= 5 for v in s.class_decay.values()),
            "scoring.class_decay values must be in [0, 5]",
        ),
        (
            0 < s.belief_contradict_factor < 1,
            "scoring.belief_contradict_factor must be in (0, 1)",
        ),
        (h.min_messages <= h.max_messages, "history.min_messages must be <= history.max_messages"),
        (h.soft_cap <= h.hard_cap, "history.soft_cap must be <= history.hard_cap"),
        (bool(config.archive.backoff_minutes), "archive.backoff_minutes must not be empty"),
        (config.telegram.max_photo_bytes >= 1, "telegram.max_photo_bytes must be >= 1"),
        (config.storage.postgres_pool_size >= 1, "storage.postgres_pool_size must be >= 1"),
        (
            2000 <= config.snapshot.budget_tokens <= 4000,
            "snapshot.budget_tokens must be in [2000, 4000]",
        ),
        (
            config.telegram.describe_timeout_seconds > 0,
            "telegram.describe_timeout_seconds must be > 0",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"{source}: {message}")
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(config.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{source}: 'timezone' {config.timezone!r} is not a known time zone"
        ) from None
    _validate_mcp(config.mcp, source)
    if config.schedule.active_hours and parse_hours(config.schedule.active_hours) is None:
        raise ConfigError(f"{source}: 'schedule.active_hours' must be HH:MM-HH:MM or empty")
    hh, _, mm = config.schedule.daily_archive_at.partition(":")
    if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
        raise ConfigError(f"{source}: 'schedule.daily_archive_at' must be HH:MM")


MIN_TOKEN_CHARS = 16


def _validate_mcp(mcp: McpSettings, source: str) -> None:
    """A short token is guessable and a bad scope key would only fail at the first call."""
    tokens = [mcp.token] if mcp.token else []
    for token, scope in mcp.clients.items():
        try:
            ScopeKey.parse(scope)
        except ScopeError as exc:
            raise ConfigError(f"{source}: 'mcp.clients': {exc}") from None
        tokens.append(token)
    if any(len(token) < MIN_TOKEN_CHARS for token in tokens):
        raise ConfigError(
            f"{source}: MCP bearer tokens must be at least {MIN_TOKEN_CHARS} characters"
        )
    if not all(token.isascii() and token.isprintable() and " " not in token for token in tokens):
        raise ConfigError(f"{source}: MCP bearer tokens must be printable ASCII without spaces")
    if mcp.token and mcp.token in mcp.clients:
        raise ConfigError(
            f"{source}: the MCP token (CHATMEM_MCP_TOKEN / mcp.token) is also a key of "
            "mcp.clients: one token, one scope"
        )
    if not mcp.path.startswith("/"):
        raise ConfigError(f"{source}: 'mcp.path' must start with '/'")
