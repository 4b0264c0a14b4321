"""Sentence-graph expansion inside a DeFT step (docs/method.md section 3): when no retrieved
passage passes the relevance threshold, walk the sentence graph from the sub-question's
seed sentences before the step reads, so the reader reads once. Only reached passages
that the DM judges relevant replace what the step keeps: when none is, the step reads its
top retrieved passages. An answer that comes back unknown does not walk again: a second
read found an answer for few such steps and cost a call each (docs/decisions.md, "An
unknown answer"). The rule that triggered it and what was found go into the state and
the stream.
"""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import StepState
from tools.decision import DecisionModel
from tools.reading import as_passages
from tools.relevance import judge_relevance
from tools.sentence_graph import GraphSentence, SentenceGraph


def expansion_reason(state: StepState) -> str:
    """Why this step should expand ('' when it should not). Asked once a step, after its
    relevance filter: nothing loops back to the filter within a step."""
    return (
        "" if state.get("relevant_found") else "no retrieved passage passed the relevance threshold"
    )


def expand_from_graph(
    state: StepState, runtime: Runtime[Settings], *, graph: SentenceGraph, dm: DecisionModel
) -> dict[str, Any]:
    settings = Settings.of(runtime)
    sub_question = state["sub_question"]
    reason = expansion_reason(state)
    seeds = graph.seed_sentences(sub_question)

    def sufficient(question: str, sentences: list[GraphSentence]) -> bool:
        p = dm.p_direct(question, as_passages(sentences))
        return p >= settings.tau_direct

    gathered = graph.expand(seeds, sub_question, sufficient=sufficient)
    reached = as_passages(gathered)
    kept, decisions = (
        judge_relevance(dm, sub_question, reached, settings, state.get("hop", 0))
        if reached
        else ([], [])
    )
    if not any(d["outcome"] for d in decisions):
        kept = []  # nothing relevant reached: keep what the step already has
    expansion = {
        "reason": reason,
        "seeds": [s.text for s in seeds],
        "sentences": len(gathered),
        "hops": max((s.hop for s in gathered), default=0),
        "reached_passage_ids": [p["id"] for p in reached],
        "kept_passage_ids": [p["id"] for p in kept],
    }
    with contextlib.suppress(RuntimeError):  # outside a graph run there is no stream
        get_stream_writer()({"expansion": expansion})
    return {"expansion": expansion, "decisions": decisions, **({"kept": kept} if kept else {})}
