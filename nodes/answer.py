"""Reader nodes: one short-output LLM call, over passages or from the model's memory."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from app.eval.metrics import normalize_answer
from app.llm.gateway import LLMGateway
from app.settings import NAME_CONNECTORS
from graph.state import DeftState, ReadState
from prompts import format_passages, load_prompt, reply_form
from tools.qa_cache import question_words

UNKNOWN = "unknown"
_POSSESSIVE = re.compile(r"['\u2019]s$")
_PREFIX = re.compile(r"^(final answer|answer|a)\s*[:\-]\s*", re.IGNORECASE)


def clean_answer(text: str) -> str:
    """First line of the reply, without an 'Answer:' prefix, quotes or final period."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return UNKNOWN
    answer = _PREFIX.sub("", lines[0]).strip().strip("\"'`*").strip()
    answer = answer[:-1].strip() if answer.endswith(".") else answer
    return answer or UNKNOWN


def is_unknown(answer: str) -> bool:
    """Empty, 'unknown', or a refusal: the rule update records no answer."""
    norm = " ".join(answer.lower().strip(" .!\"'").split())
    return (
        not norm
        or norm.startswith(UNKNOWN)
        or norm in {"none", "n/a", "not mentioned", "not stated", "no answer"}
    )


def echoes_question(question: str, answer: str) -> bool:
    """An answer that only repeats a name from its own question ("In which town is Brisk
    Hollow?" -> "Brisk Hollow"; "Who was Arnold Schwarzenegger's wife?" -> "Arnold
    Schwarzenegger") adds nothing. Choice questions ("A or B?") are exempt: there the
    answer is one of the names by design."""
    norm_answer = " ".join(question_words(answer))
    norm_question = " ".join(question_words(question))
    if not norm_answer or " or " in f" {norm_question} ":
        return False
    return f" {norm_answer} " in f" {norm_question} "


def answered(answer: str) -> dict[str, Any]:
    """The state update that finishes a run (the `reply` node turns it into a message)."""
    return {"answer": answer}


def read_passages(gateway: LLMGateway, question: str, passages: Sequence[dict[str, Any]]) -> str:
    """LLM_ans: a short answer (or "unknown") to a question from the given passages."""
    messages = load_prompt("answer_from_passages").format_messages(
        passages=format_passages(passages), question=question, reply_form=reply_form(question)
    )
    return clean_answer(gateway.invoke(messages))


def answer_from_passages(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    return answered(read_passages(gateway, state["question"], state.get("passages") or []))


def subject_names(question: str) -> list[str]:
    """What a question names: its runs of capitalised words after the first (across the
    lower-case words inside a name, `NAME_CONNECTORS`) and its quoted titles."""
    names: list[str] = []
    run: list[str] = []
    for position, token in enumerate(question.rstrip("?").split()):
        word = _POSSESSIVE.sub("", token.strip("\"'(),.;:\u201c\u201d"))
        if (position and word[:1].isupper()) or (run and word.lower() in NAME_CONNECTORS):
            run.append(word)
            continue
        names.append(" ".join(run))
        run = []
    names.append(" ".join(run))
    names = [" ".join(_trim_connectors(name.split())) for name in names]
    names += re.findall(r'["\u201c]([^"\u201d]+)["\u201d]', question)
    return [name for name in names if normalize_answer(name)]


def _trim_connectors(words: list[str]) -> list[str]:
    while words and words[-1].lower() in NAME_CONNECTORS:
        words = words[:-1]
    return words


def _holds(passage: dict[str, Any], phrase: str) -> bool:
    """The passage as read (title and text) holds the phrase as whole words, both
    SQuAD-normalised."""
    text = normalize_answer(f"{passage['title']} {passage['text']}")
    return f" {normalize_answer(phrase)} " in f" {text} "


def off_subject(
    answer: str, sub_question: str, evidence: Sequence[dict[str, Any]], passed: set[int]
) -> bool:
    """The answer is stated only in passages that did not pass the relevance filter and
    name nothing the sub-question asks about, while a passage that passed was read too:
    the 1.5B reader took a name from the wrong passage ("Who is Jack Clay's employer?" ->
    "Clay Center Township", from that township's passage beside Jack Clay's own)."""
    names = subject_names(sub_question)
    if is_unknown(answer) or not names or not any(p["id"] in passed for p in evidence):
        return False
    stating = [p for p in evidence if _holds(p, answer)]
    return bool(stating) and not any(
        p["id"] in passed or any(_holds(p, name) for name in names) for p in stating
    )


def passed_relevance(state: DeftState) -> set[int]:
    """Passages that passed tau_rel in this step (the filter and the graph walk)."""
    return {
        d["inputs"][0]
        for d in state.get("decisions") or []
        if d["kind"] == "rel" and d["step"] == state.get("hop", 0) and d["outcome"]
    }


def answer_sub_question(state: DeftState, *, gateway: LLMGateway) -> dict[str, Any]:
    """a_t = LLM_ans(q_t, evidence): the kept passages' selected sentences, which count
    as read. An off-subject answer is read again from the passages that passed alone
    (docs/decisions.md, "Off-subject answers")."""
    evidence = state.get("evidence") or []
    sub_question = state["sub_question"]
    answer = read_passages(gateway, sub_question, evidence)
    passed = passed_relevance(state)
    reread: list[dict[str, Any]] = []
    if off_subject(answer, sub_question, evidence, passed):
        reread = [p for p in evidence if p["id"] in passed]
        answer = read_passages(gateway, sub_question, reread)
    return {
        "sub_answer": answer,
        "reread_from": [p["id"] for p in reread],
        "passages": evidence,
    }


def answer_closed_book(state: ReadState, *, gateway: LLMGateway) -> dict[str, Any]:
    messages = load_prompt("answer_closed_book").format_messages(question=state["question"])
    return answered(clean_answer(gateway.invoke(messages)))
