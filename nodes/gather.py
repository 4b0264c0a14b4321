"""ChainRAG's retrieval: seed sentences for the sub-question, expansion along the
sentence graph until the DM judges the gathered text sufficient (or the caps), then the
gathered sentences reranked by DM relevance and cut to a reading budget."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from langgraph.runtime import Runtime

from app.settings import CHAIN_READ_WORDS, Settings
from graph.state import ChainState
from tools.decision import DecisionModel
from tools.reading import as_passages, best_within
from tools.relevance import score_relevance
from tools.sentence_graph import GraphSentence, SentenceGraph


def gather_sentences(
    state: ChainState, runtime: Runtime[Settings], *, graph: SentenceGraph, dm: DecisionModel
) -> dict[str, Any]:
    settings = Settings.of(runtime)
    question = state["sub_question"]

    def sufficient(q: str, sentences: list[GraphSentence]) -> bool:
        return dm.p_direct(q, as_passages(sentences)) >= settings.tau_direct

    gathered = graph.expand(graph.seed_sentences(question), question, sufficient=sufficient)
    relevance, decisions = score_relevance(
        dm,
        question,
        # Decisions name the sentence judged, not the passage it sits in.
        [{**s.as_passage(), "id": f"sentence {s.id}"} for s in gathered],
        settings,
        state.get("step", 0) + 1,
        stored=False,
    )
    read = best_within(gathered, relevance, CHAIN_READ_WORDS)
    # The step reads its best sentences; CxtInt later reranks everything gathered.
    return {
        "gathered": [asdict(s) for s in read],
        "context": [asdict(s) for s in gathered],
        "decisions": decisions,
    }
