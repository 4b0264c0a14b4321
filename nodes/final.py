"""Final answers: LLM_fin from the QA table alone, or the fallback after T steps (the rules
they apply: tools/question_rules.py; reading: tools/reading.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import Settings
from graph.state import DeftState
from prompts import format_passages, format_qa_table, load_prompt, reply_form
from tools.answer_rules import clean_answer, is_unknown
from tools.decision import DecisionModel
from tools.evidence import read_within
from tools.question_rules import (
    about,
    answering_row,
    as_option,
    echoes_question,
    with_answers_in_place,
)
from tools.reading import answer_from_rows, answered, decide_comparison, read_passages
from tools.records import Passage, Row, note
from tools.relevance import keep_for_fallback, keep_relevant, score_relevance
from tools.retriever import Retriever
from tools.step_limits import loop_end


def answer_from_qa_table(
    state: DeftState, runtime: Runtime[Settings] | None = None, *, gateway: LLMGateway
) -> dict[str, Any]:
    """LLM_fin, unless a row asked the question itself or the last step of its relation
    chain (`answering_row`): its answer is the answer."""
    settings = Settings.of(runtime)
    table = state.get("qa_table") or []
    question = state["question"]
    chains = settings.rule("relation_chains")
    itself = settings.rule("sufficiency_rules") and answering_row(question, table, chains=chains)
    if itself:
        return {**answered(itself["answer"]), "answer_passage_ids": itself["passage_ids"]}
    return answer_from_rows(gateway, question, table, by_rule=settings.rule("comparison_rules"))


def read_facts_and_passages(
    gateway: LLMGateway,
    question: str,
    rows: Sequence[Row],
    passages: Sequence[Passage],
) -> str:
    """The fallback's one reading: the passages, with the QA table's rows when it has any
    (facts found but judged insufficient would otherwise be lost)."""
    if not rows:
        return read_passages(gateway, question, passages)
    messages = load_prompt("answer_from_facts_and_passages").format_messages(
        qa_table=format_qa_table(rows),
        passages=format_passages(passages),
        question=question,
        reply_form=reply_form(question),
    )
    return clean_answer(gateway.invoke(messages))


def read_past_an_echo(
    gateway: LLMGateway,
    question: str,
    asked: str,
    rows: Sequence[Row],
    passages: Sequence[Passage],
    answer: str,
) -> tuple[str, str]:
    """(the answer, the echo it replaced or ""). A fallback answer that only repeats a
    name of the question it read or the one asked ("Who married Arnold Schwarzenegger?"
    -> "Arnold Schwarzenegger") answers nothing; the passages about that name drew the
    small reader to it, so it reads once more without them. The first answer stays when
    no passage was about the name (the same read would give it again) or when the second
    read finds none or echoes too (docs/decisions.md, "Fallback answers that repeat
    their question")."""

    def echoes(text: str) -> bool:
        return echoes_question(question, text) or echoes_question(asked, text)

    if is_unknown(answer) or not echoes(answer):
        return answer, ""
    others = [p for p in passages if not about(p, answer)]
    if not others or len(others) == len(passages):
        return answer, ""
    again = read_facts_and_passages(gateway, question, rows, others)
    return (answer, "") if is_unknown(again) or echoes(again) else (again, answer)


def fallback_reason(state: DeftState, max_steps: int, *, dead_ends: bool = True) -> str:
    """Why the loop handed over to the fallback, for the trace: the three routes into it
    (`route_after_final_answer`, `route_after_sub_question`, `route_after_sufficiency`)."""
    if state.get("sufficient"):
        return "LLM_fin found no answer in the table"
    if not state.get("sub_question"):
        return "no sub-question could be asked"
    return loop_end(state, max_steps, dead_ends=dead_ends)


def fallback_answer(
    state: DeftState,
    runtime: Runtime[Settings],
    *,
    retriever: Retriever,
    dm: DecisionModel,
    gateway: LLMGateway,
    index: CorpusIndex,
) -> dict[str, Any]:
    """After T steps, or when the writer has nothing new to ask: retrieve 2w passages for
    Q, keep the retrieval top_k plus the lower-ranked ones DM_rel passes, and answer Q in
    one call from their best sentences, with the QA table's rows; a date comparison the
    rows decide needs no reading at all. Q is searched and read with the descriptions the
    table resolved put in place ("What institute did Mel Gibson attend?" for "... the
    actor playing the voice of John Smith in Pocahontas ..."): the small reader otherwise
    answers with the bridge, and the search finds the passages about the description."""
    table = state.get("qa_table") or []
    settings = Settings.of(runtime)
    by_rule, extras = settings.rule("comparison_rules"), settings.rule("fallback_extras")
    reason = fallback_reason(state, settings.max_steps, dead_ends=settings.rule("dead_end_endings"))
    notes = [note("fallback_reason", reason)]
    decided = decide_comparison(state["question"], table) if by_rule else None
    if decided:
        return {**decided, "notes": notes}
    question = with_answers_in_place(state["question"], table) if extras else state["question"]
    passages = [p.as_dict() for p in retriever.retrieve(question, settings.fallback_k)]
    scores, decisions = score_relevance(
        dm, question, passages, settings, state.get("hop", 0), whole_question=True
    )
    head, extra = settings.top_k, settings.fallback_extra
    chosen = (
        keep_for_fallback(passages, scores, settings.tau_rel, head, extra)
        if extras
        else keep_relevant(passages, scores, settings.tau_rel, head + extra, head)
    )
    kept = read_within(dm, index, question, chosen, settings)
    rows = table if extras else []
    answer = read_facts_and_passages(gateway, question, rows, kept)
    echo = ""
    if extras:
        answer, echo = read_past_an_echo(gateway, question, state["question"], rows, kept, answer)
    support = {pid for row in table for pid in row["passage_ids"]} | {p["id"] for p in kept}
    notes.append(note("fallback_question", question))
    if echo:
        notes.append(note("echoed_answer", f"{echo!r} only repeated a name: read again"))
    return {
        **answered(as_option(state["question"], table, answer) if by_rule else answer),
        "passages": kept,
        "decisions": decisions,
        "answer_passage_ids": sorted(support),
        "notes": notes,
    }
