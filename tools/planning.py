"""Planning a decomposition: the whole plan of sub-questions in one LLM call (ChainRAG's
plan prompt), which DeFT's writer and ChainRAG's decomposition both ask for."""

from __future__ import annotations

from app.llm.gateway import LLMGateway
from app.settings import PLAN_TOKENS, WRITER_EXAMPLES
from prompts import load_prompt
from tools.examples import ExampleBank
from tools.question_rules import parse_plan


def plan_sub_questions(question: str, *, gateway: LLMGateway, examples: ExampleBank) -> list[str]:
    """The whole decomposition in one LLM call, "#k" standing for the answer to step k."""
    messages = load_prompt("decompose_question").format_messages(
        examples=examples.render_decompositions(question, WRITER_EXAMPLES), question=question
    )
    return parse_plan(gateway.invoke(messages, max_tokens=PLAN_TOKENS))
