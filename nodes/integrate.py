"""ChainRAG's last steps: answer each sub-question from its gathered sentences, then
integrate: AnsInt answers the question from the sub-answers, CxtInt from all gathered
sentences, deduplicated and reranked against the question (docs/method.md section 3)."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from app.llm.gateway import LLMGateway
from app.settings import CHAIN_READ_WORDS, Settings
from graph.state import ChainState, ChainStep
from tools.reading import answer_from_rows, answered, as_passages, best_within, read_passages
from tools.sentence_graph import GraphSentence, SentenceGraph


def answer_chain_step(state: ChainState, *, gateway: LLMGateway) -> dict[str, Any]:
    gathered = state.get("gathered") or []
    passages = as_passages(gathered)
    answer = read_passages(gateway, state["sub_question"], passages) if passages else "unknown"
    row = ChainStep(
        sub_question=state["sub_question"],
        rewritten_from=state.get("rewritten_from") or "",
        answer=answer,
        sentence_ids=[s["id"] for s in gathered],
        passage_ids=[p["id"] for p in passages],
    )
    return {"chain": [row], "passages": passages, "step": state.get("step", 0) + 1}


def route_after_chain_step(
    state: ChainState, runtime: Runtime[Settings]
) -> Literal["rewrite_chain_question", "integrate_answers", "integrate_context"]:
    if state.get("step", 0) < len(state.get("plan") or []):
        return "rewrite_chain_question"
    if Settings.of(runtime).chain_integration == "context":
        return "integrate_context"
    return "integrate_answers"


def integrate_answers(state: ChainState, *, gateway: LLMGateway) -> dict[str, Any]:
    """AnsInt: the final answer from the sub-questions and their answers alone."""
    return answer_from_rows(gateway, state["question"], state.get("chain") or [])


def integrate_context(
    state: ChainState, *, gateway: LLMGateway, graph: SentenceGraph
) -> dict[str, Any]:
    """CxtInt: the final answer from every gathered sentence, once each, ranked by
    similarity to the question as ChainRAG does. (The DM's relevance judges a passage
    against one step; against the whole question it ranks the bridge sentences, which
    share few words with it, too low.)"""
    unique = {s["id"]: s for s in state.get("context") or []}
    sentences = [GraphSentence(**s) for s in unique.values()]
    similarity = graph.similarity(state["question"], [s.id for s in sentences])
    chosen = best_within(sentences, similarity, 2 * CHAIN_READ_WORDS)
    passages = as_passages(chosen)
    answer = read_passages(gateway, state["question"], passages) if passages else "unknown"
    return {
        **answered(answer),
        "passages": passages,
        "answer_passage_ids": [p["id"] for p in passages],
    }
