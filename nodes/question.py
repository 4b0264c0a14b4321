"""Take the question of this turn: the last chat message when the caller sent one, else
`question` (which then joins the conversation as a human message).

Control characters are dropped; an empty or oversized question ends the run with a
message instead of reaching any model. What the thread kept from its previous turn is
cleared, all but the conversation.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from app.checks import clean_question
from app.settings import MAX_QUESTION_CHARS
from graph.state import TurnState
from tools.messages import message_text
from tools.reading import answered


def take_question(state: TurnState, *, fresh: dict[str, Any]) -> dict[str, Any]:
    """A chat turn ends with the human message just sent; a `question` run adds it."""
    update = {key: empty for key, empty in fresh.items() if state.get(key)}
    messages = state.get("messages") or []
    if messages and isinstance(messages[-1], HumanMessage):
        question = clean_question(message_text(messages[-1]))
    else:
        question = clean_question(str(state.get("question") or ""))
        if question:
            update["messages"] = [HumanMessage(content=question)]
    if not question:
        return {**update, "question": "", **answered("Please ask a question.")}
    if len(question) > MAX_QUESTION_CHARS:
        return {
            **update,
            "question": "",
            **answered(
                f"The question is too long ({len(question)} characters; at most "
                f"{MAX_QUESTION_CHARS}). Please ask it more briefly."
            ),
        }
    return {**update, "question": question}
