"""Sufficiency check: DM_suff(Q, F_t) decides whether the QA table already answers Q.

A date comparison ("who is older, A or B?") is the exception: the table suffices exactly
when the rule of tools/comparison.py can compare it. The DM, shown "Who directed A? ...
Where was <director> born?", often says yes to a table that holds one date of two."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import DeftState
from nodes.decisions import decide, timed
from tools.comparison import RULE, compare_dates, is_date_comparison
from tools.decision import DecisionModel


def check_sufficiency(
    state: DeftState, runtime: Runtime[Settings], *, dm: DecisionModel
) -> dict[str, Any]:
    table = state.get("qa_table") or []
    grew = bool(table) and table[-1]["sub_question"] == state.get("sub_question")
    if not grew:
        return {"sufficient": False}  # F_t == F_{t-1}: the last judgement still holds
    settings = Settings.of(runtime)
    question = state["question"]
    if is_date_comparison(question):  # sufficient exactly when the two dates are in
        p_yes, seconds = timed(lambda: float(compare_dates(question, table) is not None))
        backend = RULE
    else:
        p_yes, seconds = timed(lambda: dm.p_suff(question, table))
        backend = dm.backend("suff")
    decision = decide(
        "suff", state.get("hop", 0), [len(table)], p_yes, settings.tau_suff, backend, seconds
    )
    return {"sufficient": decision["outcome"], "decisions": [decision]}
