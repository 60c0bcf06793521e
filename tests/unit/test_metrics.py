"""The core's meter hooks, its readiness and backlogs, and the Prometheus server over them
(adapters/metrics.py), scraped with a real HTTP client on both storage backends."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.cli import main
from adapters.metrics import MetricsServer, PrometheusMeter, serve_metrics
from adapters.settings import load_app_config
from memory_core import health, services
from memory_core.base.clock import ManualClock
from memory_core.base.errors import ChatmemError, ConfigError, DatabaseUnreachable, LLMError
from memory_core.base.merge_values import Proposal
from memory_core.base.meter import CaptureAction, Meter, Outcome
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.config.services import LLMSettings
from memory_core.engine import MemoryCore
from memory_core.llm.client import LLMClient
from testkit.embedder import ConceptEmbedder
from testkit.openai_server import FakeOpenAI

pytestmark = pytest.mark.storage

PERSON = ScopeKey.parse("telegram:peer:9911")
CANARY = "the wombat-4471 sleeps in the blue barrel"


class Recording(Meter):
    """Every hook call, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []

    def turn(self, seconds: float, outcome: Outcome) -> None:
        self.calls.append(("turn", outcome))

    def recall(self, seconds: float, hits: int) -> None:
        self.calls.append(("recall", hits))

    def search(self, seconds: float, hits: int) -> None:
        self.calls.append(("search", hits))

    def llm_call(self, seconds: float, outcome: Outcome) -> None:
        self.calls.append(("llm", outcome))

    def capture(self, action: CaptureAction) -> None:
        self.calls.append(("capture", action))

    def index_rebuild(self) -> None:
        self.calls.append(("rebuild", None))

    def consolidation(self, outcome: Outcome) -> None:
        self.calls.append(("consolidation", outcome))

    def named(self, name: str) -> list[Any]:
        return [value for called, value in self.calls if called == name]


async def test_the_core_reports_captures_searches_rebuilds_and_consolidation(
    config: Config, clock: ManualClock
) -> None:
    meter = Recording()
    async with MemoryCore.open(config, clock=clock, meter=meter) as core:
        await core.memories.capture(MAIN, "My locker number is 41")
        await core.memories.capture(MAIN, "My locker number is 41")
        await core.memories.capture(MAIN, "My locker number is 57")
        hits = await core.finder.search(MAIN, "locker number")
        await core.finder.recall(MAIN, "what is my locker number?")
        await core.reindex()
        await core.consolidation.run(MAIN)
    assert meter.named("capture") == ["new", "reinforced", "updated"]
    assert meter.named("search")[0] == len(hits) > 0
    assert len(meter.named("recall")) == 1 and meter.named("recall")[0] > 0
    assert meter.named("rebuild") == [None]
    assert meter.named("consolidation") == ["ok"]


@pytest.mark.parametrize("journal", [True, False])
async def test_each_kept_memory_is_counted_once_whichever_path_keeps_it(
    config: Config, clock: ManualClock, journal: bool
) -> None:
    """A capture through the journal or straight into MEMORY.md, and a session's
    extracted memories (merged without `capture`), each counted once."""
    settings = config.long_term.model_copy(update={"journal": journal})
    config = config.model_copy(update={"long_term": settings})
    meter = Recording()
    async with MemoryCore.open(config, clock=clock, meter=meter) as core:
        await core.memories.capture(MAIN, "My bike is red")
        await core.memories.flush()
        await core.memories.merge_candidates(
            MAIN,
            [Proposal("I work at the harbour office"), Proposal("My bike is red")],
            session_id="session-1",
            source="session",
        )
    assert meter.named("capture") == ["new", "new", "reinforced"]


async def test_model_calls_are_timed_and_failures_counted() -> None:
    meter = Recording()
    async with FakeOpenAI() as fake:
        settings = LLMSettings(model="gpt-fake", base_url=fake.base_url, max_retries=0)
        client = LLMClient(settings, meter=meter)
        try:
            await client.chat([{"role": "user", "content": "hi"}])
            fake.fail(500)
            with pytest.raises(LLMError):
                await client.chat([{"role": "user", "content": "hi"}])
        finally:
            await client.close()
    assert meter.named("llm") == ["ok", "error"]


