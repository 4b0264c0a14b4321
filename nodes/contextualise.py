"""Chat follow-ups: "and where was she born?" only means something after the turns before
it, while retrieval and every later step need a question that stands alone. With earlier
turns in the thread, the question is rewritten from them (one LLM call)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage

from app.checks import clean_question
from app.llm.gateway import LLMGateway
from app.settings import (
    CHAT_HISTORY_CHARS,
    CHAT_HISTORY_MESSAGES,
    CONTEXTUALISED_QUESTION_TOKENS,
    MAX_QUESTION_CHARS,
)
from graph.state import TurnState
from prompts import load_prompt
from tools.messages import message_text


def has_history(state: TurnState) -> bool:
    """Earlier turns: anything in the conversation before this turn's question."""
    return len(state.get("messages") or []) > 1


def format_history(messages: list[AnyMessage]) -> str:
    """The last turns as `User:` / `Assistant:` lines, each cut to a readable length."""
    lines = []
    for message in messages[-CHAT_HISTORY_MESSAGES:]:
        who = "User" if isinstance(message, HumanMessage) else "Assistant"
        text = " ".join(message_text(message).split())[:CHAT_HISTORY_CHARS]
        lines.append(f"{who}: {text}")
    return "\n".join(lines)


def contextualise_question(state: TurnState, *, gateway: LLMGateway) -> dict[str, Any]:
    question = state["question"]
    messages = load_prompt("contextualise_question").format_messages(
        history=format_history((state.get("messages") or [])[:-1]), question=question
    )
    rewritten = clean_question(gateway.invoke(messages, max_tokens=CONTEXTUALISED_QUESTION_TOKENS))
    if not rewritten or rewritten == question or len(rewritten) > MAX_QUESTION_CHARS:
        return {}
    return {"question": rewritten, "contextualised_from": question}
