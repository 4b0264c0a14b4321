"""Retrieve-then-read: the one-call reader that every multi-hop method is measured against."""

from __future__ import annotations

from functools import partial

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from app.resources import Resources
from app.settings import Settings
from graph.state import InputState, ReadState
from nodes.answer import answer_from_passages
from nodes.question import take_question
from nodes.retrieve import retrieve_for_question


def build_rag_graph(resources: Resources, **compile_kwargs: object) -> CompiledStateGraph:
    builder = StateGraph(ReadState, context_schema=Settings, input_schema=InputState)
    builder.add_node("take_question", take_question)
    builder.add_node("retrieve_for_question",
                     partial(retrieve_for_question, retriever=resources.retriever))
    builder.add_node("answer_from_passages",
                     partial(answer_from_passages, gateway=resources.gateway))
    builder.add_edge(START, "take_question")
    builder.add_edge("take_question", "retrieve_for_question")
    builder.add_edge("retrieve_for_question", "answer_from_passages")
    builder.add_edge("answer_from_passages", END)
    return builder.compile(name="vanilla", **compile_kwargs)
