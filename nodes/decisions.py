"""Recording decision-model judgements: into the state's `decisions` list, and live to
anyone streaming the run in `custom` mode (`hoprag ask --trace`, Studio)."""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph.config import get_stream_writer

from graph.state import Decision


def decide(
    kind: str, step: int, inputs: list[Any], p_yes: float, threshold: float, backend: str
) -> Decision:
    decision = Decision(
        kind=kind,
        step=step,
        inputs=inputs,
        p_yes=round(float(p_yes), 4),
        threshold=threshold,
        outcome=bool(p_yes >= threshold),
        backend=backend,
    )
    # Outside a graph run (tests, tools) there is nothing to stream to.
    with contextlib.suppress(RuntimeError):
        get_stream_writer()({"decision": decision})
    return decision
