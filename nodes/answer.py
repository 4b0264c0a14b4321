"""Reader nodes: one short-output LLM call, over passages or from the model's memory
(tools/reading.py; how a reply is cleaned: tools/answer_rules.py)."""

from __future__ import annotations

from typing import Any

from app.llm.gateway import LLMGateway
from graph.state import ReadState, StepState
from prompts import load_prompt
from tools.answer_rules import clean_answer
from tools.reading import answered, read_passages


def answer_from_passages(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    return answered(read_passages(gateway, state["question"], state.get("passages") or []))


def answer_sub_question(state: StepState, *, gateway: LLMGateway) -> dict[str, Any]:
    """a_t = LLM_ans(q_t, evidence): the kept passages' selected sentences, which count
    as read."""
    evidence = state.get("evidence") or []
    return {
        "sub_answer": read_passages(gateway, state["sub_question"], evidence),
        "passages": evidence,
    }


def answer_closed_book(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    messages = load_prompt("answer_closed_book").format_messages(question=state["question"])
    return answered(clean_answer(gateway.invoke(messages)))
