"""Relevance filter: DM_rel over all retrieved passages in one batch, then the keep rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from app.settings import ONE_RELEVANT_KEPT, Settings
from graph.state import Decision, DeftState
from nodes.decisions import decide, timed
from tools.decision import DecisionModel


def keep_relevant(
    passages: Sequence[dict[str, Any]],
    scores: Sequence[float],
    tau: float,
    max_kept: int,
    none_kept: int,
) -> list[dict[str, Any]]:
    """Those >= tau, best first, at most `max_kept`; one passing -> the top 2; none ->
    the top `none_kept` (5 by default, docs/method.md section 1, step 3.5)."""
    ranked = sorted(zip(scores, range(len(passages)), strict=True), key=lambda t: (-t[0], t[1]))
    passing = [i for s, i in ranked if s >= tau]
    if len(passing) == 1:
        chosen = [i for _, i in ranked[:ONE_RELEVANT_KEPT]]
    elif not passing:
        chosen = [i for _, i in ranked[:none_kept]]
    else:
        chosen = passing[:max_kept]
    return [passages[i] for i in chosen]


def keep_for_fallback(
    passages: Sequence[dict[str, Any]], scores: Sequence[float], tau: float, head: int, extra: int
) -> list[dict[str, Any]]:
    """The retrieval top `head`, then at most `extra` lower-ranked passages that pass tau,
    best first: retrieval's head keeps MuSiQue's first hops better than DM_rel's top 5
    does, and the whole-question DM_rel picks out bridge passages ranked lower; together
    they keep the most gold passages of the policies measured on 2WikiMultihopQA and
    HotpotQA, and on MuSiQue all but the retrieval top 8, which reads 180 more words
    (docs/decisions.md, "Which of the fallback's 20 passages to read")."""
    top = list(passages[:head])
    lower = sorted(
        ((s, i) for i, s in enumerate(scores) if i >= head and s >= tau), key=lambda t: -t[0]
    )
    return top + [passages[i] for _, i in lower[:extra]]


def score_relevance(
    dm: DecisionModel,
    question: str,
    passages: Sequence[dict[str, Any]],
    settings: Settings,
    step: int,
    *,
    stored: bool = True,
    whole_question: bool = False,
) -> tuple[list[float], list[Decision]]:
    """Score every passage in one batch and record one decision per passage (`stored`,
    `whole_question`: as `DecisionModel.p_rel`)."""
    scores, seconds = timed(
        lambda: dm.p_rel(question, passages, stored=stored, whole_question=whole_question)
    )
    share = seconds / max(1, len(passages))
    decisions = [
        decide("rel", step, [p["id"]], s, settings.tau_rel, dm.backend("rel"), share)
        for p, s in zip(passages, scores, strict=True)
    ]
    return scores, decisions


def judge_relevance(
    dm: DecisionModel,
    question: str,
    passages: Sequence[dict[str, Any]],
    settings: Settings,
    step: int,
    *,
    whole_question: bool = False,
) -> tuple[list[dict[str, Any]], list[Decision]]:
    """Score every passage and apply the loop's keep rules."""
    scores, decisions = score_relevance(
        dm, question, passages, settings, step, whole_question=whole_question
    )
    kept = keep_relevant(passages, scores, settings.tau_rel, settings.max_kept, settings.none_kept)
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
