"""Recording decision-model judgements: into the state's `decisions` list, and live to
anyone streaming the run in `custom` mode (`hoprag ask --trace`, Studio)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

from langgraph.config import get_stream_writer

from tools.records import Decision

T = TypeVar("T")


def timed(dm_call: Callable[[], T]) -> tuple[T, float]:
    """A DM call's result and its seconds: the DM's share of a run's time is reported."""
    started = time.perf_counter()
    result = dm_call()
    return result, time.perf_counter() - started


def decide(
    kind: str,
    step: int,
    inputs: list[Any],
    p_yes: float,
    threshold: float,
    backend: str,
    seconds: float = 0.0,
) -> Decision:
    decision = Decision(
        kind=kind,
        step=step,
        inputs=inputs,
        p_yes=round(float(p_yes), 4),
        threshold=threshold,
        outcome=bool(p_yes >= threshold),
        backend=backend,
        seconds=round(seconds, 4),
    )
    # Outside a graph run (tests, tools) there is nothing to stream to.
    with contextlib.suppress(RuntimeError):
        get_stream_writer()({"decision": decision})
    return decision
