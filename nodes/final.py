"""Final answers: LLM_fin from the QA table alone, or the fallback after T steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from app.eval.metrics import normalize_answer
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import Settings
from graph.state import DeftState
from nodes.answer import answered, clean_answer, echoes_question, is_unknown, read_passages
from nodes.relevance import keep_for_fallback, score_relevance
from nodes.sub_question import content_words, with_answers_in_place
from nodes.sufficiency import asks_the_question, loop_end
from prompts import (
    format_passages,
    format_qa_table,
    is_yes_no_question,
    load_prompt,
    reply_form,
)
from tools.comparison import (
    asks_for_date,
    compare_dates,
    comparison_options,
    is_date,
    option_reached,
    same_value,
    says,
)
from tools.decision import DecisionModel
from tools.evidence import select_sentences
from tools.retriever import Retriever


def decide_comparison(question: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The final-answer update when the rows decide a comparison by rule (which date is
    earlier; whether two chains end in the same answer), else None."""
    comparison = compare_dates(question, rows) or same_value(question, rows)
    if comparison is None:
        return None
    return {
        **answered(comparison["answer"]),
        "comparison": comparison,
        "answer_passage_ids": comparison["passage_ids"],
    }


def answer_from_rows(
    gateway: LLMGateway, question: str, rows: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """LLM_fin: the answer from sub-questions and their answers alone, supported by the
    passages behind them (DeFT's QA table, ChainRAG's AnsInt). A comparison the rows
    decide is answered by rule, without the LLM (tools/comparison.py)."""
    decided = decide_comparison(question, rows)
    if decided:
        return decided
    messages = load_prompt("answer_from_qa_table").format_messages(
        qa_table=format_qa_table(rows), question=question
    )
    support = sorted({pid for row in rows for pid in row["passage_ids"]})
    answer = as_option(question, rows, clean_answer(gateway.invoke(messages)))
    return {**answered(answer), "answer_passage_ids": support}


def as_option(question: str, rows: Sequence[dict[str, Any]], answer: str) -> str:
    """A "which one, A or B?" answer as the option it stands for: the small reader
    often names the compared person ("István Szabó") for the film the question asks
    about (`option_reached`)."""
    return option_reached(question, rows, answer) or answer


def answer_from_qa_table(state: DeftState, *, gateway: LLMGateway) -> dict[str, Any]:
    """LLM_fin, unless a row asked the question itself: its answer is the answer. An
    LLM_fin answer that is a bridge of the chain gives way to what the chain found past
    it (`past_the_bridge`)."""
    table = state.get("qa_table") or []
    question = state["question"]
    itself = next((row for row in table if asks_the_question(row, question)), None)
    if itself:
        return {**answered(itself["answer"]), "answer_passage_ids": itself["passage_ids"]}
    update = answer_from_rows(gateway, question, table)
    if "comparison" in update:
        return update
    later = past_the_bridge(question, table, update["answer"])
    if later is None:
        return update
    bridge = {"answer": update["answer"], "sub_question": later["sub_question"]}
    return {**update, **answered(later["answer"]), "past_the_bridge": bridge}


def past_the_bridge(
    question: str, rows: Sequence[dict[str, Any]], answer: str
) -> dict[str, Any] | None:
    """The row that asked on about `answer` when `answer` is a bridge of the chain: a row
    answered it, and a later row asked about it in the question's own words ("Who did
    Abraham marry after the death of Sarah?" after "Who was the founder of three major
    monotheistic religions?" gave Abraham). The 1.5B LLM_fin often names the bridge;
    what the question asks for is that later row's answer. None for choice and yes/no
    questions, a later answer the question states or an earlier row gave (a loop), and a
    date the question does not ask for (a row that checked a detail of the answer)."""
    norm = normalize_answer(answer)
    if not norm or comparison_options(question) or is_yes_no_question(question):
        return None
    answers = [normalize_answer(row["answer"]) for row in rows]
    if norm not in answers:
        return None
    asked = content_words(question)
    later = [
        row
        for row in rows[answers.index(norm) + 1 :]
        if says(row["sub_question"], answer)
        and content_words(row["sub_question"]) - content_words(answer) <= asked
    ]
    if not later:
        return None
    row = later[-1]
    found = normalize_answer(row["answer"])
    looped = any(
        other and (found in other or other in found)
        for other, earlier in zip(answers, rows, strict=True)
        if earlier is not row
    )
    stated = says(question, row["answer"])
    off_date = is_date(row["answer"]) and not asks_for_date(question)
    if not found or is_unknown(row["answer"]) or looped or stated or off_date:
        return None
    return row


def read_facts_and_passages(
    gateway: LLMGateway,
    question: str,
    rows: Sequence[dict[str, Any]],
    passages: Sequence[dict[str, Any]],
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


def about(passage: dict[str, Any], name: str) -> bool:
    """The passage is about `name`: its title names it, or it names the title."""
    return says(passage["title"], name) or says(name, passage["title"])


def read_past_an_echo(
    gateway: LLMGateway,
    question: str,
    asked: str,
    rows: Sequence[dict[str, Any]],
    passages: Sequence[dict[str, Any]],
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


def fallback_reason(state: DeftState, max_steps: int) -> str:
    """Why the loop handed over to the fallback, for the trace: the three routes into it
    (`route_after_final_answer`, `route_after_sub_question`, `route_after_sufficiency`)."""
    if state.get("sufficient"):
        return "LLM_fin found no answer in the table"
    if not state.get("sub_question"):
        return "no sub-question could be asked"
    return loop_end(state, max_steps)


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
    reason = fallback_reason(state, settings.max_steps)
    decided = decide_comparison(state["question"], table)
    if decided:
        return {**decided, "fallback_reason": reason}
    question = with_answers_in_place(state["question"], table)
    passages = [p.as_dict() for p in retriever.retrieve(question, settings.fallback_k)]
    scores, decisions = score_relevance(
        dm, question, passages, settings, state.get("hop", 0), whole_question=True
    )
    kept = select_sentences(
        dm,
        index,
        question,
        keep_for_fallback(
            passages, scores, settings.tau_rel, settings.top_k, settings.fallback_extra
        ),
        settings.final_read_words,
        every_passage=True,
    )
    answer, echo = read_past_an_echo(
        gateway,
        question,
        state["question"],
        table,
        kept,
        read_facts_and_passages(gateway, question, table, kept),
    )
    support = {pid for row in table for pid in row["passage_ids"]} | {p["id"] for p in kept}
    return {
        **answered(as_option(state["question"], table, answer)),
        "fallback_question": question,
        "fallback_reason": reason,
        "passages": kept,
        "decisions": decisions,
        "answer_passage_ids": sorted(support),
        **({"echoed_answer": echo} if echo else {}),
    }
