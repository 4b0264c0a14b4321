"""ChainRAG's decomposition: the whole plan of sub-questions in one LLM call, written
like the gold decompositions of the most similar training questions ("#k" for the
answer to sub-question k). Rewriting resolves the references later, one step at a time.
"""

from __future__ import annotations

import re
from typing import Any

from app.llm import LLMGateway
from app.settings import CHAIN_MAX_SUB_QUESTIONS, PLAN_TOKENS, WRITER_EXAMPLES
from graph.state import ChainState
from nodes.sub_question import clean_sub_question
from prompts import load_prompt
from tools.examples import ExampleBank

_NUMBERED = re.compile(r"^\s*\d+\s*[.)]\s*(.+)$")


def parse_plan(text: str) -> list[str]:
    """Numbered lines as sub-questions, in order, without repeats, at most the cap."""
    plan: list[str] = []
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match:
            question = clean_sub_question(match.group(1))
            if question and question not in plan:
                plan.append(question)
    return plan[:CHAIN_MAX_SUB_QUESTIONS]


def decompose_question(
    state: ChainState, *, gateway: LLMGateway, examples: ExampleBank
) -> dict[str, Any]:
    messages = load_prompt("decompose_question").format_messages(
        examples=examples.render_decompositions(state["question"], WRITER_EXAMPLES),
        question=state["question"],
    )
    plan = parse_plan(gateway.invoke(messages, max_tokens=PLAN_TOKENS))
    return {"plan": plan or [state["question"]], "step": 0}
