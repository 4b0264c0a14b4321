"""Take the question from the input: `question`, or the last human chat message.

Control characters are dropped; an empty or oversized question ends the run with a
message instead of reaching any model.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from app.settings import MAX_QUESTION_CHARS
from graph.state import InputState
from nodes.answer import answered


def clean_question(text: str) -> str:
    printable = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(printable.split())


def take_question(state: InputState) -> dict[str, Any]:
    question = state.get("question") or ""
    if not question.strip():
        humans = [m for m in state.get("messages") or [] if isinstance(m, HumanMessage)]
        question = str(humans[-1].content) if humans else ""
    question = clean_question(str(question))
    if not question:
        return {"question": "", **answered("Please ask a question.")}
    if len(question) > MAX_QUESTION_CHARS:
        return {
            "question": "",
            **answered(
                f"The question is too long ({len(question)} characters; at most "
                f"{MAX_QUESTION_CHARS}). Please ask it more briefly."
            ),
        }
    return {"question": question}
