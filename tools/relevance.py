"""Scoring relevance with the DM: DM_rel over all passages in one batch, one recorded
decision per passage, and the keep rules that choose which passages a step, a direct
answer or the fallback reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.settings import ONE_RELEVANT_KEPT, STEP_FUSION_K, Settings
from tools.decision import DecisionModel
from tools.decision_log import decide, timed
from tools.records import Decision
from tools.retriever import by_score, fused_with_scores


def fused_with_retrieval(scores: Sequence[float]) -> list[int]:
    """Positions of a retrieval ranking, best first by RRF of retrieval rank and DM_rel
    rank (`STEP_FUSION_K`)."""
    return fused_with_scores(range(len(scores)), scores, STEP_FUSION_K)


def keep_relevant(
    passages: Sequence[dict[str, Any]],
    scores: Sequence[float],
    tau: float,
    max_kept: int,
    none_kept: int,
    order: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """How many: those >= tau, at most `max_kept`; one passing -> 2; none -> `none_kept`
    (5 by default, docs/method.md section 1, step 3.5). Which: the first of `order`
    (positions, best first; by default by score)."""
    passing = sum(s >= tau for s in scores)
    if passing == 1:
        count = ONE_RELEVANT_KEPT
    elif not passing:
        count = none_kept
    else:
        count = min(passing, max_kept)
    return [passages[i] for i in list(order or by_score(scores))[:count]]


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
