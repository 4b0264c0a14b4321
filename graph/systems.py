"""Answering systems by name: the harness, the CLI and the server treat them alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from app.checks import check_system
from graph.baselines import build_closed_book, build_iterative, build_oracle, build_vanilla
from graph.chainrag import build_chainrag
from graph.deft import build_deft
from graph.resources import Resources

SYSTEMS: dict[str, Callable[..., CompiledStateGraph]] = {
    "closed_book": build_closed_book,
    "vanilla": build_vanilla,
    "oracle": build_oracle,
    "iterative": build_iterative,
    "deft": build_deft,
    "chainrag": build_chainrag,
}


def build_system(name: str, resources: Resources, checkpointer: Any = None) -> CompiledStateGraph:
    """The named system's graph, compiled with `checkpointer` (None: the caller's, as
    `langgraph dev` requires)."""
    check_system(name)
    return SYSTEMS[name](resources, checkpointer=checkpointer)
