"""Where a question and its evidence are tokenized apart: the Chinese labelled sets and
MADial-zh, each question against each of its evidence texts.

    python bench/segmentation_probe.py [--madial DIR]

For every question term (a word of Han characters) the evidence lacks, it says which
kind of miss it is: the evidence holds the word's characters in a row but another
segmentation ("split"), holds the reduplicated or the single form (妈妈 / 妈), holds all
its characters apart (种花 / 种了花), or some of them as terms; and the same for
evidence terms the question lacks. Run it after a change to the tokenizer's Chinese
rules: the "split" lines should stay empty (search mode gives the sub-words of the
longer word on either side).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_core.base.text import tokenize
from testkit.quality import labelled, madial

DATA = Path(__file__).resolve().parent / "data"
_HAN = re.compile(r"[\u4e00-\u9fff]")


def pairs(madial_dir: Path) -> list[tuple[str, str]]:
    """(question, evidence text) of the zh labelled sets and MADial-zh."""
    out: list[tuple[str, str]] = []
    for part in ("zh-a", "zh-b"):
        data = labelled.load_set(DATA / f"recall_{part}.json")
        for conv in data.conversations:
            out += [(q.question, e) for q in conv.questions for e in conv.evidence_texts(q)]
    if (madial_dir / "zh").is_dir():
        data_set = madial.load_set(madial_dir, "zh")
        memories = {m.id: m.text for m in data_set.memories}
        for dialogue in data_set.dialogues:
            pending, _ = dialogue.query()
            out += [(pending, memories[i]) for i in dialogue.relevant if i in memories]
    return out


def kind_of(term: str, other_terms: set[str], other_text: str) -> str:
    if len(term) >= 2 and term in other_text:
        return "split: the characters in a row, other terms"
    if len(term) == 2 and term[0] == term[1] and term[0] in other_terms:
        return "reduplicated: the single form there"
    if len(term) == 1 and term * 2 in other_terms:
        return "single: the reduplicated form there"
    if len(term) >= 2 and all(ch in other_text for ch in term):
        return "apart: every character there, not in a row"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--madial", type=Path, default=madial.DEFAULT_DIR, metavar="DIR")
    args = parser.parse_args()
    found = pairs(args.madial)
    counts: dict[str, Counter[str]] = {"question": Counter(), "evidence": Counter()}
    examples: dict[tuple[str, str], list[str]] = {}
    for question, evidence in found:
        asked, held = set(tokenize(question)), set(tokenize(evidence))
        for side, terms, others, text in (
            ("question", asked, held, evidence),
            ("evidence", held, asked, question),
        ):
            for term in terms - others:
                if _HAN.search(term):
                    kind = kind_of(term, others, text)
                    counts[side][kind] += 1
                    examples.setdefault((side, kind), []).append(term)
    print(f"{len(found)} question/evidence pairs")
    for side, by_kind in counts.items():
        print(f"{side} terms the other side lacks:")
        for kind, number in by_kind.most_common():
            shown = " ".join(examples[side, kind][:8]) if not kind.startswith("other") else ""
            print(f"  {number:5d}  {kind}  {shown}")


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("segmentation_probe"):
        main()
