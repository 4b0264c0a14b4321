"""Sufficiency check: DM_suff(Q, F_t) decides whether the QA table already answers Q.

Three rules come first. A row that asks the question itself (a one-hop question, asked
as it is) or the last step of its relation chain ("Who is the mother of <the father>?"
for a paternal grandmother: `answering_row` in tools/question_rules.py) answers it; the
DM, trained on chains of two or more hops, says no to any one-row table. A date comparison ("who is
older, A or B?") suffices exactly when the rule of tools/comparison.py can compare it:
the DM, shown "Who directed A? ... Where was <director> born?", often says yes to a table
that holds one date of two. And a question DM_depth judged deeper than 2 hops needs
`DEEP_MIN_ROWS` rows: the DM says yes to the first two rows of longer chains."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import DEEP_MIN_ROWS, Settings
from graph.state import DeftState
from tools.comparison import RULE, compare_dates, is_date_comparison
from tools.decision import DecisionModel
from tools.decision_log import decide, timed
from tools.question_rules import answering_row


def judged_deep(state: DeftState) -> bool:
    """DM_depth judged the question to need more than 2 hops (the direct check's depth
    decision; absent where it was not asked)."""
    return any(d["kind"] == "depth" and not d["outcome"] for d in state.get("decisions") or [])


def rows_judged(state: DeftState) -> int:
    """The rows of the QA table the last sufficiency judgement saw (0 before any): the
    rows after them came from the steps since, one, or one per option of a fan-out."""
    suff = [d for d in state.get("decisions") or [] if d["kind"] == "suff"]
    return suff[-1]["inputs"][0] if suff else 0


def check_sufficiency(
    state: DeftState, runtime: Runtime[Settings], *, dm: DecisionModel
) -> dict[str, Any]:
    table = state.get("qa_table") or []
    new = table[rows_judged(state) :]
    if not new:
        return {"sufficient": False}  # F_t == F_{t-1}: the last judgement still holds
    settings = Settings.of(runtime)
    question = state["question"]
    own_rules = settings.rule("sufficiency_rules")
    chains = settings.rule("relation_chains")
    if own_rules and answering_row(question, table, chains=chains) in new:
        p_yes, seconds, backend = 1.0, 0.0, RULE
    elif settings.rule("comparison_rules") and is_date_comparison(question):
        # sufficient exactly when the two dates are in
        p_yes, seconds = timed(lambda: float(compare_dates(question, table) is not None))
        backend = RULE
    elif own_rules and judged_deep(state) and len(table) < DEEP_MIN_ROWS:
        p_yes, seconds, backend = 0.0, 0.0, RULE
    else:
        p_yes, seconds = timed(lambda: dm.p_suff(question, table))
        backend = dm.backend("suff")
    decision = decide(
        "suff", state.get("hop", 0), [len(table)], p_yes, settings.tau_suff, backend, seconds
    )
    return {"sufficient": decision["outcome"], "decisions": [decision]}
