"""Typed records that tools make and the graphs' states hold: a row of the QA table and a
decision-model judgement. They live here, below the graphs, so that tools can build them
without knowing any graph's state (graph/state.py imports them)."""

from __future__ import annotations

from typing import Any, TypedDict


class QARow(TypedDict):
    """One row of the QA table: a self-contained sub-question and its short answer."""

    sub_question: str
    answer: str
    passage_ids: list[int]
    source: str  # retrieved | cache


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
