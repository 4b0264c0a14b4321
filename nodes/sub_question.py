"""Write the next self-contained sub-question (LLM_sub), one at a time.

Sub-questions that got no answer are listed to the LLM as forbidden; a sub-question that
repeats an earlier one (after normalisation) is rejected and the LLM is asked once for a
different wording. If that repeats too, the step is spent without a question and the
graph moves on (the hop counter bounds every loop).
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
_LEAD = re.compile(r"^(next question|question|sub-question|q\d*)\s*[:.)-]\s*", re.IGNORECASE)


def clean_sub_question(text: str) -> str:
    """The first line that looks like a question, without labels or list markers."""
    for line in text.strip().splitlines():
        line = _LEAD.sub("", line.strip().lstrip("-*0123456789. ")).strip().strip('"')
        if line:
            return line if line.endswith("?") else f"{line}?"
    return ""


def asked_before(state: DeftState) -> set[str]:
    """Normalised sub-questions that may not be asked again."""
    earlier = [row["sub_question"] for row in state.get("qa_table") or []]
    earlier += state.get("unanswerable") or []
    earlier.append(state["question"])  # the whole question is never a sub-question
    return {normalise_question(q) for q in earlier}


def write_sub_question(state: DeftState, *, gateway: LLMGateway) -> dict[str, Any]:
    messages = load_prompt("write_sub_question").format_messages(
        question=state["question"],
        qa_table=format_qa_table(state.get("qa_table") or []),
        forbidden="\n".join(f"- {q}" for q in state.get("unanswerable") or []) or "(none)",
    )
    seen = asked_before(state)
    sub_question = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    if normalise_question(sub_question) in seen:
        retry = [
            *messages,
            AIMessage(sub_question),
            HumanMessage("That question was already asked. Write a different next question."),
        ]
        sub_question = clean_sub_question(gateway.invoke(retry, max_tokens=SUB_QUESTION_TOKENS))
        if normalise_question(sub_question) in seen:
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
