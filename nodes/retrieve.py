"""Retrieval nodes: passages for the question, for a reasoning step, or the gold ones."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.index.store import CorpusIndex
from app.settings import ITERATIVE_K, ITERATIVE_MAX_PASSAGES, Settings
from graph.state import DeftState, IterativeState, ReadState, StepState
from tools.retriever import Retriever


def retrieve_for_question(
    state: ReadState, runtime: Runtime[Settings], *, retriever: Retriever
) -> dict[str, Any]:
    k = Settings.of(runtime).top_k
    return {"passages": [p.as_dict() for p in retriever.retrieve(state["question"], k)]}


def retrieve_for_thought(state: IterativeState, *, retriever: Retriever) -> dict[str, Any]:
    """Query with the latest reasoning sentence; add passages not seen yet, up to a cap."""
    passages = list(state.get("passages") or [])
    seen = {p["id"] for p in passages}
    query = (state.get("thoughts") or [state["question"]])[-1]
    for p in retriever.retrieve(query, ITERATIVE_K + len(seen)):
        if len(passages) >= ITERATIVE_MAX_PASSAGES:
            break
        if p.id not in seen:
            passages.append(p.as_dict())
            seen.add(p.id)
    return {"passages": passages}


def gold_passages(state: ReadState, *, index: CorpusIndex) -> dict[str, Any]:
    """The oracle's reading list: exactly the annotated supporting passages."""
    records = index.passages(list(state.get("gold_passage_ids") or []))
    return {
        "passages": [{"id": r.id, "title": r.title, "text": r.text, "score": 1.0} for r in records]
    }


def retrieve_question_passages(
    state: DeftState, runtime: Runtime[Settings], *, retriever: Retriever
) -> dict[str, Any]:
    """R_w(Q): the top-w passages for the whole question, and how surely the search
    found them (which DM_direct reads)."""
    passages, signals = retriever.retrieve_with_signals(state["question"], Settings.of(runtime).w)
    return {"question_passages": [p.as_dict() for p in passages], "question_retrieval": signals}


def retrieve_for_sub_question(
    state: StepState, runtime: Runtime[Settings], *, retriever: Retriever
) -> dict[str, Any]:
    """R_w(q_t): the top-w passages for the current sub-question."""
    w = Settings.of(runtime).w
    return {"retrieved": [p.as_dict() for p in retriever.retrieve(state["sub_question"], w)]}
