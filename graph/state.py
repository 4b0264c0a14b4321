"""Graph states. Reducers are explicit: `messages` appends, everything else replaces."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


class InputState(TypedDict, total=False):
    """What a caller sends: a question, or a chat whose last human turn is the question."""

    question: str
    messages: Annotated[list[AnyMessage], add_messages]


class ReadState(InputState, total=False):
    """Retrieve-then-read: the passages fed to the reader and its answer."""

    passages: list[dict[str, Any]]
    answer: str
