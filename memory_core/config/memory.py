"""The sections of how chatmem remembers: the lifecycle of long-term memories, what rides
in a prompt, recall, session history, its archive and the schedules of a running bot.

Apart from the loader (config/__init__.py) and from the services' sections (config/services.py)
so the layers that rank and remember read their numbers without pulling in the settings
loader. `base/policy.py` must never import this module: `[scoring]` takes its defaults from it.
"""

from __future__ import annotations

from datetime import time
from typing import Any, Literal

from memory_core.base.policy import CLASS_DECAY, DEFAULT_POLICY, ScoringPolicy
from memory_core.config.fields import Section, fields, setting


class ScoringSettings(Section):
    """Lifecycle of long-term memories."""

    reinforce_rate: float = setting(
        DEFAULT_POLICY.reinforce_rate, "Reinforcement gain: score + (1 - score) * rate."
    )
    contradict_factor: float = setting(
        DEFAULT_POLICY.contradict_factor, "A contradicted entry's score is multiplied by this."
    )
    decay: Literal["class", "flat"] = setting(
        DEFAULT_POLICY.decay,
        "class: each memory class decays at its own rate (class_decay); "
        "flat: every entry at daily_decay.",
    )
    class_decay: dict[str, float] = setting(
        {str(name): rate for name, rate in CLASS_DECAY.items()},
        "Per-class decay constant lambda: a day past the grace period multiplies the score "
        "by exp(-lambda) (half-lives of about 87, 10, 28 and 5 days).",
    )
    daily_decay: float = setting(
        DEFAULT_POLICY.daily_decay, "Daily decay factor after the grace period (flat mode)."
    )
    grace_days: int = setting(DEFAULT_POLICY.grace_days, "Days after an activation with no decay.")
    archive_below: float = setting(
        DEFAULT_POLICY.archive_below, "Entries scoring below this move to Archived (recall only)."
    )
    forget_below: float = setting(
        DEFAULT_POLICY.forget_below,
        "Entries scoring below this are forgotten (restorable for "
        "long_term.forgotten_keep_days; the audit log keeps their text).",
    )
    category_decay: dict[str, float] = setting(
        {},
        "Per-category daily decay factors for entries whose class comes from their "
        "category, overriding the class or flat rate, e.g. todo = 0.97.",
    )
    belief_contradict_factor: float = setting(
        DEFAULT_POLICY.belief_contradict_factor,
        "A belief contradicted by a later fact has its confidence multiplied by this.",
    )

    def policy(self) -> ScoringPolicy:
        # Same names. Field by field, the mappings copied: the policy owns its own.
        values: dict[str, Any] = {}
        for info in fields(self):
            value = getattr(self, info.name)
            values[info.name] = dict(value) if isinstance(value, dict) else value
        return ScoringPolicy(**values)


class LongTermSettings(Section):
    """How captures reach MEMORY.md, and how long forgotten entries stay restorable."""

    write_delay_seconds: float = setting(
        0.05,
        "A capture returns once journalled; MEMORY.md is rewritten this long after the first "
        "unwritten one, with every capture made meanwhile (any read or other write of the "
        "scope writes them first).",
    )
    journal: bool = setting(
        True,
        "Journal captures and write MEMORY.md in groups; false writes the file on every "
        "capture before it returns.",
    )
    forgotten_keep_days: int = setting(
        30,
        "Days a forgotten entry (by request or by decay) is kept, outside search and "
        "prompts, so `chatmem restore ID` can bring it back; 0 erases it from the memory "
        "files at once (the audit log keeps its text until `chatmem purge`).",
    )
    max_capture_bytes: int = setting(
        4 * 1024 * 1024,
        "Largest memory one capture or edit may hold (UTF-8 bytes), e.g. "
        "`chatmem capture -` reading stdin.",
    )


class PromptSettings(Section):
    """What of long-term memory rides in every system prompt."""

    min_score: float = setting(0.5, "Only Active entries at or above this.")
    top_k: int = setting(20, "At most this many entries.")
    max_tokens: int = setting(1500, "Token cap of the memory block; lower ranks shrink first.")
    daily_max_chars: int = setting(
        4000, "Cap on today's + yesterday's daily notes injected on a session's first turn."
    )


