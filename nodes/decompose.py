"""ChainRAG's decomposition: the whole plan of sub-questions in one LLM call, written
like the gold decompositions of the most similar training questions ("#k" for the
answer to sub-question k). Rewriting resolves the references later, one step at a time.
"""

from __future__ import annotations

from typing import Any

from app.llm.gateway import LLMGateway
from graph.state import ChainState
from tools.examples import ExampleBank
from tools.planning import plan_sub_questions


def decompose_question(
    state: ChainState, *, gateway: LLMGateway, examples: ExampleBank
) -> dict[str, Any]:
    plan = plan_sub_questions(state["question"], gateway=gateway, examples=examples)
    return {"plan": plan or [state["question"]], "step": 0}
