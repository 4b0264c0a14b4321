"""Graph factories for `langgraph dev` / LangGraph Server (see langgraph.json).

The server calls a factory for each run and each state read, on its event loop. The
factories are async: models and stores are opened once per process (per index) by the
`server_pool`, in a worker thread, and injected into the graph; LangGraph runs the
graph's synchronous nodes in its thread pool, so nothing blocks the loop. The index
comes from the run's `configurable.index`, else HOPRAG_INDEX.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_DURABILITY  # no public setting
from langgraph.graph.state import CompiledStateGraph

from graph.resources import server_pool
from graph.systems import build_system


async def _graph(name: str, config: RunnableConfig | None) -> CompiledStateGraph:
    pool = server_pool()
    index = str(((config or {}).get("configurable") or {}).get("index") or pool.settings.index)
    graph = build_system(name, await pool.aget(index))
    # Every step saved before the next starts, as `hoprag ask` runs them: a server killed
    # mid-run loses at most the step in flight (Aegra sets no durability of its own, and
    # LangGraph's default writes checkpoints in the background, which a kill can lose).
    return graph.with_config(configurable={CONFIG_KEY_DURABILITY: "sync"})


async def vanilla(config: RunnableConfig | None = None) -> CompiledStateGraph:
    """Retrieve top-k passages, read them in one LLM call."""
    return await _graph("vanilla", config)


async def iterative(config: RunnableConfig | None = None) -> CompiledStateGraph:
    """IRCoT-style interleaved reasoning and retrieval."""
    return await _graph("iterative", config)


async def closed_book(config: RunnableConfig | None = None) -> CompiledStateGraph:
    """The chat model alone, no retrieval."""
    return await _graph("closed_book", config)


async def deft(config: RunnableConfig | None = None) -> CompiledStateGraph:
    """DeFT-RAG: self-contained sub-questions, a QA table, calibrated decisions, QA cache."""
    return await _graph("deft", config)


async def chainrag(config: RunnableConfig | None = None) -> CompiledStateGraph:
    """ChainRAG: decomposition, rewriting, sentence-graph expansion, AnsInt or CxtInt."""
    return await _graph("chainrag", config)
