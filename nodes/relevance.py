"""Relevance filter: DM_rel over all retrieved passages in one batch, then the keep rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import Decision, DeftState
from nodes.decisions import decide, timed
from tools.decision import DecisionModel

FEW_RELEVANT_KEEP = 2  # exactly one passage passes: keep the top 2
NONE_RELEVANT_KEEP = 5  # none passes: keep the top 5


def keep_relevant(
    passages: Sequence[dict[str, Any]], scores: Sequence[float], tau: float, max_kept: int
) -> list[dict[str, Any]]:
    """Those >= tau, best first, at most `max_kept`; one passing -> top 2; none -> top 5."""
    ranked = sorted(zip(scores, range(len(passages)), strict=True), key=lambda t: (-t[0], t[1]))
    passing = [i for s, i in ranked if s >= tau]
    if len(passing) == 1:
        chosen = [i for _, i in ranked[:FEW_RELEVANT_KEEP]]
    elif not passing:
        chosen = [i for _, i in ranked[:NONE_RELEVANT_KEEP]]
    else:
        chosen = passing[:max_kept]
    return [passages[i] for i in chosen]


def judge_relevance(
    dm: DecisionModel,
    question: str,
    passages: Sequence[dict[str, Any]],
    settings: Settings,
    step: int,
) -> tuple[list[dict[str, Any]], list[Decision]]:
    """Score every passage, apply the keep rules, and record one decision per passage."""
    scores, seconds = timed(lambda: dm.p_rel(question, passages))
    kept = keep_relevant(passages, scores, settings.tau_rel, settings.max_kept)
    share = seconds / max(1, len(passages))
    decisions = [
        decide("rel", step, [p["id"]], s, settings.tau_rel, dm.backend("rel"), share)
        for p, s in zip(passages, scores, strict=True)
    ]
    return kept, decisions


def filter_relevant(
    state: DeftState, runtime: Runtime[Settings], *, dm: DecisionModel
) -> dict[str, Any]:
    kept, decisions = judge_relevance(
        dm,
        state["sub_question"],
        state.get("retrieved") or [],
        Settings.of(runtime),
        state.get("hop", 0),
    )
    relevant_found = any(d["outcome"] for d in decisions)
    return {"kept": kept, "decisions": decisions, "relevant_found": relevant_found}
