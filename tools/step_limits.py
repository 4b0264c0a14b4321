"""How long DeFT's step loop may go on with a QA table that does not suffice: the
sufficiency route, the graph's routers and the fallback's trace all ask the same rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.settings import MAX_UNANSWERED


def loop_end(state: Mapping[str, Any], max_steps: int, *, dead_ends: bool = True) -> str:
    """Why the loop stops with a table that does not suffice ("" while it goes on): T
    steps taken, or `MAX_UNANSWERED` sub-questions that found no answer (the steps a loop
    takes after its second dead end seldom find the chain)."""
    if state.get("hop", 0) >= max_steps:
        return f"{max_steps} steps taken"
    if dead_ends and len(state.get("unanswerable") or []) >= MAX_UNANSWERED:
        return f"{MAX_UNANSWERED} sub-questions found no answer"
    return ""
