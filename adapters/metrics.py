"""Health and Prometheus metrics of a serving process: `/healthz`, `/readyz`, `/metrics`.

`PrometheusMeter` is the core's `Meter` (memory_core/base/meter.py) recording into a
registry of its own (never the library's global one: two cores in one process, or two
tests, do not mix their counts). `MetricsServer` serves it on the process's event loop
with aiohttp (already a dependency; no thread, nothing blocks the loop); the backlogs and
the scope total are read from the core when scraped, each database call bounded
(memory_core/health.py).

Labels take only fixed words (outcome, capture action, which call): no scope key and no
text can reach a metric, so a scrape shows nothing a person said or who said it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from adapters.listening import start_listening
from memory_core.base.errors import ChatmemError
from memory_core.base.meter import CAPTURE_ACTIONS, CaptureAction, Meter, Outcome

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)

OUTCOMES: tuple[Outcome, ...] = ("ok", "error")
FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Buckets of a search or a recall: milliseconds to seconds."""
SLOW = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
"""Buckets of a model call or a chat turn: up to the model's timeout."""


class PrometheusMeter(Meter):
    """The core's hooks as Prometheus counters and histograms, in `self.registry`."""

    def __init__(self) -> None:
        super().__init__()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter(
            "chatmem_turns", "Chat turns handled, by outcome.", ["outcome"], registry=r
        )
        self.turn_seconds = Histogram(
            "chatmem_turn_seconds", "Time to answer a chat turn.", buckets=SLOW, registry=r
        )
        self.recall_seconds = Histogram(
            "chatmem_recall_seconds",
            "Time to recall memories for a prompt.",
            buckets=FAST,
            registry=r,
        )
        self.search_seconds = Histogram(
            "chatmem_search_seconds",
            "Time of one ranked search (a recall's included).",
            buckets=FAST,
            registry=r,
        )
        self.hits = Counter(
            "chatmem_hits_returned",
            "Hits returned: put in a prompt by a recall, or listed by a search.",
            ["call"],
            registry=r,
        )
        self.llm_calls = Counter(
            "chatmem_llm_calls", "Calls to the model, by outcome.", ["outcome"], registry=r
        )
        self.llm_errors = Counter("chatmem_llm_errors", "Model calls that failed.", registry=r)
        self.llm_seconds = Histogram(
            "chatmem_llm_seconds", "Time of one call to the model.", buckets=SLOW, registry=r
        )
        self.captures = Counter(
            "chatmem_captures",
            "Memories captured: new, updated an alike one, or reinforced a repeat.",
            ["action"],
            registry=r,
        )
        self.rebuilds = Counter(
            "chatmem_index_rebuilds", "Search index rebuilds from the files.", registry=r
        )
        self.consolidations = Counter(
            "chatmem_consolidation_runs",
            "Consolidation runs of a scope, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.journal_depth = Gauge(
            "chatmem_journal_depth",
            "Captures in the journal not yet written to MEMORY.md (-1: unknown).",
            registry=r,
        )
        self.vector_backlog = Gauge(
            "chatmem_vector_backlog",
            "Texts waiting for their vector (-1: unknown or no embedder).",
            registry=r,
        )
        self.scopes = Gauge("chatmem_scopes", "Scopes that hold something (a total).", registry=r)
        self.ready = Gauge("chatmem_ready", "1 when /readyz would answer 200.", registry=r)
        for outcome in OUTCOMES:  # every series from the start, at zero
            self.turns.labels(outcome)
            self.llm_calls.labels(outcome)
            self.consolidations.labels(outcome)
        for action in CAPTURE_ACTIONS:
            self.captures.labels(action)
        for call in ("recall", "search"):
            self.hits.labels(call)

    def turn(self, seconds: float, outcome: Outcome) -> None:
        self.turns.labels(outcome).inc()
        self.turn_seconds.observe(seconds)

    def recall(self, seconds: float, hits: int) -> None:
        self.recall_seconds.observe(seconds)
        self.hits.labels("recall").inc(hits)

    def search(self, seconds: float, hits: int) -> None:
        self.search_seconds.observe(seconds)
        self.hits.labels("search").inc(hits)

    def llm_call(self, seconds: float, outcome: Outcome) -> None:
        self.llm_calls.labels(outcome).inc()
        if outcome == "error":
            self.llm_errors.inc()
        self.llm_seconds.observe(seconds)

    def capture(self, action: CaptureAction) -> None:
        self.captures.labels(action).inc()

    def index_rebuild(self) -> None:
        self.rebuilds.inc()

    def consolidation(self, outcome: Outcome) -> None:
        self.consolidations.labels(outcome).inc()


class MetricsServer:
    """`/healthz` (200 while the process runs), `/readyz` (200 when the core can serve,
    503 with the failing checks otherwise; 503 "starting" before the core is open) and
    `/metrics`, on the running event loop. `core` is set once it is open."""

    def __init__(self, meter: PrometheusMeter) -> None:
        self.meter = meter
        self.core: MemoryCore | None = None
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port; the port bound (port 0 picks a free one). An address that
        cannot be bound is an OSError, the caller's to report."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        runner = await start_listening(app, host, port, access_log=False)
        self._runner = runner
        bound = runner.addresses[0]
        return int(bound[1])

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        core = self.core
        if core is None:
            return web.Response(status=503, text="starting\n")
        readiness = await core.readiness()
        lines = "".join(f"{name}: {word}\n" for name, word in readiness.checks.items())
        return web.Response(status=200 if readiness.ready else 503, text=lines)

    async def _metrics(self, request: web.Request) -> web.Response:
        await self._sample()
        body = generate_latest(self.meter.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _sample(self) -> None:
        """The gauges as of this scrape (read from the core, each call bounded)."""
        meter, core = self.meter, self.core
        if core is None:
            meter.ready.set(0)
            return
        backlogs = await core.backlogs()
        depth, backlog = backlogs.journal_depth, backlogs.vector_backlog
        meter.journal_depth.set(-1 if depth is None else depth)
        meter.vector_backlog.set(-1 if backlog is None else backlog)
        meter.scopes.set(len(await core.known_scopes()))
        meter.ready.set(1 if (await core.readiness()).ready else 0)


@asynccontextmanager
async def serve_metrics(host: str, port: int) -> AsyncIterator[MetricsServer]:
    """A metrics server listening until the block ends, announced on stderr (port 0: the
    one picked); an address that cannot be bound is one ChatmemError line."""
    server = MetricsServer(PrometheusMeter())
    try:
        bound = await server.start(host, port)
    except OSError as exc:
        raise ChatmemError(
            f"cannot serve metrics on {host}:{port} (metrics.listen): {exc.strerror or exc}"
        ) from None
    shown = f"[{host}]" if ":" in host else host
    from adapters.cli.logs import notice

    notice(f"chatmem: metrics on http://{shown}:{bound}/metrics (and /healthz, /readyz)")
    try:
        yield server
    finally:
        await server.close()
