"""Reader nodes: one short-output LLM call, over passages or from the model's memory."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage

from app.llm import LLMGateway
from graph.state import ReadState
from prompts import load_prompt

UNKNOWN = "unknown"
_PREFIX = re.compile(r"^(final answer|answer|a)\s*[:\-]\s*", re.IGNORECASE)


def format_passages(passages: Sequence[dict[str, Any]]) -> str:
    return "\n".join(f"[{i}] {p['title']}: {p['text']}" for i, p in enumerate(passages, 1))


def clean_answer(text: str) -> str:
    """First line of the reply, without an 'Answer:' prefix, quotes or final period."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return UNKNOWN
    answer = _PREFIX.sub("", lines[0]).strip().strip("\"'`*").strip()
    answer = answer[:-1].strip() if answer.endswith(".") else answer
    return answer or UNKNOWN


def answered(answer: str) -> dict[str, Any]:
    """The state update that finishes a run: the answer, also as an AI chat message."""
    return {"answer": answer, "messages": [AIMessage(content=answer)]}


def answer_from_passages(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    messages = load_prompt("answer_from_passages").format_messages(
        passages=format_passages(state.get("passages") or []), question=state["question"]
    )
    return answered(clean_answer(gateway.invoke(messages)))


def answer_closed_book(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    messages = load_prompt("answer_closed_book").format_messages(question=state["question"])
    return answered(clean_answer(gateway.invoke(messages)))
