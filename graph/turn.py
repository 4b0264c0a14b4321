"""What every graph does around its method: take this turn's question (rewriting a chat
follow-up so that it stands alone), and reply with the answer and its sources."""

from __future__ import annotations

from functools import partial

from langgraph.graph import END, START, StateGraph

from graph.resources import Resources
from graph.state import TurnState, fresh_turn
from nodes.contextualise import contextualise_question, has_history
from nodes.question import take_question
from nodes.reply import reply

REPLY = "reply"


def route_after_question(state: TurnState, *, first: str) -> str:
    """No usable question: reply at once (take_question wrote why). A follow-up in a
    thread with earlier turns: make it self-contained first."""
    if not state.get("question"):
        return REPLY
    return "contextualise_question" if has_history(state) else first


def add_turn(builder: StateGraph, resources: Resources, *, first: str) -> None:
    """START -> take_question [-> contextualise_question] -> `first` ... -> reply -> END;
    the method's last nodes lead to `REPLY`."""
    builder.add_node(
        "take_question", partial(take_question, fresh=fresh_turn(builder.state_schema))
    )
    builder.add_node(
        "contextualise_question", partial(contextualise_question, gateway=resources.gateway)
    )
    builder.add_node(REPLY, partial(reply, index=resources.index))
    builder.add_edge(START, "take_question")
    builder.add_conditional_edges(
        "take_question",
        partial(route_after_question, first=first),
        [first, "contextualise_question", REPLY],
    )
    builder.add_edge("contextualise_question", first)
    builder.add_edge(REPLY, END)
