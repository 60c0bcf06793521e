"""The checks of `chatmem doctor` that run chatmem's own parts: the embedding model, the
model server (`--online` only: it costs a request), and what an open workspace tells
(the values `chatmem validate` computes, handed in: quarantined blocks, look-alike
scopes; how far the vectors lag behind the index).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from memory_core.base.scope import ScopeKey, lookalike_groups, printable_key
from memory_core.base.wording import counted
from memory_core.ops.database import first_line
from memory_core.ops.report import Check, fail, ok, skip, warn

if TYPE_CHECKING:
    from memory_core.config import Config
    from memory_core.longterm.long_term_views import ValidationProblem

EMBED_SECONDS = 120.0
"""How long a model may take to load and embed one text (a first load unpacks it)."""
LLM_SECONDS = 20.0
"""How long the model server may take to answer one token."""


async def embedding_check(config: Config, online: bool) -> tuple[Check, str | None]:
    """Whether the configured embedder loads and embeds a text; with it, its name (the
    vectors' model), None when there is none."""
    from memory_core.embedding.factory import build_embedder, why_no_embedder

    name = "embedding"
    settings = config.embedding
    try:
        embedder = build_embedder(settings)
    except Exception as exc:  # a ConfigError, a missing package: said, not raised
        return fail(name, first_line(exc)), None
    if embedder is None:
        return skip(name, f"none: {why_no_embedder(settings)}"), None
    try:
        if settings.provider == "openai" and not online:
            return skip(name, f"{embedder.name} is a server's: add --online to call it"), None
        vectors = await asyncio.wait_for(embedder.embed(["chatmem doctor"]), EMBED_SECONDS)
        return ok(name, f"{embedder.name} loads ({len(vectors[0])}-d)"), embedder.name
    except TimeoutError:
        return fail(name, f"{embedder.name}: no vector within {EMBED_SECONDS:.0f} s"), None
    except Exception as exc:
        return fail(name, f"{embedder.name}: {first_line(exc)}"), None
    finally:
        await embedder.close()


async def llm_check(config: Config, online: bool) -> Check:
    """One completion of one token from the configured model, only when asked to."""
    name = "llm"
    settings = config.llm
    if not settings.model:
        return skip(name, "no llm.model: the bots run offline (memory commands only)")
    where = settings.base_url or "the default server"
    if not online:
        return skip(name, f"{settings.model} at {where}: not contacted (add --online)")
    import openai

    client = openai.AsyncOpenAI(
        base_url=settings.base_url or None,
        api_key=settings.api_key or "not-needed",
        timeout=LLM_SECONDS,
        max_retries=0,
    )
    try:
        await client.chat.completions.create(
            model=settings.model,
            messages=[{"role": "user", "content": "Reply with one word."}],
            max_tokens=1,
        )
    except openai.APIStatusError as exc:
        return fail(name, f"{settings.model} at {where}: HTTP {exc.status_code}: {exc.message}")
    except openai.OpenAIError as exc:
        return fail(name, f"{settings.model} at {where}: {first_line(exc)}")
    finally:
        await client.close()
    return ok(name, f"{settings.model} at {where} answered")


def workspace_checks(
    degraded: str | None,
    scopes: list[ScopeKey],
    problems: list[ValidationProblem],
    model: str | None,
    coverage: tuple[int, int],
) -> list[Check]:
    """What an open workspace tells (pure): the index and its vectors' lag (`coverage`:
    chunks, and those with a vector of `model`), quarantined blocks, look-alike scopes."""
    checks = [index_check(degraded, model, coverage)]
    if problems:
        where = sorted({p.path for p in problems})
        checks.append(
            warn(
                "memory files",
                f"{counted(len(problems), 'quarantined block')} in {', '.join(where[:3])}"
                f"{' …' if len(where) > 3 else ''} (kept verbatim; `chatmem validate` shows them)",
            )
        )
    else:
        checks.append(ok("memory files", "every block is valid"))
    groups = lookalike_groups(scopes)
    if groups:
        shown = "; ".join(", ".join(printable_key(k) for k in g) for g in groups[:3])
        checks.append(
            warn(
                "scopes",
                f"{counted(len(groups), 'group')} of scopes look alike ({shown}): "
                "`chatmem validate` shows how to merge them",
            )
        )
    else:
        checks.append(ok("scopes", f"{counted(len(scopes), 'scope')}, none alike"))
    return checks


def index_check(degraded: str | None, model: str | None, coverage: tuple[int, int]) -> Check:
    name = "index"
    if degraded:
        return fail(name, f"unusable: {degraded}")
    if model is None:
        return ok(name, "usable; searched by words only (no embedding model)")
    chunks, vectors = coverage
    if vectors < chunks:
        return warn(
            name,
            f"{chunks - vectors} of {chunks} chunks have no {model} vectors yet (a bot makes "
            "them in the background; `chatmem vectors` makes them now)",
        )
    return ok(name, f"usable; {counted(chunks, 'chunk')}, every one with vectors of {model}")
