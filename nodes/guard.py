"""Self-containedness guard (from ChainRAG): a sub-question that still points back
("he", "the author", "that city") is rewritten with the QA table so the entity is named."""

from __future__ import annotations

from typing import Any

from app.llm.gateway import LLMGateway
from app.settings import SUB_QUESTION_TOKENS
from graph.state import StepState
from prompts import format_qa_table, load_prompt
from tools.question_rules import clean_sub_question, has_back_reference


def guard_self_contained(state: StepState, *, gateway: LLMGateway) -> dict[str, Any]:
    sub_question = state.get("sub_question") or ""
    table = state.get("qa_table") or []
    if not sub_question or not table or not has_back_reference(sub_question):
        return {}
    messages = load_prompt("rewrite_sub_question").format_messages(
        qa_table=format_qa_table(table), sub_question=sub_question
    )
    rewritten = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    if not rewritten or rewritten == sub_question:
        return {}
    return {"sub_question": rewritten, "rewritten_from": sub_question}
