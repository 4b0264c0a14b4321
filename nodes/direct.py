"""Direct-answer check: single-hop questions cost one LLM call.

The depth estimate is asked first because it is cheap (the question alone); DM_direct,
which reads all w passages, is only asked when the question is shallow enough to be
answered directly at all. Comparisons the QA table's rules decide and family relations
that chain single ones never go direct.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.index.corpus import passage_text
from app.index.store import CorpusIndex
from app.index.title_links import linked_from
from app.llm.gateway import LLMGateway
from app.settings import DIRECT_LINKED_READ, Settings
from graph.state import DeftState
from tools.comparison import RULE, decided_by_rule
from tools.decision import DecisionModel
from tools.decision_log import decide, timed
from tools.evidence import read_within
from tools.question_rules import relation_chain
from tools.reading import answered, read_passages
from tools.relevance import judge_relevance


def check_direct_answer(
    state: DeftState, runtime: Runtime[Settings], *, dm: DecisionModel
) -> dict[str, Any]:
    settings = Settings.of(runtime)
    question = state["question"]
    if not settings.direct_answer or dm.backend("direct") == "off":
        return {"direct": False}  # no direct branch: spend no call on the depth estimate
    chains = settings.rule("relation_chains") and relation_chain(question)
    if settings.rule("direct_answer_extras") and (decided_by_rule(question) or chains):
        # The reader compares dates and values worse in one call than the QA table's
        # rules do (docs/BENCHMARKS.md, deft-direct), and names a link of a family
        # relation's chain (the mother for a grandmother): gather the facts step by step.
        return {
            "direct": False,
            "decisions": [decide("direct", 0, [], 0.0, settings.tau_direct, RULE, 0.0)],
        }
    p_yes, seconds = timed(lambda: dm.p_shallow(question))
    shallow = decide("depth", 0, [], p_yes, settings.tau_shallow, dm.backend("depth"), seconds)
    decisions = [shallow]
    if shallow["outcome"]:
        passages = state.get("question_passages") or []
        signals = state.get("question_retrieval")
        p_yes, seconds = timed(lambda: dm.p_direct(question, passages, signals))
        direct = decide(
            "direct",
            0,
            [p["id"] for p in passages],
            p_yes,
            settings.tau_direct,
            dm.backend("direct"),
            seconds,
        )
        decisions.append(direct)
    return {"direct": decisions[-1]["outcome"] and shallow["outcome"], "decisions": decisions}


def answer_directly(
    state: DeftState,
    runtime: Runtime[Settings],
    *,
    dm: DecisionModel,
    gateway: LLMGateway,
    index: CorpusIndex,
) -> dict[str, Any]:
    """Answer Q in one LLM call from the best sentences of the relevant ones among R_w(Q)
    and of the passages they name by title: a later hop's passage is seldom relevant to Q
    itself."""
    settings = Settings.of(runtime)
    passages = state.get("question_passages") or []
    relevant, decisions = judge_relevance(
        dm, state["question"], passages, settings, 0, whole_question=True
    )
    if settings.rule("direct_answer_extras"):
        texts = [passage_text(p["title"], p["text"]) for p in passages]
        chosen = [i for i, p in enumerate(passages) if p in relevant]
        relevant += [passages[j] for j in linked_from(texts, chosen, DIRECT_LINKED_READ)]
    kept = read_within(dm, index, state["question"], relevant, settings)
    answer = read_passages(gateway, state["question"], kept)
    return {
        **answered(answer),
        "passages": kept,
        "decisions": decisions,
        "answer_passage_ids": [p["id"] for p in kept],
    }
