"""Typed records that tools make and the graphs' states hold: a passage read, a row of the
QA table, a QA-cache hit, a decision-model judgement and a trace note. They live here,
below the graphs, so that tools can build them without knowing any graph's state
(graph/state.py imports them)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Passage(TypedDict):
    """A passage as retrieved (`score`) or as read in part (`sentences`: the positions
    and texts of the sentences read, `app/index/corpus.py: excerpt`)."""

    id: int
    title: str
    text: str
    score: NotRequired[float]
    sentences: NotRequired[list[list[Any]]]


class Row(TypedDict):
    """One row of the QA table: a self-contained sub-question and its short answer."""

    sub_question: str
    answer: str
    passage_ids: list[int]
    source: str  # retrieved | cache


class CacheHit(TypedDict):
    """A QA-cache entry that answers this step's sub-question, and how it was found."""

    sub_question: str
    answer: str
    passage_ids: list[int]
    how: str  # exact | similar


class Rejection(TypedDict):
    """A candidate sub-question the rules refused, and why."""

    sub_question: str
    reason: str


class Decision(TypedDict):
    """One yes/no judgement of the decision model, kept for the trace."""

    kind: str
    step: int
    inputs: list[Any]
    p_yes: float
    threshold: float
    outcome: bool
    backend: str
    seconds: float  # time the DM took (a batch's time shared by its decisions)


class Note(TypedDict):
    """One line of the trace from a rule that changed the course of a turn (what the
    fallback read for and why it ran, an answer a rule replaced): `kind` names the rule,
    `text` says what it did. The trace prints notes without knowing their kinds."""

    kind: str
    text: str


def note(kind: str, text: str) -> Note:
    return Note(kind=kind, text=text)
