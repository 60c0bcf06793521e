"""Typed settings from one TOML file plus environment overrides: `Config` (the whole
file, a frozen value of sections) and `load_config`, with the checks that span
sections.

The sections live in config/memory.py and config/services.py, their field convention
in config/fields.py, and `config.example.toml` is generated from them (config/example.py;
a test keeps them equal), so the example can never fall behind the code. The core knows
no front end: a caller adds its own sections by subclassing `Config` and passing the
subclass as `load_config`'s `schema` (the front ends' `AppConfig`, adapters/settings.py),
and their checks as its `rules` (an error line names the value's origin: `Where`).
Validation is strict and unknown keys are forbidden (config/checks.py): a typo or a
quoted number must not silently fall back to a default or be coerced. Errors are one
line naming the key and the file (or the environment variable).

The sources are ours: the TOML file (tomllib) under the environment variables
`env_bindings` lists, merged key by key and checked once. Neither pydantic-settings
(~60 ms of imports) nor pydantic (~75 ms more) is imported: with no file and no variable
the config is `Config()`, the defaults, and nothing is checked (bench/cli_bench.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from memory_core.base.entries import MemoryClass
from memory_core.base.errors import ConfigError
from memory_core.base.scope import DmScope
from memory_core.config.checks import Invalid, build
from memory_core.config.fields import Field, Section, fields, part, setting
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
    EmbeddingSettings,
    LLMSettings,
    LoggingSettings,
    StorageSettings,
)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level_problem(value: str) -> str:
    """'' for a level `logging` knows (any case), else what is wrong: a typo must not
    silently log at INFO."""
    return "" if value.upper() in LOG_LEVELS else f"must be one of {', '.join(LOG_LEVELS)}"


class Config(Section):
    """Everything chatmem reads from `chatmem.toml` and the environment (`load_config`);
    `Config()` is the defaults, never the process environment."""

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
    log_level: str = setting(
        "INFO",
        "Logging level: DEBUG, INFO, WARNING or ERROR (the bots and the MCP server log at it;"
        " the other commands show warnings and errors, and everything at DEBUG).",
        env="CHATMEM_LOG_LEVEL",
        check=log_level_problem,
    )
    scoring: ScoringSettings = part(ScoringSettings)
    long_term: LongTermSettings = part(LongTermSettings)
    prompt: PromptSettings = part(PromptSettings)
    snapshot: SnapshotSettings = part(SnapshotSettings)
    recall: RecallSettings = part(RecallSettings)
    history: HistorySettings = part(HistorySettings)
    archive: ArchiveSettings = part(ArchiveSettings)
    schedule: ScheduleSettings = part(ScheduleSettings)
    llm: LLMSettings = part(LLMSettings)
    embedding: EmbeddingSettings = part(EmbeddingSettings)
    storage: StorageSettings = part(StorageSettings)
    logging: LoggingSettings = part(LoggingSettings)

    @property
    def workspace_path(self) -> Path:
        if self.workspace:
            return Path(self.workspace).expanduser()
        # Imported here: only a config that names no workspace needs the platform's
        # directories (~2 ms of a command's start).
        from platformdirs import user_data_dir

        return Path(user_data_dir("chatmem", appauthor=False)).expanduser()

    @property
    def dm_scope_mode(self) -> DmScope:
        return DmScope(self.dm_scope)

    def with_workspace(self, path: Path | str) -> Self:
        return self.model_copy(update={"workspace": str(path)})

    def rules(self, where: Where) -> list[tuple[bool, str]]:
        """Checks of a loaded config that a subclass adds for its own sections (the front
        ends' config in adapters/): each is whether it holds and the error line that says
        why not, naming where the value came from (`where`). The core's own checks are
        `_validate`'s."""
        return []


class Where:
    """Where a loaded config's values came from, as its error lines name them: `source`
    is the file (or "defaults" without one); `of(key)` is the environment variable that
    set a key, else the file and the key."""

    __slots__ = ("overrides", "schema", "source")

    def __init__(self, source: str, overrides: Mapping[str, Any], schema: type[Config]) -> None:
        self.source = source
        self.overrides = overrides
        self.schema = schema

    def of(self, dotted: str) -> str:
        section, _, key = dotted.rpartition(".")
        if key in (self.overrides.get(section, {}) if section else self.overrides):
            return next(
                f"environment variable {name}"
                for name, bound in env_bindings(self.schema)
                if bound == dotted
            )
        return f"{self.source}: '{dotted}'"


DEFAULT_CONFIG_NAME = "chatmem.toml"

C = TypeVar("C", bound=Config)


def load_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    workspace: Path | str | None = None,
    schema: type[C] = Config,  # type: ignore[assignment]  # C is Config when not given
) -> C:
    """File (explicit, else ./chatmem.toml when present), then env, then `workspace` arg.
    `schema` is the file's layout: `Config`, or a subclass with more sections (the front
    ends' `AppConfig`), whose keys are then checked, bound and redacted the same way."""
    env = os.environ if env is None else env
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    source = "defaults" if path is None else str(path)
    values: dict[str, Any] = {}
    if path is not None:
        import tomllib  # only a config file needs a TOML parser (~2 ms of imports)

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
            build(schema, values)
        except Invalid as exc:
            raise _config_error(exc, source, {}, schema) from None
    overrides = _env_values(env, schema)
    if not values and not overrides:
        config = schema()
    else:
        try:
            config = build(schema, _merged(values, overrides))
        except Invalid as exc:
            raise _config_error(exc, source, env, schema) from None
    if workspace is not None:
        config = config.with_workspace(workspace)
    _validate(config, source, overrides)
    return config


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