async def test_readiness_and_backlogs_of_an_open_core(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ready on both backends; the vector backlog counts texts until their vectors are
    made, then 0; the journal is empty once captures are written."""
    monkeypatch.setattr(services, "build_embedder", lambda settings: ConceptEmbedder())
    async with MemoryCore.open(config, clock=clock, serving=False) as core:
        ready = await core.readiness()
        assert ready.ready, ready.checks
        assert ready.checks["database"] == "ok" and ready.checks["index"] == "ok"
        await core.memories.capture(MAIN, "I live in Hangzhou")
        await core.memories.flush()
        waiting = await core.backlogs()
        assert waiting.journal_depth == 0
        assert waiting.vector_backlog is not None and waiting.vector_backlog >= 1
        await core.finder.make_vectors(MAIN, most=None)
        assert (await core.backlogs()).vector_backlog == 0


async def test_a_core_without_its_database_is_not_ready(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def away(backend: object) -> tuple[None, str]:
        return None, "the database is unreachable: connection refused"

    monkeypatch.setattr(services, "_open_database", away)
    async with MemoryCore.open(config, clock=clock) as core:
        ready = await core.readiness()
        backlogs = await core.backlogs()
    assert not ready.ready
    assert ready.checks["database"].startswith("not open: the database is unreachable")
    assert backlogs.vector_backlog is None


class Away:
    """A database whose server is gone, or one that never answers."""

    def __init__(self, hangs: bool) -> None:
        self.hangs = hangs

    async def read(self, work: Any) -> Any:
        if self.hangs:
            await asyncio.Event().wait()
        raise DatabaseUnreachable("the database is unreachable: connection refused")


@pytest.mark.parametrize("hangs", [False, True])
async def test_a_probe_of_a_database_away_answers_at_once(
    hangs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/readyz and /metrics must answer while the database is away or stuck: the probe
    says why, the count is unknown, neither raises or waits past `PROBE_SECONDS`."""
    monkeypatch.setattr(health, "PROBE_SECONDS", 0.05)
    db: Any = Away(hangs)
    word = await health._probe(db, lambda conn: None)
    count = await health._count(db, lambda conn: 0)
    expected = "no answer within 0.05s" if hangs else "unreachable: the database is"
    assert word.startswith(expected)
    assert count is None


def values(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


@pytest.fixture
async def server() -> AsyncIterator[tuple[MetricsServer, str]]:
    async with serve_metrics("127.0.0.1", 0) as running:
        assert running._runner is not None
        port = running._runner.addresses[0][1]
        yield running, f"http://127.0.0.1:{port}"


async def test_a_scrape_counts_without_scope_or_text(
    config: Config, clock: ManualClock, server: tuple[MetricsServer, str]
) -> None:
    metrics, base = server
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/readyz") as response:
            assert (response.status, await response.text()) == (503, "starting\n")
        async with MemoryCore.open(config, clock=clock, meter=metrics.meter) as core:
            metrics.core = core
            await core.memories.capture(PERSON, CANARY)
            await core.finder.search(PERSON, "wombat barrel")
            async with http.get(f"{base}/readyz") as response:
                assert response.status == 200, await response.text()
            async with http.get(f"{base}/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                body = await response.text()
            metrics.core = None
        async with http.get(f"{base}/healthz") as response:
            assert (response.status, await response.text()) == (200, "ok\n")
    scraped = values(body)
    assert scraped[("chatmem_captures_total", (("action", "new"),))] == 1
    assert scraped[("chatmem_captures_total", (("action", "updated"),))] == 0
    assert scraped[("chatmem_search_seconds_count", ())] == 1
    assert scraped[("chatmem_hits_returned_total", (("call", "search"),))] >= 1
    assert scraped[("chatmem_scopes", ())] == 2  # main and the person's: a total only
    assert scraped[("chatmem_ready", ())] == 1
    # Names, labels and help texts, without the sample values: a float such as a start
    # time may hold the digits of the person's id by chance.
    described = "\n".join(
        line if line.startswith("#") else line.rsplit(" ", 1)[0] for line in body.splitlines()
    )
    for private in ("wombat", "barrel", "peer:", "9911", "telegram"):
        assert private not in described, private


async def test_each_core_counts_in_its_own_registry() -> None:
    first, second = PrometheusMeter(), PrometheusMeter()
    first.capture("new")
    assert first.registry.get_sample_value("chatmem_captures_total", {"action": "new"}) == 1
    assert second.registry.get_sample_value("chatmem_captures_total", {"action": "new"}) == 0


def test_a_bad_listen_address_is_one_line_naming_the_key() -> None:
    with pytest.raises(ConfigError) as raised:
        load_app_config(env={"CHATMEM_METRICS_LISTEN": "localhost"})
    assert str(raised.value) == (
        "environment variable CHATMEM_METRICS_LISTEN: must be HOST:PORT "
        "(e.g. 127.0.0.1:9464), not 'localhost'"
    )


async def test_an_address_in_use_is_refused_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ChatmemError, match=rf"cannot serve metrics on 127.0.0.1:{port}"):
            async with serve_metrics("127.0.0.1", port):
                pass


def test_a_serving_command_refuses_a_taken_address_with_exit_2(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("CHATMEM_METRICS_LISTEN", f"127.0.0.1:{port}")
        monkeypatch.chdir(tmp_path)
        code = main(["chat", "--workspace", str(tmp_path / "ws")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"chatmem: error: cannot serve metrics on 127.0.0.1:{port}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "serves"),
    [
        (["telegram"], True),
        (["dingtalk"], True),
        (["chat"], True),
        (["mcp", "--http", "127.0.0.1:8765"], True),
        (["mcp"], False),
        (["tui"], False),
        (["status"], False),
    ],
)
def test_which_commands_serve_metrics(argv: list[str], serves: bool) -> None:
    from adapters.cli import bots, build_parser, commands, mcp, running, tui  # noqa: F401  (registers them)

    assert running.metered(build_parser().parse_args(argv)) is serves


def test_metrics_without_prometheus_client_are_refused_in_one_line(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An install made before prometheus-client was a dependency: one line, exit 2."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "adapters.metrics", raising=False)
    monkeypatch.setenv("CHATMEM_METRICS_LISTEN", "127.0.0.1:0")
    monkeypatch.chdir(tmp_path)
    code = main(["chat", "--workspace", str(tmp_path / "ws")])
    err = capsys.readouterr().err
    assert code == 2
    assert "chatmem: error: metrics.listen is set but prometheus_client is not installed" in err
    assert "Traceback" not in err
    assert not (tmp_path / "ws").exists()  # refused before anything was made
