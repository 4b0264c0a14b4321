"""String rules about answers: SQuAD normalisation, cleaning a reader's reply, telling
"no answer" apart, and whole-word matching of normalised text.

`normalize_answer` is the normalisation the answer metrics score with (app/eval imports
it from here) and the one the runtime compares answers and questions with.
"""

from __future__ import annotations

import re
import string

UNKNOWN = "unknown"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_QUOTES = "\"'`*"
_PREFIX = re.compile(r"^(final answer|answer|a)\s*[:\-]\s*", re.IGNORECASE)
_SO_THE_ANSWER = re.compile(r"so the answer is\s*:?\s*(.+)", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and a/an/the, squash white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_words(text: str, phrase: str) -> bool:
    """`phrase` occurs in `text` as whole words, both already normalised to words joined
    by single spaces; an empty phrase occurs nowhere. The one whole-word match that
    `says` and `tools.question_rules.echoes_question` share: they differ only in how they
    normalise (see there)."""
    return bool(phrase) and f" {phrase} " in f" {text} "


def says(text: str, phrase: str) -> bool:
    """`phrase` occurs in `text` as whole words, both SQuAD-normalised. A possessive 's
    stays part of its word ("Schwarzenegger's" is "schwarzeneggers"), unlike in
    `tools.question_rules.echoes_question`."""
    return contains_words(normalize_answer(text), normalize_answer(phrase))


def clean_answer(text: str) -> str:
    """First line of the reply, without an 'Answer:' prefix, quotes or final period."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return UNKNOWN
    answer = _PREFIX.sub("", lines[0]).strip().strip(_QUOTES).strip()
    answer = answer[:-1].strip() if answer.endswith(".") else answer
    return answer.strip(_QUOTES).strip() or UNKNOWN  # a period after the quote: '"X".'


def final_answer_in(thought: str) -> str | None:
    """The answer a reasoning sentence arrives at ("..., so the answer is: X."), cleaned;
    None when it arrives at none (the iterative baseline reasons on)."""
    match = _SO_THE_ANSWER.search(thought)
    return clean_answer(match.group(1)) if match else None


def is_unknown(answer: str) -> bool:
    """Empty, 'unknown', or a refusal: the rule update records no answer."""
    norm = " ".join(answer.lower().strip(" .!\"'").split())
    return (
        not norm
        or norm.startswith(UNKNOWN)
        or norm in {"none", "n/a", "not mentioned", "not stated", "no answer"}
    )
