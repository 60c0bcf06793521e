"""The label a group entry's shown text starts with: "(by Alice) …", "(claim by Bob) …".

Pure, and below storage: the label says who said an entry, it is not what was said, so
the ranking does not ask a turn for its words and the vectors are made of the text after
it (a question naming the person would otherwise find every entry labelled with the
name, closer in meaning than the turns that hold the answer).
"""

from __future__ import annotations

import re

CLAIM_MARK = "(claim by "
"""How a claim's shown text starts: the prompt and the search index both show it."""

_LABEL = re.compile(r"\((?:claim )?by ([^)]*)\) ")


def labelled(content: str, speaker: str, claim: bool) -> str:
    """`content` under its speaker's label: "(by Alice) …", a claim's "(claim by Bob) …"
    (what `label_words` and `without_label` read back)."""
    return f"{CLAIM_MARK if claim else '(by '}{speaker}) {content}"


def is_claim_text(text: str) -> bool:
    """Whether a shown text (a search hit's) is a claim's."""
    return text.startswith(CLAIM_MARK)


def label_words(text: str) -> int:
    """How many words of a shown text are its label ("(by Alice Smith) " → 2, "(claim by
    Bob) " → 2 with "claim"), not what was said: a turn that said the entry's words holds
    none of them."""
    label = _LABEL.match(text)
    if label is None:
        return 0
    return len(label.group(1).split()) + is_claim_text(text)


def without_label(text: str) -> str:
    """What was said: a shown text less its label (any other text as it is)."""
    label = _LABEL.match(text)
    return text if label is None else text[label.end() :]
