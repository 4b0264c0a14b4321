"""Iterative baseline: write the next reasoning sentence; read the answer off the chain."""

from __future__ import annotations

from typing import Any

from app.llm.gateway import LLMGateway
from app.settings import REASON_STEP_TOKENS
from graph.state import IterativeState
from prompts import format_passages, load_prompt
from tools.answer_rules import final_answer_in
from tools.reading import answered


def reason_step(state: IterativeState, *, gateway: LLMGateway) -> dict[str, Any]:
    thoughts = state.get("thoughts") or []
    messages = load_prompt("reason_step").format_messages(
        passages=format_passages(state.get("passages") or []),
        question=state["question"],
        thoughts="\n".join(thoughts) or "(none yet)",
    )
    reply = gateway.invoke(messages, max_tokens=REASON_STEP_TOKENS)
    sentence = " ".join(reply.split()) or "(no step)"
    return {"thoughts": [sentence], "rounds": state.get("rounds", 0) + 1}


def answer_from_thoughts(state: IterativeState) -> dict[str, Any]:
    """The answer the chain arrived at; no model call."""
    return answered(final_answer_in((state.get("thoughts") or [""])[-1]) or "unknown")
