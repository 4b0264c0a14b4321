"""A comparison's next steps, one per option, asked at once (issue 53, item 2).

"Which film came out first, A or B?" needs the same fact of A and of B, and neither
lookup waits for the other: the turn sends one hop subgraph per option in parallel
(graph/deft.py), and the embedded server answers them in its parallel slots. The
writer is asked once, as a step would ask it; its sub-question names one option's
frontier (the option, or the name its chain of rows has reached: "Who directed A?"
then "When was Tom Clegg born?"), and the same sub-question about every other
option's frontier goes to that option's branch (tools/comparison.py,
`option_frontiers`, `for_each_option`). Where the chains are not equally long (one
option's step found nothing), or a branch would pass the step limit, nothing is
written here and the hop's own writer takes one step, with its retries and plan. A
sub-question that names no single frontier is still asked, by one branch, rather than
written again.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.llm.gateway import LLMGateway
from app.settings import SUB_QUESTION_TOKENS, Settings
from graph.state import DeftState
from tools.comparison import compared_options, for_each_option, option_frontiers
from tools.examples import ExampleBank
from tools.planning import writer_messages
from tools.question_rules import clean_sub_question, rejection
from tools.records import note


def write_option_sub_questions(
    state: DeftState, runtime: Runtime[Settings], *, gateway: LLMGateway, examples: ExampleBank
) -> dict[str, Any]:
    table = state.get("qa_table") or []
    frontiers = option_frontiers(compared_options(state["question"]), table)
    steps_left = Settings.of(runtime).max_steps - state.get("hop", 0)
    if frontiers is None or len(frontiers) > steps_left:
        return {"branches": []}
    messages = writer_messages(state["question"], table, state.get("unanswerable") or [], examples)
    sub_question = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    if rejection(sub_question, state):
        return {"branches": []}  # the hop's writer tries again, told why
    branches = for_each_option(sub_question, frontiers)
    if not branches or any(rejection(q, state) for q in branches):
        branches = [sub_question]
    shown = " | ".join(branches)
    return {"branches": branches, "notes": [note("fan_out", f"{len(branches)} branches: {shown}")]}
