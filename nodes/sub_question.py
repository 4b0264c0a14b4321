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
from spacy.lang.en.stop_words import STOP_WORDS

from app.llm import LLMGateway
from app.settings import MAX_QUESTION_COVERAGE, SUB_QUESTION_TOKENS, WRITER_EXAMPLES
from graph.state import DeftState
from prompts import load_prompt
from tools.comparison import missing_dates
from tools.examples import ExampleBank, render_steps
from tools.qa_cache import normalise_question, question_words

_LEAD = re.compile(r"^(next question|question|sub-question|q\d*)\s*[:.)-]\s*", re.IGNORECASE)


def clean_sub_question(text: str) -> str:
    """The first line that looks like a question, without labels or list markers."""
    for line in text.strip().splitlines():
        line = _LEAD.sub("", line.strip().lstrip("-*0123456789. ")).strip().strip('"')
        if line:
            return line if line.endswith("?") else f"{line}?"
    return ""


def render_forbidden(unanswerable: list[str]) -> str:
    if not unanswerable:
        return ""
    listed = "\n".join(f"- {q}" for q in unanswerable)
    return f"These simple questions found no answer; do not ask them again:\n{listed}\n\n"


def content_words(text: str) -> set[str]:
    """Normalised words without stop words or possessive 's (`question_words`)."""
    return set(question_words(text)) - STOP_WORDS


def relation_words(question: str) -> set[str]:
    """The question's content words outside its names (capitalised words after the
    first): what it asks, not whom it asks about."""
    names = " ".join(word for word in question.split()[1:] if word[:1].isupper())
    return content_words(question) - content_words(names) or content_words(question)


def question_coverage(sub_question: str, question: str) -> float:
    """How much of the question the sub-question repeats: the smaller of its share of
    the question's content words and of its relation words. "Who is the father of X?"
    covers half of "Who is the paternal grandfather of X?" and is a fine first step; so
    is "Who is the spouse of Princess Elisabeth, Duchess of Hohenberg?" for her
    father-in-law, although the long name makes up most of the words. A rewording of the
    whole question covers nearly all of both."""
    words = content_words(sub_question)
    shares = [
        len(words & wanted) / len(wanted)
        for wanted in (content_words(question), relation_words(question))
        if wanted
    ]
    return min(shares, default=0.0)


def rejection(sub_question: str, state: DeftState) -> str:
    """Why a sub-question may not be asked (empty: it may). The whole question, reworded,
    is no sub-question; neither is one asked before (answered or not)."""
    if not sub_question:
        return "That is not a question. Write the next question."
    if question_coverage(sub_question, state["question"]) >= MAX_QUESTION_COVERAGE:
        return "That repeats the whole question. Ask for one single fact that helps answer it."
    asked = normalise_question(sub_question)
    for row in state.get("qa_table") or []:
        if normalise_question(row["sub_question"]) == asked:
            # Small writers copy the last step; naming what it found points them onwards.
            return (
                f"That question was already answered: {row['answer']}. Write the next "
                f"simple question the complex question needs, naming {row['answer']}."
            )
    if asked in {normalise_question(q) for q in state.get("unanswerable") or []}:
        return "That question was already asked and found no answer. Ask for a different fact."
    return ""


def write_sub_question(
    state: DeftState, *, gateway: LLMGateway, examples: ExampleBank
) -> dict[str, Any]:
    table = state.get("qa_table") or []
    messages = load_prompt("write_sub_question").format_messages(
        examples=examples.render(state["question"], WRITER_EXAMPLES),
        question=state["question"],
        known=render_steps([(row["sub_question"], row["answer"]) for row in table]),
        forbidden=render_forbidden(state.get("unanswerable") or []),
    )
    sub_question = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    rejected = []
    reason = rejection(sub_question, state)
    if reason:  # one more try, told why (and, for a date comparison, what is missing)
        rejected.append({"sub_question": sub_question, "reason": reason})
        missing = missing_dates(state["question"], table)
        hint = f"{reason} Still unknown: {missing}." if missing else reason
        retry = [*messages, AIMessage(sub_question), HumanMessage(hint)]
        sub_question = clean_sub_question(gateway.invoke(retry, max_tokens=SUB_QUESTION_TOKENS))
        reason = rejection(sub_question, state)
        if reason:
            rejected.append({"sub_question": sub_question, "reason": reason})
            sub_question = ""
    return {
        "sub_question": sub_question,
        "rejected": rejected,
        "hop": state.get("hop", 0) + 1,
        "rewritten_from": "",
        "cache_hit": None,
        "retrieved": [],
        "kept": [],
        "relevant_found": False,
        "expansion": None,
        "sub_answer": "",
    }
