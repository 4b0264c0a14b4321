"""Graph states. Reducers are explicit: `messages` and `thoughts` append, everything else
replaces."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


class InputState(TypedDict, total=False):
    """What a caller sends: a question, or a chat whose last human turn is the question.
    `gold_passage_ids` is read only by the oracle reader (evaluation)."""

    question: str
    messages: Annotated[list[AnyMessage], add_messages]
    gold_passage_ids: list[int]


class ReadState(InputState, total=False):
    """Retrieve-then-read: the passages fed to the reader and its answer."""

    passages: list[dict[str, Any]]
    answer: str


class IterativeState(ReadState, total=False):
    """Interleaved retrieval and reasoning: one sentence of reasoning per round."""

    thoughts: Annotated[list[str], operator.add]
    rounds: int
