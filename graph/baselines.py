"""The baselines every multi-hop method is measured against, as LangGraph graphs:
closed book, vanilla retrieve-then-read, the gold-passage oracle, and an IRCoT-style
iterative reason-and-retrieve loop."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph

from app.settings import ITERATIVE_ROUNDS, Settings
from graph.resources import Resources
from graph.state import InputState, IterativeState, ReadState
from graph.turn import REPLY, add_turn
from nodes.answer import answer_closed_book, answer_from_passages
from nodes.reason import answer_from_thoughts, reason_step
from nodes.retrieve import gold_passages, retrieve_for_question, retrieve_for_thought
from tools.answer_rules import final_answer_in


def _chain(
    name: str,
    resources: Resources,
    steps: list[tuple[str, object]],
    checkpointer: Any = None,
) -> CompiledStateGraph:
    """A straight line of nodes: take the question, then each step in order, reply."""
    builder = StateGraph(ReadState, context_schema=Settings, input_schema=InputState)
    add_turn(builder, resources, first=steps[0][0])
    for (node, action), following in zip(steps, [*(n for n, _ in steps[1:]), REPLY], strict=True):
        builder.add_node(node, action)
        builder.add_edge(node, following)
    return builder.compile(name=name, checkpointer=checkpointer)


def build_closed_book(resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    """No retrieval: what the model knows by itself."""
    return _chain(
        "closed_book",
        resources,
        [("answer_closed_book", partial(answer_closed_book, gateway=resources.gateway))],
        checkpointer,
    )


def build_vanilla(resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    """Top-k fused passages for the whole question, one reader call."""
    return _chain(
        "vanilla",
        resources,
        [
            (
                "retrieve_for_question",
                partial(retrieve_for_question, retriever=resources.retriever),
            ),
            ("answer_from_passages", partial(answer_from_passages, gateway=resources.gateway)),
        ],
        checkpointer,
    )


def build_oracle(resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    """The reader's ceiling: exactly the gold passages, one reader call."""
    return _chain(
        "oracle",
        resources,
        [
            ("gold_passages", partial(gold_passages, index=resources.index)),
            ("answer_from_passages", partial(answer_from_passages, gateway=resources.gateway)),
        ],
        checkpointer,
    )


def route_after_reasoning(
    state: IterativeState,
) -> Literal["answer_from_thoughts", "answer_from_passages", "retrieve_for_thought"]:
    """Stop when the chain states an answer; read everything gathered when out of rounds."""
    if final_answer_in((state.get("thoughts") or [""])[-1]):
        return "answer_from_thoughts"
    if state.get("rounds", 0) >= ITERATIVE_ROUNDS:
        return "answer_from_passages"
    return "retrieve_for_thought"


def build_iterative(resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    """IRCoT-style: retrieve, write one reasoning sentence, retrieve with it, repeat."""
    builder = StateGraph(IterativeState, context_schema=Settings, input_schema=InputState)
    add_turn(builder, resources, first="retrieve_for_question")
    builder.add_node(
        "retrieve_for_question", partial(retrieve_for_question, retriever=resources.retriever)
    )
    builder.add_node("reason_step", partial(reason_step, gateway=resources.gateway))
    builder.add_node(
        "retrieve_for_thought", partial(retrieve_for_thought, retriever=resources.retriever)
    )
    builder.add_node("answer_from_thoughts", answer_from_thoughts)
    builder.add_node(
        "answer_from_passages", partial(answer_from_passages, gateway=resources.gateway)
    )
    builder.add_edge("retrieve_for_question", "reason_step")
    builder.add_conditional_edges("reason_step", route_after_reasoning)
    builder.add_edge("retrieve_for_thought", "reason_step")
    builder.add_edge("answer_from_thoughts", REPLY)
    builder.add_edge("answer_from_passages", REPLY)
    return builder.compile(name="iterative", checkpointer=checkpointer)