def _leaves(cls: type[Section] = Config, prefix: str = "") -> Iterator[tuple[str, Field]]:
    for info in fields(cls):
        if info.section is not None:
            yield from _leaves(info.section, f"{prefix}{info.name}.")
        else:
            yield f"{prefix}{info.name}", info


SHORTEST_SECRET = 6
"""Secrets shorter than this are not cut out of log lines: they would garble ordinary text
(and are no secret worth the name)."""


def secret_values(config: Config) -> list[str]:
    """Every secret the config holds (API keys, the database DSN, and a front end's own:
    bot tokens, app secrets, MCP clients' tokens): what no log line or message may show."""
    found: list[str] = []
    for dotted, info in _leaves(type(config)):
        if not info.secret:
            continue
        value: Any = config
        for name in dotted.split("."):
            value = getattr(value, name)
        found.extend(value if isinstance(value, dict) else [value])
    return [value for value in found if isinstance(value, str) and len(value) >= SHORTEST_SECRET]


def secret_keys(schema: type[Config] = Config) -> list[str]:
    """The dotted keys of every secret setting (`chatmem doctor` checks who can read a
    file that sets one)."""
    return [dotted for dotted, info in _leaves(schema) if info.secret]


def env_bindings(schema: type[Config] = Config) -> list[tuple[str, str]]:
    """(ENV_NAME, dotted key) pairs: the public environment contract."""
    return [(info.env, dotted) for dotted, info in _leaves(schema) if info.env]


def _env_values(env: Mapping[str, str], schema: type[Config]) -> dict[str, Any]:
    """The values the environment sets, by today's variable names (`env_bindings`), as
    the file's tables would hold them; an empty value counts as unset."""
    data: dict[str, Any] = {}
    for dotted, info in _leaves(schema):
        name = info.env
        if not name or not (value := env.get(name)):
            continue
        parsed: Any = value
        if isinstance(info.default, list):
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
    `llm.api_key` replaces that one key of the file's `[llm]`, not the table)."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _merged(below, value)
        else:
            merged[key] = value
    return merged


RETIRED = {
    "recall.rank_budget": "every search now ranks the exact BM25 top hits over all its words",
}
"""Keys an earlier version read: a file that still sets one is told why it goes."""


def _config_error(
    error: Invalid, source: str, env: Mapping[str, str], schema: type[Config]
) -> ConfigError:
    """The first value that does not fit as one line: the key, and the file or the
    variable."""
    loc = list(error.loc)
    loc = _up_to_secret(schema, loc)
    key = "".join("[]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    for name, dotted in env_bindings(schema):
        if env.get(name) and key.partition("[")[0] == dotted:
            source = f"environment variable {name}"
    if error.unknown:
        retired = RETIRED.get(key)
        if retired:
            return ConfigError(f"{source}: '{key}' is no longer a setting ({retired}): remove it")
        return ConfigError(f"{source}: unknown key '{key}'")
    if error.message:
        return ConfigError(f"{source}: '{key}': {error.message}")
    return ConfigError(f"{source}: '{key}' must be {error.expected}, not {error.value!r}")


def _up_to_secret(schema: type[Section], loc: list[Any]) -> list[Any]:
    """`loc` cut after a secret table's name: the next part would be one of its keys
    (e.g. a bearer token), a secret never printed."""
    section: type[Section] | None = schema
    for at, name in enumerate(loc):
        info = next((f for f in fields(section) if f.name == name), None) if section else None
        if info is None:
            break
        if info.secret:
            return loc[: at + 1]
        section = info.section
    return loc


def _validate(config: Config, source: str, overrides: Mapping[str, Any]) -> None:
    s, h, lt = config.scoring, config.history, config.long_term
    checks: list[tuple[bool, str]] = [
        (0 < s.daily_decay <= 1, "scoring.daily_decay must be in (0, 1]"),
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
        (config.storage.postgres_pool_size >= 1, "storage.postgres_pool_size must be >= 1"),
        (
            2000 <= config.snapshot.budget_tokens <= 4000,
            "snapshot.budget_tokens must be in [2000, 4000]",
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
    for ok, line in config.rules(Where(source, overrides, type(config))):
        if not ok:
            raise ConfigError(line)
    if config.schedule.active_hours and parse_hours(config.schedule.active_hours) is None:
        raise ConfigError(f"{source}: 'schedule.active_hours' must be HH:MM-HH:MM or empty")
    hh, _, mm = config.schedule.daily_archive_at.partition(":")
    if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
        raise ConfigError(f"{source}: 'schedule.daily_archive_at' must be HH:MM")
