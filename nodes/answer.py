"""Reader nodes: one short-output LLM call, over passages or from the model's memory."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from app.llm.gateway import LLMGateway
from graph.state import DeftState, ReadState
from prompts import format_passages, load_prompt, reply_form
from tools.qa_cache import question_words

UNKNOWN = "unknown"
_QUOTES = "\"'`*"
_PREFIX = re.compile(r"^(final answer|answer|a)\s*[:\-]\s*", re.IGNORECASE)


def clean_answer(text: str) -> str:
    """First line of the reply, without an 'Answer:' prefix, quotes or final period."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return UNKNOWN
    answer = _PREFIX.sub("", lines[0]).strip().strip(_QUOTES).strip()
    answer = answer[:-1].strip() if answer.endswith(".") else answer
    return answer.strip(_QUOTES).strip() or UNKNOWN  # a period after the quote: '"X".'


def is_unknown(answer: str) -> bool:
    """Empty, 'unknown', or a refusal: the rule update records no answer."""
    norm = " ".join(answer.lower().strip(" .!\"'").split())
    return (
        not norm
        or norm.startswith(UNKNOWN)
        or norm in {"none", "n/a", "not mentioned", "not stated", "no answer"}
    )


def echoes_question(question: str, answer: str) -> bool:
    """An answer that only repeats a name from its own question ("In which town is Brisk
    Hollow?" -> "Brisk Hollow"; "Who was Arnold Schwarzenegger's wife?" -> "Arnold
    Schwarzenegger") adds nothing. Choice questions ("A or B?") are exempt: there the
    answer is one of the names by design."""
    norm_answer = " ".join(question_words(answer))
    norm_question = " ".join(question_words(question))
    if not norm_answer or " or " in f" {norm_question} ":
        return False
    return f" {norm_answer} " in f" {norm_question} "


def answered(answer: str) -> dict[str, Any]:
    """The state update that finishes a run (the `reply` node turns it into a message)."""
    return {"answer": answer}


def read_passages(gateway: LLMGateway, question: str, passages: Sequence[dict[str, Any]]) -> str:
    """LLM_ans: a short answer (or "unknown") to a question from the given passages."""
    messages = load_prompt("answer_from_passages").format_messages(
        passages=format_passages(passages), question=question, reply_form=reply_form(question)
    )
    return clean_answer(gateway.invoke(messages))


def answer_from_passages(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    return answered(read_passages(gateway, state["question"], state.get("passages") or []))


def answer_sub_question(state: DeftState, *, gateway: LLMGateway) -> dict[str, Any]:
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
