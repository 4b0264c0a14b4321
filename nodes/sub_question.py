"""Write the next self-contained sub-question (LLM_sub), one at a time.

Sub-questions that got no answer are listed to the LLM as forbidden; a sub-question that
repeats an earlier one (after normalisation), or rewords the whole question, is rejected.
The next step of a whole decomposition (ChainRAG's plan prompt, made once per question on
first need, with the table's answers put in for "#k") is asked instead, and from then on
each next askable step of that plan is asked before the writer is called again: a
planned step costs no call (docs/decisions.md, "Plan steps before the writer"). After a
step that found no answer the plan is made at once: the small writer mostly asks the
failed sub-question again, which is refused (docs/decisions.md, "After a step found no
answer"). Only where the plan has no askable step is the writer asked, and after a
refusal once more, told why. Told why, the small writer mostly rewords the question
again, so a first sub-question that rewords the whole question, where the plan has no
other first step either, is taken as a sign of a one-hop question, asked as it is.
Without any askable sub-question the step is spent and the graph moves on (the hop
counter bounds every loop).

A question about a family relation that chains single ones ("Who is X's paternal
grandmother?") is planned by rule, with no call: the father of X, then that father's
mother (`relation_chain`, `prompts/relation_chains.json`).

A branch of a comparison's fan-out (graph/deft.py) is given its sub-question by the turn
(`given`, written once for every option: nodes/options.py) and asks it as it is.

With `sub_questions = "plan"` the decomposition is made at the first step, before any
writer call, and gives each next sub-question the same way. The rules that judge a
sub-question and pick a plan's next step are in tools/question_rules.py (`rejection`,
`next_plan_step`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from app.llm.gateway import LLMGateway
from app.settings import SUB_QUESTION_TOKENS, Settings
from graph.state import StepState
from tools.comparison import missing_dates
from tools.examples import ExampleBank
from tools.planning import plan_sub_questions, writer_messages
from tools.question_rules import (
    clean_sub_question,
    hint,
    next_plan_step,
    rejection,
    relation_chain,
)
from tools.records import Rejection

NO_ASKABLE_STEP = "no askable step"  # the trace's reason for a planned step not asked
GIVEN = "fan-out"  # the trace's writer of a branch's sub-question, which the turn wrote
RELATION_CHAIN = "relation chain"  # the trace's writer of a step of `relation_chain`


def planned_step(
    plan: list[str], state: StepState, *, gateway: LLMGateway, examples: ExampleBank
) -> tuple[list[str], int, str]:
    """The decomposition (made on first need: once per question) and the position and
    text of its next askable step (-1, "" when none is)."""
    plan = plan or plan_sub_questions(state["question"], gateway=gateway, examples=examples)
    return plan, *next_plan_step(plan, state)


def found_no_answer(state: StepState) -> bool:
    """The last step found no answer: its sub-question is listed unanswerable."""
    sub_question = state.get("sub_question")
    return bool(sub_question) and sub_question in (state.get("unanswerable") or [])


def write_sub_question(
    state: StepState, runtime: Runtime[Settings], *, gateway: LLMGateway, examples: ExampleBank
) -> dict[str, Any]:
    if state.get("given"):  # a fan-out branch: the turn wrote it (nodes/options.py)
        return next_step(state, state["given"], GIVEN, [], state.get("plan") or [])
    settings = Settings.of(runtime)
    own_refusals, plan_first = settings.rule("sub_question_refusals"), settings.rule("plan_first")
    # A family relation that chains single ones is its own plan, made with no call.
    chain = relation_chain(state["question"]) if settings.rule("relation_chains") else []
    plan = state.get("plan") or chain
    if plan or settings.sub_questions == "plan" or (plan_first and found_no_answer(state)):
        plan, position, planned = planned_step(plan, state, gateway=gateway, examples=examples)
        if planned:
            written_by = RELATION_CHAIN if plan == chain else "decomposition"
            return next_step(state, planned, written_by, [], plan, position)
    table = state.get("qa_table") or []
    messages = writer_messages(state["question"], table, state.get("unanswerable") or [], examples)
    sub_question = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    reason = rejection(sub_question, state, own_rules=own_refusals)
    if not reason:
        return next_step(state, sub_question, "writer", [], plan)
    # The plan's next step first: made once per question, it costs no call once made.
    rejected = [Rejection(sub_question=sub_question, reason=reason)]
    if plan_first:
        plan, position, planned = planned_step(plan, state, gateway=gateway, examples=examples)
        if planned:
            return next_step(state, planned, "decomposition", rejected, plan, position)
        rejected += [Rejection(sub_question=q, reason=NO_ASKABLE_STEP) for q in plan]
    unasked = state["question"] not in (state.get("unanswerable") or [])
    if not table and reason == hint("repeats_question") and unasked:
        # Neither the writer nor the decomposition found a smaller first step: a
        # one-hop question is its own sub-question (once: not again after no answer).
        return next_step(state, state["question"], "the question itself", rejected, plan)
    # One more try, told why (and, for a date comparison, what is still missing).
    missing = missing_dates(state["question"], table)
    told = hint("still_unknown", reason=reason, missing=missing) if missing else reason
    retry = [*messages, AIMessage(sub_question), HumanMessage(told)]
    sub_question = clean_sub_question(gateway.invoke(retry, max_tokens=SUB_QUESTION_TOKENS))
    reason = rejection(sub_question, state, own_rules=own_refusals)
    if reason:
        rejected.append(Rejection(sub_question=sub_question, reason=reason))
        return next_step(state, "", "", rejected, plan)
    return next_step(state, sub_question, "writer, told why", rejected, plan)


def next_step(
    state: StepState,
    sub_question: str,
    written_by: str,
    rejected: list[Rejection],
    plan: list[str],
    plan_position: int = -1,
) -> dict[str, Any]:
    """The update that makes this step t+1 and gives it `sub_question` ("" when none
    could be asked). What the last step found is not here to clear: each step runs in a
    hop subgraph of its own (graph/deft.py). A planned step is not asked twice: the guard
    may reword it, and the reworded one alone is listed when it finds nothing."""
    taken = state.get("plan_step", 0)
    return {
        "sub_question": sub_question,
        "written_by": written_by if sub_question else "",
        "rejected": rejected,
        "plan": plan,
        "plan_step": plan_position + 1 if plan_position >= 0 else taken,
        "hop": state.get("hop", 0) + 1,
    }
