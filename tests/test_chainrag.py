"""The ChainRAG graph: plan parsing, rewriting of "#k" references, routing, and an
end-to-end run on the sample corpus with the real embedded model."""

from __future__ import annotations

import re

import pytest
from stubs import Runtime

from app.settings import Settings
from graph.chainrag import build_chainrag
from graph.resources import Resources
from graph.state import ChainStep
from nodes.integrate import route_after_chain_step
from nodes.rewrite import known_facts, substitute_answers
from tests.conftest import DEMO_QUESTION
from tools.question_rules import parse_plan


def _row(question: str, answer: str, sentence_ids: list[int] | None = None) -> ChainStep:
    return ChainStep(
        sub_question=question,
        rewritten_from="",
        answer=answer,
        sentence_ids=sentence_ids or [],
        passage_ids=[],
    )


def test_plans_are_parsed_from_numbered_lines() -> None:
    text = "1. Who wrote Dune?\n2) Where was #1 born\nnoise\n3. Who wrote Dune?\n4. a\n5. b\n6. c"
    assert parse_plan(text) == ["Who wrote Dune?", "Where was #1 born?", "a?", "b?"]
    assert parse_plan("no list here") == []


def test_references_are_filled_with_earlier_answers() -> None:
    chain = [_row("Who wrote Dune?", "Frank Herbert"), _row("Which city?", "unknown", [7])]
    assert substitute_answers("Where was #1 born?", chain) == "Where was Frank Herbert born?"
    assert substitute_answers("Where is #2?", chain) == "Where is #2?"  # unanswered stays
    facts = known_facts(chain, [{"id": 7, "text": "Dune is set on Arrakis."}])
    assert "- #1: Who wrote Dune? Frank Herbert" in facts
    assert "no answer found; context: Dune is set on Arrakis." in facts


def test_a_when_step_pointed_at_a_date_asks_about_the_latest_named_answer() -> None:
    # the plan's step 4 points at #2 (a birth date) where #3, the second director, was meant
    chain = [
        _row("Who directed South American George?", "Marcel Varnel"),
        _row("When was Marcel Varnel born?", "1892"),
        _row("Who directed Getting In?", "Doug Liman"),
    ]
    assert substitute_answers("When was #2 born?", chain) == "When was Doug Liman born?"
    assert substitute_answers("When was #1 born?", chain) == "When was Marcel Varnel born?"
    # a date answer still fills a step that does not ask when
    assert substitute_answers("Who ruled France in #2?", chain) == "Who ruled France in 1892?"
    assert substitute_answers("When was #1 born?", [_row("When?", "8 April 1977")]) == (
        "When was #1 born?"
    )


def test_routing_loops_over_the_plan_then_integrates() -> None:
    answer, context = Runtime(Settings()), Runtime(Settings(chain_integration="context"))
    state = {"plan": ["a?", "b?"], "step": 1}
    assert route_after_chain_step(state, answer) == "rewrite_chain_question"
    assert route_after_chain_step({**state, "step": 2}, answer) == "integrate_answers"
    assert route_after_chain_step({**state, "step": 2}, context) == "integrate_context"


@pytest.fixture(scope="module")
def resources(settings: Settings, sample_index: str):
    res = Resources.open(settings, sample_index)
    yield res
    res.close()


@pytest.mark.e2e  # the real chat model
def test_chainrag_end_to_end_with_context_integration(
    resources: Resources, settings: Settings
) -> None:
    graph = build_chainrag(resources)
    final = graph.invoke(
        {"question": DEMO_QUESTION},
        context=settings.with_overrides(chain_integration="context"),
    )
    plan, chain = final["plan"], final["chain"]
    assert 1 <= len(plan) <= 4 and len(chain) == len(plan)
    # the plan chains its steps ("Which river flows through #1?"), and every "#k" was
    # replaced by the k-th answer before the step was searched
    assert any(re.search(r"#\d", step) for step in plan[1:]), plan
    for step, row in zip(plan, chain, strict=True):
        assert "#" not in row["sub_question"], row
        assert row["rewritten_from"] == (step if row["sub_question"] != step else "")
        for k in re.findall(r"#(\d)", step):
            assert chain[int(k) - 1]["answer"] in row["sub_question"], (chain, k)
    assert final["context"] and all(s["text"] for s in final["context"])
    # every gathered sentence was judged for relevance, and the judgement is in the trace
    assert len(final["decisions"]) == len(final["context"])
    assert {d["kind"] for d in final["decisions"]} == {"rel"}
    judged = {d["inputs"][0] for d in final["decisions"]}
    assert judged == {f"sentence {s['id']}" for s in final["context"]}
    assert final["passages"] and final["answer_passage_ids"]
    assert "ulden" in final["answer"].lower()
