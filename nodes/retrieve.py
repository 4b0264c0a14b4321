"""Retrieval nodes: top-k passages for the question."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import ReadState
from tools.retriever import Retriever


def retrieve_for_question(state: ReadState, runtime: Runtime[Settings], *,
                          retriever: Retriever) -> dict[str, Any]:
    k = runtime.context.top_k if runtime.context else 5
    passages = retriever.retrieve(state["question"], k)
    return {"passages": [p.as_dict() for p in passages]}
