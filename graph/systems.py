"""Answering systems by name: the harness, the CLI and the server treat them alike."""

from __future__ import annotations

from collections.abc import Callable

from langgraph.graph.state import CompiledStateGraph

from app.errors import UserError
from app.resources import Resources
from graph.baselines import build_closed_book, build_iterative, build_oracle, build_vanilla
from graph.deft import build_deft

SYSTEMS: dict[str, Callable[..., CompiledStateGraph]] = {
    "closed_book": build_closed_book,
    "vanilla": build_vanilla,
    "oracle": build_oracle,
    "iterative": build_iterative,
    "deft": build_deft,
}


def build_system(name: str, resources: Resources) -> CompiledStateGraph:
    try:
        builder = SYSTEMS[name]
    except KeyError:
        raise UserError(
            f"unknown system {name!r}", hint=f"choose one of: {', '.join(SYSTEMS)}"
        ) from None
    return builder(resources)
