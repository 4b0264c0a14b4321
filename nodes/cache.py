"""QA-cache lookup: normalised exact match, else the most similar cached sub-questions
that ask for the same kind of answer in the same words (`may_share_an_answer`), confirmed by
DM_same; a hit reuses the answer with no retrieval and no LLM call."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import StepState
from tools.comparison import RULE
from tools.decision import DecisionModel
from tools.decision_log import decide, timed
from tools.qa_cache import QACache
from tools.question_rules import may_share_an_answer
from tools.records import CacheHit


def lookup_qa_cache(
    state: StepState, runtime: Runtime[Settings], *, cache: QACache | None, dm: DecisionModel
) -> dict[str, Any]:
    settings = Settings.of(runtime)
    sub_question = state["sub_question"]
    if cache is None or not settings.qa_cache:
        return {"cache_hit": None}
    exact = cache.exact(sub_question)
    if exact is not None:
        cache.record_lookup("exact")
        return {
            "cache_hit": CacheHit(
                sub_question=exact.sub_question,
                answer=exact.answer,
                passage_ids=exact.passage_ids,
                how="exact",
            )
        }
    decisions = []
    for candidate in cache.similar(sub_question):
        if may_share_an_answer(sub_question, candidate["sub_question"]):
            p_yes, seconds = timed(lambda c=candidate: dm.p_same(sub_question, c["sub_question"]))
            backend = dm.backend("same")
        else:  # another kind of answer or other words: no DM call, traced as the rule's no
            p_yes, seconds, backend = 0.0, 0.0, RULE
        decision = decide(
            "same",
            state.get("hop", 0),
            [candidate["sub_question"]],
            p_yes,
            settings.tau_same,
            backend,
            seconds,
        )
        decisions.append(decision)
        if decision["outcome"]:
            cache.record_lookup("similar")
            return {"cache_hit": {**candidate, "how": "similar"}, "decisions": decisions}
    cache.record_lookup("miss")
    return {"cache_hit": None, "decisions": decisions}
