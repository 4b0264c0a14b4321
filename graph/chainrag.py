"""The ChainRAG graph (docs/method.md section 3): decompose, then for each sub-question rewrite its
back-references with earlier answers, gather sentences along the sentence graph, answer;
finish with AnsInt or CxtInt (`Settings.chain_integration`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph

from app.errors import UserError
from app.settings import Settings
from graph.resources import Resources
from graph.state import ChainState, InputState
from graph.turn import REPLY, add_turn
from nodes.decompose import decompose_question
from nodes.gather import gather_sentences
from nodes.integrate import (
    answer_chain_step,
    integrate_answers,
    integrate_context,
    route_after_chain_step,
)
from nodes.rewrite import rewrite_chain_question


def build_chainrag(resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    graph = resources.sentence_graph
    if graph is None:
        raise UserError(
            f"index {resources.index.name!r} has no sentence graph (built before it existed)",
            hint=f"run `hoprag graph build --index {resources.index.name}`",
        )
    gateway, dm = resources.gateway, resources.dm
    builder = StateGraph(ChainState, context_schema=Settings, input_schema=InputState)
    add_turn(builder, resources, first="decompose_question")
    builder.add_node(
        "decompose_question",
        partial(decompose_question, gateway=gateway, examples=resources.examples),
    )
    builder.add_node("rewrite_chain_question", partial(rewrite_chain_question, gateway=gateway))
    builder.add_node("gather_sentences", partial(gather_sentences, graph=graph, dm=dm))
    builder.add_node("answer_chain_step", partial(answer_chain_step, gateway=gateway))
    builder.add_node("integrate_answers", partial(integrate_answers, gateway=gateway))
    builder.add_node("integrate_context", partial(integrate_context, gateway=gateway, graph=graph))

    builder.add_edge("decompose_question", "rewrite_chain_question")
    builder.add_edge("rewrite_chain_question", "gather_sentences")
    builder.add_edge("gather_sentences", "answer_chain_step")
    builder.add_conditional_edges("answer_chain_step", route_after_chain_step)
    builder.add_edge("integrate_answers", REPLY)
    builder.add_edge("integrate_context", REPLY)
    return builder.compile(name="chainrag", checkpointer=checkpointer)
