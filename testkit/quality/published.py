"""Published MADial-Bench baselines: the top-ranked memory ids the benchmark's authors
released for several embedding models (`embeddings/` and `data/en/` of their
repository), kept as the top 5 of each dialogue in `bench/data/madial_published.json`
and scored here by the same functions as chatmem's own hits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from testkit.quality.madial import MadialSet
from testkit.quality.metrics import Summary, found_ids, score, summarise

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "bench" / "data" / "madial_published.json"
K = 5


@dataclass(frozen=True, slots=True)
class Baseline:
    language: str
    model: str
    file: str
    top5: tuple[tuple[int, ...], ...]
    """Per dialogue, in the order of the benchmark's dialogue file."""
    stored: dict[str, float]
    """The scores written beside the lists when the file was made."""


def load(path: Path = DEFAULT_PATH) -> list[Baseline]:
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        Baseline(
            language=item["language"],
            model=item["model"],
            file=item["file"],
            top5=tuple(tuple(int(i) for i in row) for row in item["top5"]),
            stored={k: float(item[k]) for k in ("recall@5", "ndcg@5", "frac@5") if k in item},
        )
        for item in data["baselines"]
    ]


def score_baseline(baseline: Baseline, dataset: MadialSet) -> Summary:
    """Scores over the set's dialogues (all of them, or the first `--limit`)."""
    if len(baseline.top5) < len(dataset.dialogues):
        raise ValueError(
            f"{baseline.model}: {len(baseline.top5)} lists for {len(dataset.dialogues)} dialogues"
        )
    scores = [
        score(found_ids(d.relevant, top), len(set(d.relevant)))
        for d, top in zip(dataset.dialogues, baseline.top5, strict=False)
    ]
    return summarise(scores)
