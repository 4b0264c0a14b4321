"""Graph factories for `langgraph dev` / LangGraph Server (see langgraph.json).

The server calls a factory for each run; models and stores are opened once per process
(per index) by `shared_resources` and injected into the graph. The index comes from the
run's `configurable.index`, else HOPRAG_INDEX.
"""

from __future__ import annotations

from functools import cache

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from app.resources import Resources
from app.settings import Settings
from graph.systems import build_system


@cache
def shared_resources(index: str) -> Resources:
    return Resources.open(Settings(index=index), index)


def _graph(name: str, config: RunnableConfig) -> CompiledStateGraph:
    index = str((config.get("configurable") or {}).get("index") or Settings().index)
    return build_system(name, shared_resources(index))


def vanilla(config: RunnableConfig) -> CompiledStateGraph:
    """Retrieve top-k passages, read them in one LLM call."""
    return _graph("vanilla", config)


def iterative(config: RunnableConfig) -> CompiledStateGraph:
    """IRCoT-style interleaved reasoning and retrieval."""
    return _graph("iterative", config)


def closed_book(config: RunnableConfig) -> CompiledStateGraph:
    """The chat model alone, no retrieval."""
    return _graph("closed_book", config)


def deft(config: RunnableConfig) -> CompiledStateGraph:
    """DeFT-RAG: self-contained sub-questions, a QA table, calibrated decisions, QA cache."""
    return _graph("deft", config)


def chainrag(config: RunnableConfig) -> CompiledStateGraph:
    """ChainRAG: decomposition, rewriting, sentence-graph expansion, AnsInt or CxtInt."""
    return _graph("chainrag", config)
