"""Write memory_core/base/data/compounds_en.txt: English closed compounds whose two parts
are words of their own ("roadtrip" = road + trip), so the tokenizer can join the parts
when a text writes them apart ("road trip") and both spellings share a term.

    python scripts/make_compounds.py WORDFREQ_WHEEL MSGPACK_DIR

The candidates come from the English frequency list of the `wordfreq` package (3.1.1;
its data CC BY-SA 4.0, by Robyn Speer and contributors), read from its wheel without
installing it (`pip download wordfreq --no-deps`); `msgpack` must be importable from
MSGPACK_DIR (an unpacked msgpack wheel will do). A word is kept when it is among the
100 000 most frequent, is no stopword, and splits into a first part of at least three
letters that is no stopword and a second part of at least three that is no stopword
and no suffix (or a particle: "checkup", "login", "workout"), both among the 15 000 most frequent words. The list holds
false compounds too ("carpet" = car + pet): they only add a term where the two words
stand side by side, which costs a term and nothing else. `EXTRA` adds a few compounds
common in chat that the frequency cut leaves out.
"""

from __future__ import annotations

import gzip
import sys
import zipfile
from pathlib import Path

WORDS = 100_000
PARTS = 15_000
PARTICLES = frozenset({"up", "in", "on", "out", "off", "over", "down", "back", "away"})
"""The stopwords a compound may end with ("checkup", "login", "workout")."""
SUFFIXES = frozenset(
    [
        "ing",
        "ings",
        "ed",
        "er",
        "ers",
        "ness",
        "less",
        "ion",
        "ions",
        "ent",
        "ents",
        "ly",
        "est",
        "ive",
        "ives",
        "ate",
        "ates",
        "ated",
        "ism",
        "isms",
        "ist",
        "ists",
        "ity",
        "al",
        "als",
        "ian",
        "ians",
        "ans",
        "ment",
        "ments",
        "able",
        "ful",
        "ward",
        "wards",
        "ant",
        "ants",
        "ous",
        "ish",
        "ise",
        "ize",
        "ized",
        "ies",
        "ier",
        "age",
        "ages",
        "led",
        "ling",
        "lings",
        "let",
        "lets",
        "ter",
        "ters",
        "son",
        "sons",
        "ton",
        "tons",
        "man",
        "men",
    ]
)
EXTRA = (
    "self care",
    "well being",
    "baby sitter",
    "baby sitting",
    "e mail",
    "book club",
    "ice cream",
    "road trip",
    "play date",
    "day care",
    "health care",
    "skin care",
    "sleep over",
)
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "memory_core" / "base" / "data" / "compounds_en.txt"
HEADER = """\
# English closed compounds whose parts are words, one split a line ("road trip" for
# roadtrip): the tokenizer adds the closed form when a text writes the two parts side
# by side (memory_core/base/compounds.py). Made by scripts/make_compounds.py from the
# English word frequencies of wordfreq 3.1.1 (Robyn Speer and contributors; data
# CC BY-SA 4.0), plus a few by hand. As a work derived from that data, this file
# alone is licensed CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/);
# the rest of the project is MIT. A blank line ends this header.

"""


def ranked_words(wheel: Path) -> dict[str, int]:
    import msgpack  # type: ignore[import-not-found]

    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read("wordfreq/data/large_en.msgpack.gz")
    bins = msgpack.unpackb(gzip.decompress(raw), raw=False)[1:]
    rank: dict[str, int] = {}
    for word in (w for group in bins for w in group):
        if word.isascii() and word.isalpha() and word.islower():
            rank.setdefault(word, len(rank))
    return rank


def compounds(rank: dict[str, int], stop: frozenset[str]) -> list[str]:
    """Every split of every kept word, as "first second"."""
    parts = {w for w, r in rank.items() if r < PARTS}
    found = set(EXTRA)
    for word, r in rank.items():
        if r >= WORDS or len(word) < 5 or word in stop:
            continue
        for cut in range(3, len(word) - 1):
            first, second = word[:cut], word[cut:]
            if (
                first in parts
                and second in parts
                and first not in stop
                and second not in SUFFIXES
                and (second in PARTICLES or (len(second) >= 3 and second not in stop))
            ):
                found.add(f"{first} {second}")
    return sorted(found)


def main() -> None:
    wheel, msgpack_dir = Path(sys.argv[1]), sys.argv[2]
    sys.path.insert(0, msgpack_dir)
    stop_file = ROOT / "memory_core" / "base" / "data" / "stopwords_en.txt"
    stop = frozenset(
        line.strip()
        for line in stop_file.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    )
    words = compounds(ranked_words(wheel), stop)
    OUT.write_text(HEADER + "\n".join(words) + "\n", encoding="utf-8")
    print(f"{len(words)} splits -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
