"""Relevance filter: DM_rel over all retrieved passages in one batch, then the keep rules
(tools/relevance.py)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import StepState
from tools.decision import DecisionModel
from tools.relevance import fused_with_retrieval, keep_relevant, score_relevance


def filter_relevant(
    state: StepState, runtime: Runtime[Settings], *, dm: DecisionModel
) -> dict[str, Any]:
    """Keep as many of R_w(q_t) as the keep rules allow, chosen by DM_rel fused with the
    retrieval rank: DM_rel alone misranks gold passages for model-written sub-questions."""
    settings, retrieved = Settings.of(runtime), state.get("retrieved") or []
    scores, decisions = score_relevance(
        dm, state["sub_question"], retrieved, settings, state.get("hop", 0)
    )
    kept = keep_relevant(
        retrieved,
        scores,
        settings.tau_rel,
        settings.max_kept,
        settings.none_kept,
        fused_with_retrieval(scores) if settings.rule("evidence_selection") else None,
    )
    relevant_found = any(d["outcome"] for d in decisions)
    return {"kept": kept, "decisions": decisions, "relevant_found": relevant_found}
