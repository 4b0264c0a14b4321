"""The DeFT graph end to end with the real embedded model on the sample corpus: through
sub-questions and the QA table, the QA cache across questions, and bad input."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from app.settings import Settings
from graph.deft import HOP, build_deft
from graph.resources import Resources
from tests.conftest import DEMO_QUESTION
from tools.question_rules import has_back_reference

pytestmark = pytest.mark.e2e  # the real chat model, servers or the installed CLI


@pytest.fixture(scope="module")
def resources(settings: Settings, sample_index: str):
    res = Resources.open(settings, sample_index)
    res.qa_cache.clear()
    yield res
    res.close()


def test_two_hop_question_through_sub_questions(resources: Resources, settings: Settings) -> None:
    # No direct answer: the run must build the chain one self-contained sub-question at a time.
    context = settings.with_overrides(direct_answer=False)
    graph = build_deft(resources)
    events = steps(
        graph.stream(
            {"question": DEMO_QUESTION},
            context=context,
            stream_mode=["updates", "custom"],
            subgraphs=True,
        )
    )
    nodes = [node for mode, chunk in events if mode == "updates" for node in chunk]
    custom = [chunk for mode, chunk in events if mode == "custom"]
    streamed = [chunk["decision"] for chunk in custom if "decision" in chunk]
    expansions = [u["expansion"] for u in updates_of(events) if u.get("expansion")]
    assert len([c for c in custom if "expansion" in c]) == len(expansions)
    updates = [u or {} for mode, chunk in events if mode == "updates" for u in chunk.values()]
    sub_questions = [u["sub_question"] for u in updates if u.get("sub_question")]
    rows = [row for u in updates for row in u.get("qa_table", [])]
    answer = next(u["answer"] for u in reversed(updates) if u.get("answer"))
    assert "write_sub_question" in nodes and "answer_sub_question" in nodes
    assert nodes[-2] in {"answer_from_qa_table", "fallback_answer"} and nodes[-1] == "reply"
    assert sub_questions and not any(has_back_reference(q) for q in sub_questions)
    assert rows and all(row["passage_ids"] for row in rows)
    assert {d["kind"] for d in streamed} >= {"rel", "suff"}
    assert "ulden" in answer.lower()

    # The same question again: its sub-questions come from the shared QA cache, so fewer
    # sub-questions are retrieved for and read.
    stream = graph.stream(
        {"question": DEMO_QUESTION}, context=context, stream_mode=["updates"], subgraphs=True
    )
    cached = [chunk for _, chunk in steps(stream)]
    cached_nodes = [node for chunk in cached for node in chunk]
    assert "lookup_qa_cache" in cached_nodes
    hits = [u["cache_hit"] for chunk in cached for u in chunk.values() if u and u.get("cache_hit")]
    assert hits and hits[0]["how"] == "exact"
    assert cached_nodes.count("answer_sub_question") < nodes.count("answer_sub_question")
    assert resources.qa_cache.stats()["hits"] >= 1


def test_bad_input_ends_gracefully(resources: Resources, settings: Settings) -> None:
    graph = build_deft(resources)
    before = resources.gateway.meter.snapshot()["llm_calls"]
    assert graph.invoke({"question": "   "}, context=settings)["answer"] == (
        "Please ask a question."
    )
    assert "too long" in graph.invoke({"question": "x" * 100_000}, context=settings)["answer"]
    assert graph.invoke({"messages": []}, context=settings)["answer"] == "Please ask a question."
    assert resources.gateway.meter.snapshot()["llm_calls"] == before  # no model was asked


def test_decision_model_as_a_langchain_tool(resources: Resources) -> None:
    tool = resources.dm.as_tool()
    assert tool.name == "decide_same_information"
    same = tool.invoke(
        {
            "first": "Who founded Velloway Ironworks?",
            "second": "Who was the founder of Velloway Ironworks?",
        }
    )
    different = tool.invoke(
        {"first": "Who founded Velloway Ironworks?", "second": "Where was Odile Farrengast born?"}
    )
    assert 0.0 <= different < 0.5 < same <= 1.0


def steps(stream: Iterable[tuple[tuple[str, ...], str, Any]]) -> list[tuple[str, Any]]:
    """A stream of the graph and its hop subgraph as (mode, chunk): each step of a hop,
    not the hop's own update, which hands the whole QA table back to the turn."""
    return [
        (mode, chunk)
        for namespace, mode, chunk in stream
        if namespace or mode != "updates" or HOP not in chunk
    ]


def updates_of(events: list) -> list[dict]:
    return [u or {} for mode, chunk in events if mode == "updates" for u in chunk.values()]
