"""Reading passages and answering from them: LLM_ans over passages, LLM_fin over the QA
table's rows (a comparison the rows decide by rule needs no reading), the sentences a
reading budget allows, and the state update that finishes a run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from app.llm.gateway import LLMGateway
from prompts import format_passages, format_qa_table, load_prompt, reply_form
from tools.answer_rules import clean_answer
from tools.comparison import compare_dates, same_value
from tools.question_rules import as_option

if TYPE_CHECKING:
    from tools.sentence_graph import GraphSentence


def answered(answer: str) -> dict[str, Any]:
    """The state update that finishes a run (the `reply` node turns it into a message)."""
    return {"answer": answer}


def read_passages(gateway: LLMGateway, question: str, passages: Sequence[dict[str, Any]]) -> str:
    """LLM_ans: a short answer (or "unknown") to a question from the given passages."""
    messages = load_prompt("answer_from_passages").format_messages(
        passages=format_passages(passages), question=question, reply_form=reply_form(question)
    )
    return clean_answer(gateway.invoke(messages))


def as_passages(sentences: Sequence[GraphSentence | dict[str, Any]]) -> list[dict[str, Any]]:
    """Sentences grouped by passage (in corpus order within it): what is read."""
    by_passage: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in sentences:
        row = s if isinstance(s, dict) else asdict(s)
        by_passage[row["passage_id"]].append(row)
    return [
        {
            "id": pid,
            "title": group[0]["title"],
            "text": " ".join(s["text"] for s in sorted(group, key=lambda s: s["id"])),
        }
        for pid, group in by_passage.items()
    ]


def best_within(
    sentences: Sequence[GraphSentence], scores: Sequence[float], budget: int
) -> list[GraphSentence]:
    """Highest score first, as many as fit in `budget` words (at least one)."""
    ranked = [s for _, s in sorted(zip(scores, sentences, strict=True), key=lambda x: -x[0])]
    chosen, words = [], 0
    for s in ranked:
        size = len(s.text.split())
        if chosen and words + size > budget:
            break
        chosen.append(s)
        words += size
    return chosen


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
    gateway: LLMGateway, question: str, rows: Sequence[dict[str, Any]], *, by_rule: bool = True
) -> dict[str, Any]:
    """LLM_fin: the answer from sub-questions and their answers alone, supported by the
    passages behind them (DeFT's QA table, ChainRAG's AnsInt). With `by_rule`, a
    comparison the rows decide is answered by rule, without the LLM, and an answer naming
    neither option becomes the option its rows reached (tools/comparison.py)."""
    decided = decide_comparison(question, rows) if by_rule else None
    if decided:
        return decided
    messages = load_prompt("answer_from_qa_table").format_messages(
        qa_table=format_qa_table(rows), question=question
    )
    support = sorted({pid for row in rows for pid in row["passage_ids"]})
    answer = clean_answer(gateway.invoke(messages))
    answer = as_option(question, rows, answer) if by_rule else answer
    return {**answered(answer), "answer_passage_ids": support}
