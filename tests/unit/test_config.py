"""Typed settings: defaults, file values, errors naming key and file, env overrides."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from platformdirs import user_data_dir

from adapters.settings import AppConfig, load_app_config
from memory_core.base.errors import ConfigError
from memory_core.base.scope import DmScope
from memory_core.config import Config, env_bindings, load_config
from memory_core.config.checks import build
from memory_core.config.example import render_example
from memory_core.config.fields import Section, as_dict, fields, part, setting

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config.example.toml"


@pytest.fixture(autouse=True)
def _away_from_chatmem_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_app_config(None) reads ./chatmem.toml when present: run where there is none."""
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)


def write(tmp_path: Path, text: str, name: str = "chatmem.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file() -> None:
    config = load_app_config(None, env={})
    assert config == AppConfig()
    assert config.workspace == ""
    assert config.workspace_path == Path(user_data_dir("chatmem", appauthor=False))
    assert config.dm_scope == "main"
    assert config.dm_scope_mode is DmScope.MAIN
    assert config.timezone == "UTC"
    assert config.scoring.archive_below == 0.2
    assert config.scoring.forget_below == 0.05
    assert config.scoring.daily_decay == 0.99
    assert config.scoring.grace_days == 7
    assert config.prompt.min_score == 0.5
    assert config.prompt.top_k == 20
    assert config.recall.k1 == 1.2
    assert config.recall.b == 0.75
    assert config.recall.token_budget == 2048
    assert config.history.token_budget == 4096
    assert config.telegram.allowed_users == []
    policy = config.scoring.policy()
    assert (policy.reinforce_rate, policy.contradict_factor) == (0.2, 0.5)


def test_the_defaults_are_built_unchecked_and_pass_the_checks() -> None:
    """Without a file or a variable, `load_app_config` is `AppConfig()`, nothing checked (a
    command's start); every default is a value the strict checks accept, as a file
    spelling out every default would give it."""
    built = load_app_config(None, env={})
    assert built == AppConfig() == build(AppConfig, {})
    assert build(AppConfig, as_dict(built)) == built
    for info in fields(AppConfig):
        section = getattr(built, info.name)
        if isinstance(section, Section):
            assert build(type(section), as_dict(section)) == section, info.name
    assert load_app_config(None, env={}, workspace="/w") == AppConfig(workspace="/w")


def test_a_command_loading_the_config_imports_no_pydantic() -> None:
    """pydantic cost ~75 ms of every command's start: the config neither imports it for
    the defaults nor to check a file's values."""
    code = (
        "import sys\n"
        "from adapters.settings import load_app_config\n"
        "load_app_config(None, env={'CHATMEM_MODEL': 'm'})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_default_file_in_cwd_is_read(tmp_path: Path) -> None:
    Path("chatmem.toml").write_text('timezone = "Asia/Shanghai"\n', encoding="utf-8")
    assert load_app_config(None, env={}).timezone == "Asia/Shanghai"


def test_file_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
workspace = "/srv/chatmem"
dm_scope = "per-channel-peer"
topic_scope = true
timezone = "Europe/Berlin"

[scoring]
daily_decay = 0.98
grace_days = 3
category_decay = { todo = 0.9, fact = 1 }

[prompt]
max_tokens = 800

[telegram]
allowed_users = [1, 2]
mode = "webhook"

[archive]
backoff_minutes = [5, 10]
""",
    )
    config = load_app_config(path, env={})
    assert config.workspace_path == Path("/srv/chatmem")
    assert config.dm_scope_mode is DmScope.PER_CHANNEL_PEER
    assert config.topic_scope is True
    assert config.timezone == "Europe/Berlin"
    assert config.scoring.daily_decay == 0.98
    assert config.scoring.grace_days == 3
    assert config.scoring.category_decay == {"todo": 0.9, "fact": 1.0}
    assert isinstance(config.scoring.category_decay["fact"], float)
    policy = config.scoring.policy()
    assert policy.category_decay == {"todo": 0.9, "fact": 1.0}
    assert policy.decay == "class"
    assert policy.class_decay == {"fact": 0.008, "belief": 0.07, "summary": 0.025, "event": 0.15}
    assert config.prompt.max_tokens == 800
    assert config.prompt.top_k == 20  # untouched keys keep their defaults
    assert config.telegram.allowed_users == [1, 2]
    assert config.telegram.mode == "webhook"
    assert config.archive.backoff_minutes == [5, 10]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("colour = 1\n", "'colour'"),
        ("[scoring]\ndecai = 0.5\n", "'scoring.decai'"),
        ("[telegram]\nbot_tokn = 'x'\n", "'telegram.bot_tokn'"),
        ("[nonsense]\nx = 1\n", "'nonsense'"),
    ],
)
def test_unknown_key_names_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    message = str(err.value)
    assert str(path) in message
    assert key in message
    assert "unknown key" in message


def test_a_retired_key_says_why_it_goes(tmp_path: Path) -> None:
    """A file written for an earlier version (`recall.rank_budget`, gone since search
    ranks the exact top hits) is told, in one line, to drop the key."""
    path = write(tmp_path, "[recall]\nrank_budget = 1500\n")
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    message = str(err.value)
    assert str(path) in message
    assert "'recall.rank_budget' is no longer a setting" in message
    assert "remove it" in message


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[prompt]\ntop_k = "20"\n', "'prompt.top_k'", "whole number"),
        ("[prompt]\ntop_k = 2.5\n", "'prompt.top_k'", "whole number"),
        ("[prompt]\ntop_k = true\n", "'prompt.top_k'", "whole number"),
        ("topic_scope = 1\n", "'topic_scope'", "true or false"),
        (
            '[telegram]\ngroup_requires_mention = "yes"\n',
            "'telegram.group_requires_mention'",
            "true or false",
        ),
        ('dm_scope = "per-user"\n', "'dm_scope'", "must be one of"),
        ("timezone = 5\n", "'timezone'", "string"),
        ('[scoring]\ndaily_decay = "fast"\n', "'scoring.daily_decay'", "number"),
        ('[telegram]\nallowed_users = ["1"]\n', "'telegram.allowed_users[]'", "whole number"),
        ("[telegram]\nallowed_users = 1\n", "'telegram.allowed_users'", "list"),
        ("scoring = 1\n", "'scoring'", "table"),
        ('[scoring]\ncategory_decay = { todo = "x" }\n', "'scoring.category_decay.todo'", "number"),
    ],
)
def test_wrong_type_names_key_and_file(tmp_path: Path, text: str, key: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    message = str(err.value)
    assert str(path) in message
    assert key in message
    assert words in message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[scoring]\narchive_below = 0.01\n", "thresholds"),
        ("[scoring]\ndaily_decay = 1.5\n", "daily_decay"),
        ('timezone = "Mars/Olympus"\n', "timezone"),
        ('[schedule]\ndaily_archive_at = "25:00"\n', "daily_archive_at"),
        ("[history]\nmin_messages = 30\n", "min_messages"),
    ],
)
def test_invalid_values_name_the_file(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    assert str(path) in str(err.value)
    assert words in str(err.value)


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_app_config(tmp_path / "nope.toml", env={})
    broken = write(tmp_path, "a = [\n")
    with pytest.raises(ConfigError) as err:
        load_app_config(broken, env={})
    assert str(broken) in str(err.value)
    assert "TOML" in str(err.value)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ('workspace = "w"\n'.encode("utf-16"), "UTF-16 byte order mark"),
        ('workspace = "caf\u00e9"\n'.encode("latin-1"), "not UTF-8 text"),
        (b"\xef\xbb\xbf" + b'workspace = "w"\n', "UTF-8 byte order mark"),
    ],
)
def test_a_file_in_another_encoding_is_one_clear_error(
    tmp_path: Path, data: bytes, words: str
) -> None:
    path = tmp_path / "chatmem.toml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    assert str(path) in str(err.value)
    assert words in str(err.value)


ENV_CASES: list[tuple[str, str, Any]] = [
    ("CHATMEM_WORKSPACE", "/data/ws", ("workspace", "/data/ws")),
    ("CHATMEM_DM_SCOPE", "per-peer", ("dm_scope", "per-peer")),
    ("CHATMEM_MODEL", "gpt-test", ("llm.model", "gpt-test")),
    ("CHATMEM_EMBEDDING_API_KEY", "sk-emb", ("embedding.api_key", "sk-emb")),
    ("CHATMEM_MODEL_CACHE", "/srv/models", ("embedding.model_cache", "/srv/models")),
    ("OPENAI_API_KEY", "sk-secret", ("llm.api_key", "sk-secret")),
    ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1", ("llm.base_url", "http://127.0.0.1:9/v1")),
    ("TELEGRAM_BOT_TOKEN", "123:abc", ("telegram.bot_token", "123:abc")),
    (
        "TELEGRAM_API_BASE_URL",
        "http://127.0.0.1:8081/bot",
        ("telegram.api_base_url", "http://127.0.0.1:8081/bot"),
    ),
    ("CHATMEM_TELEGRAM_ALLOWED_USERS", "1, 2,3", ("telegram.allowed_users", [1, 2, 3])),
    ("DINGTALK_APP_KEY", "ding-key", ("dingtalk.app_key", "ding-key")),
    ("DINGTALK_APP_SECRET", "ding-secret", ("dingtalk.app_secret", "ding-secret")),
    ("CHATMEM_STORAGE_BACKEND", "postgres", ("storage.backend", "postgres")),
    (
        "CHATMEM_POSTGRES_DSN",
        "postgresql://bot:pw@db/chatmem",
        ("storage.postgres_dsn", "postgresql://bot:pw@db/chatmem"),
    ),
    ("CHATMEM_MCP_TOKEN", "a-bearer-token-0123456789", ("mcp.token", "a-bearer-token-0123456789")),
    ("CHATMEM_LOG_LEVEL", "DEBUG", ("log_level", "DEBUG")),
    ("CHATMEM_LOG_FORMAT", "json", ("logging.format", "json")),
    ("CHATMEM_METRICS_LISTEN", "127.0.0.1:9464", ("metrics.listen", "127.0.0.1:9464")),
]


def get(config: AppConfig, dotted: str) -> Any:
    value: Any = config
    for name in dotted.split("."):
        value = getattr(value, name)
    return value


@pytest.mark.parametrize(("name", "value", "expected"), ENV_CASES)
def test_env_overrides(tmp_path: Path, name: str, value: str, expected: tuple[str, Any]) -> None:
    dotted, result = expected
    assert get(load_app_config(None, env={name: value}), dotted) == result
    # Env beats the file.
    section, _, key = dotted.rpartition(".")
    other = "[1]" if isinstance(result, list) else '"from-file"'
    if name == "CHATMEM_DM_SCOPE":
        other = '"per-channel-peer"'
    if name == "CHATMEM_STORAGE_BACKEND":
        other = '"sqlite"'
    if name == "CHATMEM_MCP_TOKEN":
        other = '"a-token-from-the-config-file"'
    if name == "CHATMEM_LOG_LEVEL":
        other = '"WARNING"'
    if name == "CHATMEM_LOG_FORMAT":
        other = '"text"'
    if name == "CHATMEM_METRICS_LISTEN":
        other = '"0.0.0.0:9100"'
    toml = f"[{section}]\n{key} = {other}\n" if section else f"{key} = {other}\n"
    path = write(tmp_path, toml)
    assert get(load_app_config(path, env={}), dotted) != result
    assert get(load_app_config(path, env={name: value}), dotted) == result


def test_env_binding_list_is_the_documented_contract() -> None:
    assert {name for name, _ in env_bindings(AppConfig)} == {name for name, _, _ in ENV_CASES}


def test_empty_env_values_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, 'dm_scope = "per-peer"\n')
    assert load_app_config(path, env={"CHATMEM_DM_SCOPE": ""}).dm_scope == "per-peer"


def test_bad_allowed_users_env_names_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        load_app_config(None, env={"CHATMEM_TELEGRAM_ALLOWED_USERS": "x"})
    assert "CHATMEM_TELEGRAM_ALLOWED_USERS" in str(err.value)
    with pytest.raises(ConfigError, match="CHATMEM_TELEGRAM_ALLOWED_USERS"):
        load_app_config(None, env={"CHATMEM_TELEGRAM_ALLOWED_USERS": "1,two"})


def test_bad_dm_scope_env_names_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        load_app_config(None, env={"CHATMEM_DM_SCOPE": "per-user"})
    assert "CHATMEM_DM_SCOPE" in str(err.value)
    assert "dm_scope" in str(err.value)


def test_workspace_precedence(tmp_path: Path) -> None:
    path = write(tmp_path, 'workspace = "/from/file"\n')
    env = {"CHATMEM_WORKSPACE": "/from/env"}
    assert load_app_config(path, env={}).workspace_path == Path("/from/file")
    assert load_app_config(path, env=env).workspace_path == Path("/from/env")
    assert load_app_config(path, env=env, workspace="/from/arg").workspace_path == Path("/from/arg")
    assert load_app_config(None, env={}, workspace=tmp_path).workspace_path == tmp_path


def test_real_environment_is_the_default_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATMEM_MODEL", "from-os-environ")
    assert load_app_config(None).llm.model == "from-os-environ"


def test_secrets_are_not_in_repr(tmp_path: Path) -> None:
    path = write(tmp_path, '[telegram]\nwebhook_secret = "hook-secret-value"\n')
    env = {
        "OPENAI_API_KEY": "sk-very-secret",
        "TELEGRAM_BOT_TOKEN": "123456:bot-secret",
        "DINGTALK_APP_SECRET": "ding-very-secret",
    }
    config = load_app_config(path, env=env)
    assert config.llm.api_key == "sk-very-secret"
    text = repr(config) + str(config) + repr(config.llm) + repr(config.telegram)
    text += repr(config.dingtalk)
    for secret in (*env.values(), "hook-secret-value"):
        assert secret not in text
    assert "webhook_port=8443" in text  # the rest still shows


def test_every_secret_field_is_hidden_from_repr() -> None:
    secrets = []
    for section_field in fields(AppConfig):
        section = section_field.section
        if section is None:
            continue
        for f in fields(section):
            if f.secret:
                secrets.append(f.name)
                assert f.repr is False, f"{f.name} is secret but shown in repr"
    assert {"api_key", "bot_token", "webhook_secret", "app_secret"} <= set(secrets)


# --- the generated example ---------------------------------------------------------------


def test_example_file_matches_the_code() -> None:
    if not EXAMPLE.exists():  # first run: generate it (commit the result)
        EXAMPLE.write_text(render_example(AppConfig), encoding="utf-8")
    assert EXAMPLE.read_text(encoding="utf-8") == render_example(AppConfig), (
        "config.example.toml is stale: regenerate it with "
        "python -c 'from adapters.settings import AppConfig; "
        "from memory_core.config.example import render_example; "
        'print(render_example(AppConfig), end="")\' > config.example.toml'
    )


def test_example_comments_are_whole_sentences() -> None:
    """A comment line that does not end a sentence is continued by the next one (which
    starts in lower case): no comment is cut mid-sentence."""
    comments = [
        (line.removeprefix("# "), after)
        for line, after in itertools.pairwise([*render_example(AppConfig).splitlines(), ""])
        if line.startswith("# ")
    ]
    cut = [
        text
        for text, after in comments
        if not text.endswith((".", ")", ":")) and not after.removeprefix("# ")[:1].islower()
    ]
    assert cut == []


def test_example_loads_back_to_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, render_example(AppConfig), name="example.toml")
    assert load_app_config(path, env={}) == AppConfig()
    text = render_example(AppConfig)
    for name, dotted in env_bindings(AppConfig):
        assert f"Env: {name}." in text, dotted
    assert "[scoring]" in text
    assert "[telegram]" in text


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[mcp]\ntoken = "short"\n', "at least 16 characters"),
        ('[mcp]\nclients = { "short" = "main" }\n', "at least 16 characters"),
        ('[mcp]\nclients = { "a-long-enough-token-0123" = "peer:" }\n', "empty part"),
        ('[mcp]\npath = "mcp"\n', "must start with '/'"),
        ('[mcp]\nclients = { "ünïcödé-token-0123456" = "main" }\n', "printable ASCII"),
        (
            '[mcp]\ntoken = "a-long-enough-token-0123"\n'
            'clients = { "a-long-enough-token-0123" = "peer:1" }\n',
            "one token, one scope",
        ),
    ],
)
def test_bad_mcp_settings_are_refused(tmp_path: Path, toml: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_app_config(write(tmp_path, toml), env={})


def test_a_bad_mcp_token_error_names_where_the_token_came_from(tmp_path: Path) -> None:
    """Not "defaults" for a token the environment gave: the variable, or the file's key."""
    with pytest.raises(ConfigError) as err:
        load_app_config(None, env={"CHATMEM_MCP_TOKEN": "short"})
    assert str(err.value) == (
        "environment variable CHATMEM_MCP_TOKEN: an MCP bearer token must be at least 16 characters"
    )
    path = write(tmp_path, '[mcp]\ntoken = "short"\n')
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    assert str(err.value).startswith(f"{path}: 'mcp.token': an MCP bearer token must be")
    # The environment's token beats the file's: the error is about the environment's.
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={"CHATMEM_MCP_TOKEN": "short too"})
    assert str(err.value).startswith("environment variable CHATMEM_MCP_TOKEN: ")
    assert "short" not in str(err.value).partition(": ")[2]
    clients = write(tmp_path, '[mcp]\nclients = { "short" = "main" }\n', name="clients.toml")
    with pytest.raises(ConfigError) as err:
        load_app_config(clients, env={"CHATMEM_MCP_TOKEN": "a-long-enough-token-0123"})
    assert str(err.value).startswith(f"{clients}: 'mcp.clients': ")


def test_mcp_tokens_stay_out_of_repr(tmp_path: Path) -> None:
    path = write(tmp_path, '[mcp]\nclients = { "a-long-enough-token-0123" = "peer:42" }\n')
    config = load_app_config(path, env={"CHATMEM_MCP_TOKEN": "another-long-token-456789"})
    assert config.mcp.clients == {"a-long-enough-token-0123": "peer:42"}
    assert "a-long-enough-token-0123" not in repr(config)
    assert "another-long-token-456789" not in repr(config)


def test_a_bad_mcp_client_entry_never_prints_its_token(tmp_path: Path) -> None:
    path = write(tmp_path, '[mcp]\nclients = { "a-secret-token-0123456789" = 42 }\n')
    with pytest.raises(ConfigError) as err:
        load_app_config(path, env={})
    assert "mcp.clients" in str(err.value)
    assert "a-secret-token-0123456789" not in str(err.value)


class _KeyedSettings(Section):
    """A made-up front end's table keyed by secrets."""

    peers: dict[str, int] = setting({}, "Token = peer id.", secret=True)


class _KeyedConfig(Config):
    keyed: _KeyedSettings = part(_KeyedSettings)


def test_any_secret_tables_keys_stay_out_of_an_error(tmp_path: Path) -> None:
    """Not only `[mcp] clients`: a bad entry of any secret table is named by the table,
    never by its key (a token), in whichever section a caller's schema adds it."""
    path = write(tmp_path, '[keyed]\npeers = { "a-secret-token-0123456789" = "x" }\n')
    with pytest.raises(ConfigError) as err:
        load_config(path, env={}, schema=_KeyedConfig)
    assert str(err.value) == f"{path}: 'keyed.peers' must be a whole number, not 'x'"


@pytest.mark.parametrize("hours", ["8-23", "08:00", "25:00-26:00", "morning"])
def test_bad_active_hours_are_refused(tmp_path: Path, hours: str) -> None:
    with pytest.raises(ConfigError, match="active_hours"):
        load_app_config(write(tmp_path, f'[schedule]\nactive_hours = "{hours}"\n'), env={})


def test_the_ranking_and_the_lifecycle_take_every_setting_from_the_config() -> None:
    """Each number is written once (the ranking's in config/memory.py's `[recall]`, the
    lifecycle's in base/policy.py's `ScoringPolicy`, which `[scoring]` reads): the defaults
    agree, and a value set in the config reaches the ranking and the scoring policy."""
    from dataclasses import fields

    from memory_core.base.policy import ScoringPolicy
    from memory_core.config.memory import RecallSettings, ScoringSettings
    from memory_core.recall.finder import rank_settings
    from memory_core.recall.index.rerank import RankSettings

    assert rank_settings(RecallSettings()) == RankSettings()
    assert ScoringSettings().policy() == ScoringPolicy()
    recall = RecallSettings(
        context_window=[0.4],
        fusion="rrf",
        dense_weight=0.2,
        turn_dense_floor=0.1,
        turn_dense_weight=0.9,
        turn_window_max=False,
        dense_feedback=5,
        dense_feedback_weight=0.4,
        lexical_feedback=5,
        time_boost=2.0,
        spoken_time_boost=3.0,
        long_term_boost=0.3,
        summary_factor=0.5,
        recency_boost=0.2,
        recency_half_life_days=9.0,
        duplicate_similarity=0.7,
        speaker_weight=0.5,
        speaker_names=False,
        exchange_documents=False,
        answer_boost=0.1,
        reply_anchors=False,
        question_factor=1.0,
        other_speaker_factor=1.0,
        session_repeat=0.8,
    )
    ranked = rank_settings(recall)
    default = RankSettings()
    own = {"rrf_k", "time_near_days"}  # constants of the ranking, not settings
    for f in fields(RankSettings):
        if f.name not in own:
            assert getattr(ranked, f.name) != getattr(default, f.name), f.name
