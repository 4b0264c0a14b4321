"""Write the next self-contained sub-question (LLM_sub), one at a time.

Sub-questions that got no answer are listed to the LLM as forbidden; a sub-question that
repeats an earlier one (after normalisation), or rewords the whole question, is rejected
and the LLM is asked once more, told why. If that fails too, the step is spent without
a question and the graph moves on (the hop counter bounds every loop).
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from app.llm import LLMGateway
from graph.state import DeftState
from prompts import format_qa_table, load_prompt
from tools.qa_cache import normalise_question

SUB_QUESTION_TOKENS = 48
# A sub-question sharing this much of its words with the question is the question again.
MAX_OVERLAP_WITH_QUESTION = 0.6
_LEAD = re.compile(r"^(next question|question|sub-question|q\d*)\s*[:.)-]\s*", re.IGNORECASE)


def clean_sub_question(text: str) -> str:
    """The first line that looks like a question, without labels or list markers."""
    for line in text.strip().splitlines():
        line = _LEAD.sub("", line.strip().lstrip("-*0123456789. ")).strip().strip('"')
        if line:
            return line if line.endswith("?") else f"{line}?"
    return ""


def _words(text: str) -> set[str]:
    return set(normalise_question(text).split())


def overlap(first: str, second: str) -> float:
    """Jaccard overlap of the normalised word sets."""
    a, b = _words(first), _words(second)
    return len(a & b) / len(a | b) if a and b else 0.0


def rejection(sub_question: str, state: DeftState) -> str:
    """Why a sub-question may not be asked (empty: it may). The whole question, reworded,
    is no sub-question; neither is one asked before (answered or not)."""
    if not sub_question:
        return "That is not a question. Write the next question."
    if overlap(sub_question, state["question"]) >= MAX_OVERLAP_WITH_QUESTION:
        return "That repeats the whole question. Ask for one single fact that helps answer it."
    earlier = [row["sub_question"] for row in state.get("qa_table") or []]
    earlier += state.get("unanswerable") or []
    if normalise_question(sub_question) in {normalise_question(q) for q in earlier}:
        return "That question was already asked. Write a different next question."
    return ""


def write_sub_question(state: DeftState, *, gateway: LLMGateway) -> dict[str, Any]:
    messages = load_prompt("write_sub_question").format_messages(
        question=state["question"],
        qa_table=format_qa_table(state.get("qa_table") or []),
        forbidden="\n".join(f"- {q}" for q in state.get("unanswerable") or []) or "(none)",
    )
    sub_question = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    reason = rejection(sub_question, state)
    if reason:  # one more try, told why
        retry = [*messages, AIMessage(sub_question), HumanMessage(reason)]
        sub_question = clean_sub_question(gateway.invoke(retry, max_tokens=SUB_QUESTION_TOKENS))
        if rejection(sub_question, state):
            sub_question = ""
    return {
        "sub_question": sub_question,
        "hop": state.get("hop", 0) + 1,
        "rewritten_from": "",
        "cache_hit": None,
        "retrieved": [],
        "kept": [],
        "sub_answer": "",
    }
