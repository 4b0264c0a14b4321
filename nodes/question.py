"""Take the question from the input: `question`, or the last human chat message."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from graph.state import InputState


def take_question(state: InputState) -> dict[str, Any]:
    question = (state.get("question") or "").strip()
    if not question:
        humans = [m for m in state.get("messages") or [] if isinstance(m, HumanMessage)]
        question = str(humans[-1].content).strip() if humans else ""
    return {"question": question}
