"""The chat reply of every graph: the answer as an AI message that cites the passages it
rests on (id, and the place in a document or the title), so that a reader can check it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from app.index.documents import format_citations
from app.index.store import CorpusIndex
from graph.state import TurnState
from tools.answer_rules import is_unknown


def cited_passages(state: TurnState, index: CorpusIndex) -> list[dict[str, Any]]:
    """The passages behind the answer: those the final step names (`answer_passage_ids`,
    which may come from the QA cache), else every passage read; none for no answer."""
    if not state.get("question") or is_unknown(state.get("answer") or ""):
        return []
    ids = state.get("answer_passage_ids")
    if ids is None:
        ids = [p["id"] for p in state.get("passages") or []]
    return [p.citation() for p in index.passages(list(ids))]


def reply(state: TurnState, *, index: CorpusIndex) -> dict[str, Any]:
    answer = state.get("answer") or ""
    citations = cited_passages(state, index)
    sources = format_citations(citations)
    content = f"{answer}\n\nSources: {sources}" if sources else answer
    message = AIMessage(content=content, additional_kwargs={"citations": citations})
    return {"messages": [message], "citations": citations}
