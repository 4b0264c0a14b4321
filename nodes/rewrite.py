"""ChainRAG's rewriting: put the missing entity back into a sub-question. "#k" becomes
the answer to sub-question k; a pronoun or "this author" left after that is rewritten
by the LLM from the earlier sub-questions and answers (an unanswered one goes along with
a line of the context it found)."""

from __future__ import annotations

from typing import Any

from app.llm.gateway import LLMGateway
from app.settings import SUB_QUESTION_TOKENS
from graph.state import ChainState, ChainStep
from prompts import load_prompt
from tools.answer_rules import is_unknown
from tools.question_rules import (
    clean_sub_question,
    fill_answers,
    has_back_reference,
    needs_answer,
)


def substitute_answers(question: str, chain: list[ChainStep]) -> str:
    """Replace "#k" by the k-th answer where there is one."""
    answers = ["" if is_unknown(row["answer"]) else row["answer"] for row in chain]
    return fill_answers(question, answers)


def known_facts(chain: list[ChainStep], context: list[dict[str, Any]]) -> str:
    lines = []
    for k, row in enumerate(chain, 1):
        if is_unknown(row["answer"]):
            seen = next((s["text"] for s in context if s["id"] in row["sentence_ids"]), "")
            lines.append(f"- #{k}: {row['sub_question']} (no answer found; context: {seen})")
        else:
            lines.append(f"- #{k}: {row['sub_question']} {row['answer']}")
    return "\n".join(lines) or "(none yet)"


def rewrite_chain_question(state: ChainState, *, gateway: LLMGateway) -> dict[str, Any]:
    planned = state["plan"][state.get("step", 0)]
    chain = state.get("chain") or []
    question = substitute_answers(planned, chain)
    if chain and (needs_answer(question) or has_back_reference(question)):
        messages = load_prompt("rewrite_sub_question").format_messages(
            qa_table=known_facts(chain, state.get("context") or []), sub_question=question
        )
        rewritten = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
        if rewritten and not needs_answer(rewritten):
            question = rewritten
    return {
        "sub_question": question,
        "rewritten_from": planned if question != planned else "",
        "gathered": [],
    }
