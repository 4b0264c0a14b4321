"""Sufficiency check: DM_suff(Q, F_t) decides whether the QA table already answers Q."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import DeftState
from nodes.decisions import decide, timed
from tools.decision import DecisionModel


def check_sufficiency(
    state: DeftState, runtime: Runtime[Settings], *, dm: DecisionModel
) -> dict[str, Any]:
    table = state.get("qa_table") or []
    grew = bool(table) and table[-1]["sub_question"] == state.get("sub_question")
    if not grew:
        return {"sufficient": False}  # F_t == F_{t-1}: the last judgement still holds
    settings = Settings.of(runtime)
    p_yes, seconds = timed(lambda: dm.p_suff(state["question"], table))
    decision = decide(
        "suff",
        state.get("hop", 0),
        [len(table)],
        p_yes,
        settings.tau_suff,
        dm.backend("suff"),
        seconds,
    )
    return {"sufficient": decision["outcome"], "decisions": [decision]}