class RecallSettings(Section):
    """Recall over the scope's memories: BM25 with context, time and fields, fused with
    vectors when an embedder is available (docs/recall.md, "Ranking")."""

    k1: float = setting(1.2, "BM25 term-frequency saturation.")
    b: float = setting(0.75, "BM25 length normalisation.")
    min_score: float = setting(
        0.2,
        "Automatic recall drops hits whose BM25 evidence (with their neighbours') is below "
        "this, unless their vector similarity alone makes them likely.",
    )
    max_hits: int = setting(
        0,
        "At most this many hits are injected; 0 lets the kind of question decide "
        "(precise 8, topic 13, broad 18) within the token budget.",
    )
    token_budget: int = setting(2048, "Token budget of the injected block.")
    hit_chars: int = setting(300, "Each injected hit is cut at this length.")
    context_weight: float = setting(
        0.3, "Weight of the recent messages' words next to the pending message's (1.0)."
    )
    context_window: list[float] = setting(
        [0.5, 0.25],
        "A conversation turn scores these shares of its neighbours' scores, by distance "
        "(1, 2, ...): an answer is found by its question's words. [] turns it off.",
    )
    fusion: Literal["gated", "rrf", "weighted"] = setting(
        "gated",
        "How BM25 and vector scores combine: 'gated' (a long-term entry or summary adds"
        " dense_weight of the vector score, a conversation turn only similarity above"
        " turn_dense_floor), 'rrf' (reciprocal rank) or 'weighted' (every chunk alike).",
    )
    dense_weight: float = setting(0.7, "Share of the vector score in the fusion (0..1).")
    turn_dense_floor: float = setting(
        0.3, "'gated': cosine below which a conversation turn's vector adds nothing."
    )
    turn_dense_weight: float = setting(
        1.0, "'gated': what a turn's vector adds at most, as a share of the best BM25 score."
    )
    turn_window_max: bool = setting(
        True,
        "A turn's similarity is the best of the two vectors holding it: its own (made with"
        " the turn before) and the next turn's (made with it); every candidate is compared.",
    )
    dense_feedback: int = setting(
        3,
        "The query's vector is moved toward the vectors of this many conversation turns"
        " BM25 ranks best (Rocchio) before the vector search; 0 turns it off.",
    )
    dense_feedback_weight: float = setting(
        0.5, "What the BM25 hits' mean vector adds to the query's (dense_feedback)."
    )
    lexical_feedback: int = setting(
        0,
        "Up to this many rare words of the best 3 BM25 hits join the query at 0.3 of a"
        " query word (pseudo-relevance feedback); 0 turns it off.",
    )
    time_boost: float = setting(
        1.0, "A turn inside the time a question names scores (1 + this) times more."
    )
    spoken_time_boost: float = setting(
        1.5,
        "A turn whose words speak of a day inside the question's time ('yesterday', '上周五',"
        " resolved when stored) scores (1 + this) times more: a stronger witness than a turn"
        " merely made then.",
    )
    long_term_boost: float = setting(0.15, "Long-term entries score (1 + this) times more.")
    summary_factor: float = setting(0.9, "Summaries score this many times their score.")
    recency_boost: float = setting(
        0.1, "A turn of today scores (1 + this) times more, halving every half-life."
    )
    recency_half_life_days: float = setting(30.0, "Half-life of the recency lift.")
    duplicate_similarity: float = setting(
        0.8, "A hit sharing this share of its words with a better one is left out."
    )
    speaker_weight: float = setting(
        2.0, "A query word naming a turn's speaker counts this share of its idf."
    )
    speaker_names: bool = setting(
        True,
        "A query word naming who spoke a turn counts as the turn's speaker only, not as a"
        " word of the turns (people say each other's names in greetings and thanks).",
    )
    exchange_documents: bool = setting(
        True,
        "A turn near the best matches scores as one document with its neighbours (the"
        " context window's reach) instead of its score plus shares of theirs.",
    )
    answer_boost: float = setting(
        0.5,
        "A hit holding the kind of answer the question wants (a date for 'when', a number"
        " for 'how many') scores (1 + this) times more; 0 turns it off.",
    )
    reply_anchors: bool = setting(
        True,
        "A question's rank goes to the other speaker's reply right after it: the hit is"
        " the answer, shown with its question.",
    )
    question_factor: float = setting(
        0.8,
        "A conversation turn ending in a question scores this many times its score: it"
        " asks, the answer is in another turn; 1 turns it off.",
    )
    other_speaker_factor: float = setting(
        0.7,
        "When a question names who spoke in the conversation ('What pets does Nate have?'),"
        " a turn said by someone else scores this many times its score; 1 turns it off.",
    )
    session_repeat: float = setting(
        1.0,
        "A conversation turn ranks at this share of its score for each better hit of its"
        " session: a question with several answers finds them in several sessions; 1 is off.",
    )
    cache_minutes: float = setting(
        30.0, "The same recall again in a session, with nothing written since, is cached."
    )
    sync_min_interval_seconds: float = setting(
        2.0, "Minimum seconds between checks for hand-edited files before a search."
    )
    entity_expansion: bool = setting(
        True,
        "A question naming an entity of the scope's memories by one of its names also asks"
        " for the others ('my cat' and the cat's name).",
    )


