"""Self-containedness guard (from ChainRAG): a sub-question that still points back
("he", "the author", "that city") is rewritten with the QA table so the entity is named."""

from __future__ import annotations

import re
from typing import Any

from app.llm import LLMGateway
from app.settings import SUB_QUESTION_TOKENS
from graph.state import DeftState
from nodes.sub_question import clean_sub_question
from prompts import format_qa_table, load_prompt

_PRONOUN = r"\b(he|she|it|they|him|her|his|hers|its|their|theirs|them)\b"
_POINTER = (
    r"\b(this|that|these|those|the same|said)\s+(author|writer|person|man|woman|"
    r"city|town|country|company|film|movie|band|album|book|novel|song|team|place|"
    r"university|college|school|river|state|show|series|director|singer|actor|"
    r"actress|player|artist|group|organization|organisation|entity|one)\b"
)
_DESCRIPTION = r"\bthe (above|aforementioned|previous|former|latter)\b"
BACK_REFERENCE = re.compile(f"{_PRONOUN}|{_POINTER}|{_DESCRIPTION}", re.IGNORECASE)


def has_back_reference(sub_question: str) -> bool:
    return bool(BACK_REFERENCE.search(sub_question))


def guard_self_contained(state: DeftState, *, gateway: LLMGateway) -> dict[str, Any]:
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
