"""The DeFT graph (docs/method.md section 1): an explicit state machine whose every step is a node
and whose every yes/no choice is a decision-model judgement, routed by named edges. One step
of the sub-question loop is a subgraph of its own (`build_hop`), which the turn's graph
(`build_deft`) runs as its node `hop`. A comparison's steps fan out: one hop per option,
sent at once with `Send` and run in parallel (nodes/options.py); chains stay serial."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from app.settings import Settings
from graph.resources import Resources
from graph.state import DeftState, InputState, StepInput, StepState
from graph.turn import REPLY, add_turn
from nodes.answer import answer_sub_question
from nodes.cache import lookup_qa_cache
from nodes.direct import answer_directly, check_direct_answer
from nodes.evidence import select_evidence
from nodes.expand import expand_from_graph, expansion_reason
from nodes.final import answer_from_qa_table, fallback_answer
from nodes.guard import guard_self_contained
from nodes.options import write_option_sub_questions
from nodes.qa_table import update_qa_table
from nodes.relevance import filter_relevant
from nodes.retrieve import retrieve_for_sub_question, retrieve_question_passages
from nodes.sub_question import write_sub_question
from nodes.sufficiency import check_sufficiency
from tools.answer_rules import is_unknown
from tools.comparison import compared_options
from tools.step_limits import loop_end

HOP = "hop"  # the parent's node that runs one step of the loop: the hop subgraph
OPTIONS = "write_option_sub_questions"  # a comparison's next steps, one per option


def next_steps(
    state: DeftState, runtime: Runtime[Settings]
) -> Literal["hop", "write_option_sub_questions"]:
    """A comparison of named options, with fan-out on, writes its next steps for every
    option at once; any other question takes one step."""
    fan_out = Settings.of(runtime).fan_out_comparisons
    return OPTIONS if fan_out and compared_options(state.get("question", "")) else HOP


def route_after_direct_check(
    state: DeftState, runtime: Runtime[Settings]
) -> Literal["answer_directly", "hop", "write_option_sub_questions"]:
    return "answer_directly" if state.get("direct") else next_steps(state, runtime)


def step_input(state: DeftState, sub_question: str, branch: int) -> StepInput:
    """What a branch of a fan-out starts from: the turn's keys, its own sub-question, and
    the step number after those of the branches sent before it."""
    return StepInput(
        question=state["question"],
        hop=state.get("hop", 0) + branch,
        sub_question=state.get("sub_question", ""),
        plan=state.get("plan") or [],
        plan_step=state.get("plan_step", 0),
        qa_table=state.get("qa_table") or [],
        unanswerable=state.get("unanswerable") or [],
        given=sub_question,
    )


def route_to_branches(state: DeftState) -> list[Send] | Literal["hop"]:
    """One hop per sub-question written for the options, all sent at once; none written
    (the chains are uneven): one step, whose writer writes it."""
    branches = state.get("branches") or []
    if not branches:
        return HOP
    return [Send(HOP, step_input(state, q, n)) for n, q in enumerate(branches)]


def route_after_sub_question(state: StepState) -> Literal["guard_self_contained", "__end__"]:
    """No acceptable sub-question (even after one retry): the step ends here, and the
    turn goes to the fallback (`route_after_hop`)."""
    return "guard_self_contained" if state.get("sub_question") else END


def route_after_cache(state: StepState) -> Literal["update_qa_table", "retrieve_for_sub_question"]:
    return "update_qa_table" if state.get("cache_hit") else "retrieve_for_sub_question"


def can_expand(state: StepState, runtime: Runtime[Settings], graph_available: bool) -> bool:
    """A sentence graph is there, expansion is on, and this step has a reason to expand."""
    return (
        graph_available and Settings.of(runtime).graph_expansion and bool(expansion_reason(state))
    )


def route_after_filter(
    state: StepState, runtime: Runtime[Settings], *, graph_available: bool
) -> Literal["expand_from_graph", "select_evidence"]:
    """Nothing relevant retrieved: walk the sentence graph before reading, so the step
    reads once (what the walk found, or else the top retrieved passages), not twice."""
    return "expand_from_graph" if can_expand(state, runtime, graph_available) else "select_evidence"


def route_after_hop(state: DeftState) -> Literal["check_sufficiency", "fallback_answer"]:
    """The step could ask no sub-question: go to the fallback now. The writer runs at
    temperature 0, so the same state would only yield the same rejected question again
    and burn the remaining steps."""
    return "check_sufficiency" if state.get("sub_question") else "fallback_answer"


def route_after_sufficiency(
    state: DeftState, runtime: Runtime[Settings]
) -> Literal["answer_from_qa_table", "hop", "write_option_sub_questions", "fallback_answer"]:
    if state.get("sufficient"):
        return "answer_from_qa_table"
    settings = Settings.of(runtime)
    if loop_end(state, settings.max_steps, dead_ends=settings.rule("dead_end_endings")):
        return "fallback_answer"
    return next_steps(state, runtime)


def route_after_final_answer(
    state: DeftState, runtime: Runtime[Settings] | None = None
) -> Literal["fallback_answer", "reply"]:
    """LLM_fin found no answer in a table the DM judged sufficient: the table was not,
    so read passages for the question with its rows (the fallback) rather than reply
    "unknown"."""
    dead_end = Settings.of(runtime).rule("dead_end_endings")
    return "fallback_answer" if dead_end and is_unknown(state.get("answer") or "") else REPLY


def build_hop(resources: Resources) -> CompiledStateGraph:
    """One step of the sub-question loop (docs/method.md, steps 3.1-3.8) as a graph of its
    own: write the sub-question, guard it, look it up in the QA cache, or else retrieve,
    filter, expand, select sentences and answer; then update the QA table. It starts from
    the turn's `StepInput`, so nothing of one step is left for the next, and the turn
    keeps of its state what the two share (`StepState`). Compiled without a checkpointer:
    as the turn's node it saves into the turn's checkpointer, under its own namespace, so
    a killed run resumes inside a step."""
    dm, gateway, retriever, cache = (
        resources.dm,
        resources.gateway,
        resources.retriever,
        resources.qa_cache,
    )
    builder = StateGraph(StepState, context_schema=Settings, input_schema=StepInput)
    builder.add_node(
        "write_sub_question",
        partial(write_sub_question, gateway=gateway, examples=resources.examples),
    )
    builder.add_node("guard_self_contained", partial(guard_self_contained, gateway=gateway))
    builder.add_node("lookup_qa_cache", partial(lookup_qa_cache, cache=cache, dm=dm))
    builder.add_node(
        "retrieve_for_sub_question", partial(retrieve_for_sub_question, retriever=retriever)
    )
    builder.add_node("filter_relevant", partial(filter_relevant, dm=dm))
    builder.add_node("select_evidence", partial(select_evidence, dm=dm, index=resources.index))
    builder.add_node("answer_sub_question", partial(answer_sub_question, gateway=gateway))
    builder.add_node("update_qa_table", partial(update_qa_table, cache=cache))

    builder.add_edge(START, "write_sub_question")
    builder.add_conditional_edges("write_sub_question", route_after_sub_question)
    builder.add_edge("guard_self_contained", "lookup_qa_cache")
    builder.add_conditional_edges("lookup_qa_cache", route_after_cache)
    builder.add_edge("retrieve_for_sub_question", "filter_relevant")
    graph = resources.sentence_graph
    if graph is not None:
        builder.add_node("expand_from_graph", partial(expand_from_graph, graph=graph, dm=dm))
        builder.add_edge("expand_from_graph", "select_evidence")
    builder.add_conditional_edges(
        "filter_relevant",
        partial(route_after_filter, graph_available=graph is not None),
        ["expand_from_graph", "select_evidence"] if graph is not None else ["select_evidence"],
    )
    builder.add_edge("select_evidence", "answer_sub_question")
    builder.add_edge("answer_sub_question", "update_qa_table")
    builder.add_edge("update_qa_table", END)
    return builder.compile(name=HOP)


def build_deft(resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    """The turn: retrieve for Q, the direct-answer check, then steps of the hop subgraph
    until the QA table suffices (LLM_fin) or the loop ends (the fallback). A comparison
    takes its steps one per option at once, where it can (`route_to_branches`)."""
    dm, gateway, retriever, index = (
        resources.dm,
        resources.gateway,
        resources.retriever,
        resources.index,
    )
    builder = StateGraph(DeftState, context_schema=Settings, input_schema=InputState)
    add_turn(builder, resources, first="retrieve_question_passages")
    builder.add_node(
        "retrieve_question_passages", partial(retrieve_question_passages, retriever=retriever)
    )
    builder.add_node("check_direct_answer", partial(check_direct_answer, dm=dm))
    builder.add_node(
        "answer_directly",
        partial(answer_directly, dm=dm, gateway=gateway, index=index),
    )
    builder.add_node(
        OPTIONS,
        partial(write_option_sub_questions, gateway=gateway, examples=resources.examples),
    )
    builder.add_node(HOP, build_hop(resources))
    builder.add_node("check_sufficiency", partial(check_sufficiency, dm=dm))
    builder.add_node("answer_from_qa_table", partial(answer_from_qa_table, gateway=gateway))
    builder.add_node(
        "fallback_answer",
        partial(fallback_answer, retriever=retriever, dm=dm, gateway=gateway, index=index),
    )

    builder.add_edge("retrieve_question_passages", "check_direct_answer")
    builder.add_conditional_edges("check_direct_answer", route_after_direct_check)
    builder.add_edge("answer_directly", REPLY)
    builder.add_conditional_edges(OPTIONS, route_to_branches, [HOP])
    builder.add_conditional_edges(HOP, route_after_hop)
    builder.add_conditional_edges("check_sufficiency", route_after_sufficiency)
    builder.add_conditional_edges("answer_from_qa_table", route_after_final_answer)
    builder.add_edge("fallback_answer", REPLY)
    return builder.compile(name="deft", checkpointer=checkpointer)