class HistorySettings(Section):
    """Session history kept in SQLite and injected into prompts."""

    token_budget: int = setting(4096, "Token budget of injected history.")
    min_messages: int = setting(5, "Inject at least this many messages.")
    max_messages: int = setting(20, "Inject at most this many messages.")
    message_chars: int = setting(500, "Each injected message is cut here.")
    soft_cap: int = setting(200, "Messages kept per scope before trimming.")
    hard_cap: int = setting(300, "Hard cap on messages per scope.")
    hard_cap_bytes: int = setting(10 * 1024 * 1024, "Hard cap on stored message bytes per scope.")
    idle_minutes: int = setting(120, "A session idle this long is closed and extracted.")
    event_log: bool = setting(
        True,
        "Also append every message, tool call and result, failure and memory decision to "
        "the scope's YYYY-MM-DD.jsonl event log (facts only, never rewritten).",
    )


class SnapshotSettings(Section):
    """Layer 1: the per-scope SNAPSHOT.md that can ride in every prompt."""

    enabled: bool = setting(
        False,
        "Put the scope's SNAPSHOT.md in the prompt instead of its top entries (rebuilt in "
        "the daily quiet period and by `chatmem snapshot`).",
    )
    budget_tokens: int = setting(3000, "Token budget of the whole snapshot, 2000 to 4000.")
    identity: str = setting("", "Identity section: who the bot is (~100 tokens).")
    owner: str = setting("", "Owner section: whom it serves (~150 tokens).")
    constraints: str = setting("", "Constraints section: rules it keeps (~100 tokens).")


class ArchiveSettings(Section):
    """Moving old session history into files and summaries."""

    trigger_unarchived: int = setting(100, "Archive when more unarchived messages than this.")
    interval_hours: float = setting(6.0, "Archive at least this often.")
    raw_days: int = setting(5, "Messages this young are copied verbatim.")
    backoff_minutes: list[int] = setting(
        [10, 30, 120, 360, 720], "Retry delays after failed summaries."
    )
    max_attempts: int = setting(5, "After this many failures an archive_backlog event is recorded.")


class ScheduleSettings(Section):
    """In-process schedules of a running bot."""

    quiet_minutes: int = setting(
        20, "Consolidate after this many minutes without messages (daily)."
    )
    active_hours: str = setting(
        "",
        "Local hours the people are active, HH:MM-HH:MM (e.g. 08:00-23:00; may wrap past "
        "midnight): the quiet-period job waits until they are over. Empty: any hour.",
    )
    daily_archive_at: str = setting("04:00", "Local time (HH:MM) of the daily archive job.")


def parse_hours(text: str) -> tuple[time, time] | None:
    """`HH:MM-HH:MM` as (start, end) local times; None when it is not that form."""
    start, sep, end = text.replace(" ", "").partition("-")
    try:
        return (time.fromisoformat(start), time.fromisoformat(end)) if sep else None
    except ValueError:
        return None


def within_hours(hours: str, now: time) -> bool:
    """Whether local `now` falls in `hours` (`HH:MM-HH:MM`, wrapping past midnight when the
    end comes first); never for empty or unreadable hours. The quiet period
    is time without messages outside the active hours."""
    parsed = parse_hours(hours) if hours else None
    if parsed is None:
        return False
    start, end = parsed
    return start <= now < end if start <= end else now >= start or now < end
