"""Rule update of the QA table (no model call): an answer extends the table and the cache;
no answer, or one that only repeats a name from the sub-question or from the question
itself, marks the sub-question unanswerable: a step finds what the question does not
name ("Search for the Gods" for the other film its cast member plays in)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.settings import Settings
from graph.state import StepState
from tools.answer_rules import is_unknown
from tools.qa_cache import QACache
from tools.question_rules import echoes_question
from tools.records import Row


def update_qa_table(
    state: StepState, runtime: Runtime[Settings] | None = None, *, cache: QACache | None
) -> dict[str, Any]:
    sub_question = state.get("sub_question") or ""
    if not sub_question:
        return {}  # the step produced no new question
    hit = state.get("cache_hit")
    if hit:
        row = Row(
            sub_question=sub_question,
            answer=hit["answer"],
            passage_ids=list(hit["passage_ids"]),
            source="cache",
        )
        return {"qa_table": [row]}
    answer = state.get("sub_answer") or ""
    echoed = Settings.of(runtime).rule("answer_echoes") and (
        echoes_question(sub_question, answer) or echoes_question(state["question"], answer)
    )
    if is_unknown(answer) or echoed:
        return {"unanswerable": [sub_question]}
    passage_ids = [p["id"] for p in state.get("kept") or []]
    if cache is not None:
        cache.put(sub_question, answer, passage_ids)
    return {
        "qa_table": [
            Row(
                sub_question=sub_question,
                answer=answer,
                passage_ids=passage_ids,
                source="retrieved",
            )
        ]
    }
