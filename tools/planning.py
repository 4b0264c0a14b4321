"""Planning sub-questions: the whole plan in one LLM call (ChainRAG's plan prompt), which
DeFT's writer and ChainRAG's decomposition both ask for, and the prompt of DeFT's writer
of the next sub-question, which a step (nodes/sub_question.py) and a comparison's
fan-out (nodes/options.py) both send."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from app.llm.gateway import LLMGateway
from app.settings import PLAN_TOKENS, WRITER_EXAMPLES
from prompts import load_prompt
from tools.examples import ExampleBank, render_steps
from tools.question_rules import hint, parse_plan
from tools.records import Row


def plan_sub_questions(question: str, *, gateway: LLMGateway, examples: ExampleBank) -> list[str]:
    """The whole decomposition in one LLM call, "#k" standing for the answer to step k."""
    messages = load_prompt("decompose_question").format_messages(
        examples=examples.render_decompositions(question, WRITER_EXAMPLES), question=question
    )
    return parse_plan(gateway.invoke(messages, max_tokens=PLAN_TOKENS))


def render_forbidden(unanswerable: Sequence[str]) -> str:
    if not unanswerable:
        return ""
    return hint("forbidden", listed="\n".join(f"- {q}" for q in unanswerable))


def writer_messages(
    question: str, table: Sequence[Row], unanswerable: Sequence[str], examples: ExampleBank
) -> list[BaseMessage]:
    """LLM_sub's prompt: the question, what the QA table knows, and the sub-questions
    that found no answer (forbidden)."""
    return load_prompt("write_sub_question").format_messages(
        examples=examples.render(question, WRITER_EXAMPLES),
        question=question,
        known=render_steps([(row["sub_question"], row["answer"]) for row in table]),
        forbidden=render_forbidden(unanswerable),
    )
