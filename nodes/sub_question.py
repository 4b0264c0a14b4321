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

With `sub_questions = "plan"` the decomposition is made at the first step, before any
writer call, and gives each next sub-question the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from app.llm.gateway import LLMGateway
from app.settings import (
    CACHE_FILLER_WORDS,
    CHAIN_MAX_SUB_QUESTIONS,
    MAX_QUESTION_COVERAGE,
    NAMELESS_MIN_WORDS,
    PLAN_TOKENS,
    SUB_QUESTION_TOKENS,
    WRITER_EXAMPLES,
    Settings,
)
from graph.state import DeftState, QARow
from prompts import load_lines, load_prompt, load_words
from tools.comparison import asks_for_date, is_date, missing_dates
from tools.examples import ExampleBank, render_steps
from tools.qa_cache import normalise_question, question_words

_LEAD = re.compile(r"^(next question|question|sub-question|q\d*)\s*[:.)-]\s*", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*\d+\s*[.)]\s*(.+)$")
_ANSWER_REFERENCE = re.compile(r"#(\d+)")
STOP_WORDS = load_words("stop_words")  # spaCy's English list, without loading spaCy
_WORD = re.compile(r"[\w'\u2019.-]*\w")
_POSSESSIVE_END = re.compile(r"['\u2019]s$", re.IGNORECASE)
NO_ASKABLE_STEP = "no askable step"  # the trace's reason for a planned step not asked


_PRONOUN = r"\b(he|she|it|they|him|her|his|hers|its|their|theirs|them)\b"
_POINTER = (
    r"\b(this|these|those)\s+(?!is\b|was\b|are\b|were\b)(?-i:[a-z]+)\b"  # "this area"
    r"|\b(that|the same|said)\s+(author|writer|person|man|woman|"
    r"city|town|country|company|film|movie|band|album|book|novel|song|team|place|"
    r"university|college|school|river|state|show|series|director|singer|actor|"
    r"actress|player|artist|group|organization|organisation|entity|one)\b"
)
_DESCRIPTION = r"\bthe (above|aforementioned|previous|former|latter)\b"
BACK_REFERENCE = re.compile(f"{_PRONOUN}|{_POINTER}|{_DESCRIPTION}", re.IGNORECASE)


def has_back_reference(sub_question: str) -> bool:
    """It points back ("he", "that city", "the latter") instead of naming the entity."""
    return bool(BACK_REFERENCE.search(sub_question))


def clean_sub_question(text: str) -> str:
    """The first line that looks like a question, without labels or list markers."""
    for line in text.strip().splitlines():
        line = _LEAD.sub("", line.strip().lstrip("-*0123456789. ")).strip().strip('"')
        if line:
            return line if line.endswith("?") else f"{line}?"
    return ""


def hint(name: str, **values: str) -> str:
    """A line the writer is told (`prompts/writer_hints.json`)."""
    return load_lines("writer_hints")[name].format(**values)


def render_forbidden(unanswerable: list[str]) -> str:
    if not unanswerable:
        return ""
    return hint("forbidden", listed="\n".join(f"- {q}" for q in unanswerable))


def parse_plan(text: str) -> list[str]:
    """Numbered lines as sub-questions, in order, without repeats, at most the cap."""
    plan: list[str] = []
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match:
            question = clean_sub_question(match.group(1))
            if question and question not in plan:
                plan.append(question)
    return plan[:CHAIN_MAX_SUB_QUESTIONS]


def plan_sub_questions(question: str, *, gateway: LLMGateway, examples: ExampleBank) -> list[str]:
    """The whole decomposition in one LLM call, "#k" standing for the answer to step k."""
    messages = load_prompt("decompose_question").format_messages(
        examples=examples.render_decompositions(question, WRITER_EXAMPLES), question=question
    )
    return parse_plan(gateway.invoke(messages, max_tokens=PLAN_TOKENS))


def fill_answers(step: str, answers: list[str]) -> str:
    """A plan step with "#k" replaced by the k-th answer where there is one (an empty
    answer stands for a step that found none). A step that asks when is not given a date
    to ask about: the 1.5B model's plans often point such a step at the wrong answer
    ("When was #2 born?" with #2 the first director's birth date, where #3, the second
    director, was meant), and "When was 1892 born?" finds nothing. There the latest
    answer that is not a date is meant; with none, "#k" stays."""
    date_question = asks_for_date(step)

    def answer(match: re.Match[str]) -> str:
        k = int(match.group(1))
        if not 0 < k <= len(answers) or not answers[k - 1]:
            return match.group(0)
        if date_question and is_date(answers[k - 1]):
            return next((a for a in reversed(answers) if a and not is_date(a)), match.group(0))
        return answers[k - 1]

    return _ANSWER_REFERENCE.sub(answer, step)


def needs_answer(step: str) -> bool:
    """A plan step still waiting for an earlier answer ("#2")."""
    return bool(_ANSWER_REFERENCE.search(step))


def content_words(text: str) -> set[str]:
    """Normalised words without stop words or possessive 's (`question_words`)."""
    return set(question_words(text)) - STOP_WORDS


def relation_words(question: str) -> set[str]:
    """The question's content words outside its names (capitalised words after the
    first): what it asks, not whom it asks about."""
    names = " ".join(word for word in question.split()[1:] if word[:1].isupper())
    return content_words(question) - content_words(names) or content_words(question)


def question_coverage(sub_question: str, question: str) -> float:
    """How much of the question the sub-question repeats: the smaller of its share of
    the question's content words and of its relation words. "Who is the father of X?"
    covers half of "Who is the paternal grandfather of X?" and is a fine first step; so
    is "Who is the spouse of Princess Elisabeth, Duchess of Hohenberg?" for her
    father-in-law, although the long name makes up most of the words. A rewording of the
    whole question covers nearly all of both."""
    words = content_words(sub_question)
    shares = [
        len(words & wanted) / len(wanted)
        for wanted in (content_words(question), relation_words(question))
        if wanted
    ]
    return min(shares, default=0.0)


def _word_key(word: str) -> str:
    """A word compared without case, punctuation or a possessive 's ("Berg's" is "berg")."""
    return re.sub(r"\W|_", "", _POSSESSIVE_END.sub("", word).lower())


def answer_in_place(question: str, sub_question: str, answer: str) -> str:
    """The question with the description that an answered sub-question asked about
    replaced by its answer: "What film features Anil Devgan's sibling?" with "Who is Anil
    Devgan's sibling?" answered "Ajay Devgan" reads "What film features Ajay Devgan?".
    The description is the longest word run the two share that holds every word of the
    sub-question but its filler, names something (a capitalised word after the first) and
    is neither the question's opening nor all of it. Unchanged when there is none."""
    words = list(_WORD.finditer(question))
    keys = [_word_key(w.group()) for w in words]
    sub_keys = [_word_key(w) for w in _WORD.findall(sub_question)]
    needed = set(sub_keys) - CACHE_FILLER_WORDS
    best: tuple[int, int] = (0, 0)  # (start, end) of the chosen run of question words
    run = [0] * (len(sub_keys) + 1)  # common run lengths ending at the current word
    for i, key in enumerate(keys, 1):
        previous, run = run, [0] * (len(sub_keys) + 1)
        for j, sub_key in enumerate(sub_keys, 1):
            if key != sub_key:
                continue
            run[j] = previous[j - 1] + 1
            start = i - run[j]
            names = any(w.group()[:1].isupper() for w in words[max(start, 1) : i])
            longer = run[j] > best[1] - best[0] and start > 0 and run[j] < len(words)
            if longer and names and needed <= set(keys[start:i]):
                best = (start, i)
    start, end = best
    if end - start < 2:
        return question
    possessive = _POSSESSIVE_END.search(words[end - 1].group())
    replacement = answer + ("'s" if possessive else "")
    return question[: words[start].start()] + replacement + question[words[end - 1].end() :]


def with_answers_in_place(question: str, table: Sequence[QARow]) -> str:
    """The question with each row's description replaced by its answer, in table order
    (`answer_in_place`): what is left to find. A date is no entity to ask on about, so
    its row is left out ("Were A and 1900 in the same year?" is no question)."""
    for row in table:
        if not is_date(row["answer"]):
            question = answer_in_place(question, row["sub_question"], row["answer"])
    return question


def names_something(text: str) -> bool:
    """A question (or sub-question) names a thing: a capitalised word after the first, a
    number or a quoted title."""
    return any(
        word[:1].isupper() or word[:1] in "\"\u201c'" or any(c.isdigit() for c in word)
        for word in text.split()[1:]
    )


def too_vague(sub_question: str, question: str, table: Sequence[QARow]) -> bool:
    """It names nothing and says too little to find it by ("What is the name of the
    college?", "When was the playwright born?"): the method's sub-questions name every
    entity they ask about. A description as full as the question's own ("Who was the
    player with the most league sacks?") may be asked; so may a step that points back
    once the table can name what it points to (the guard rewrites it). A question typed
    all in lower case gives no names to tell apart, and its steps are not judged."""
    if not names_something(question) or names_something(sub_question):
        return False
    if table and has_back_reference(sub_question):
        return False
    return len(content_words(sub_question)) < NAMELESS_MIN_WORDS


def rejection(sub_question: str, state: DeftState) -> str:
    """Why a sub-question may not be asked (empty: it may). The whole question, reworded,
    is no sub-question; neither is one asked before (answered or not), nor one too vague
    to search for."""
    if not sub_question:
        return hint("not_a_question")
    if question_coverage(sub_question, state["question"]) >= MAX_QUESTION_COVERAGE:
        return hint("repeats_question")
    asked = normalise_question(sub_question)
    table = state.get("qa_table") or []
    for row in table:
        if normalise_question(row["sub_question"]) == asked:
            # Small writers copy the last step; the question with what the table found
            # put in place points them onwards.
            reduced = with_answers_in_place(state["question"], table)
            if reduced != state["question"]:
                return hint("answered_in_place", answer=row["answer"], reduced=reduced)
            return hint("answered", answer=row["answer"])
    if asked in {normalise_question(q) for q in state.get("unanswerable") or []}:
        return hint("unanswerable")
    if too_vague(sub_question, state["question"], table):
        return hint("names_nothing")
    return ""


def next_plan_step(plan: list[str], state: DeftState) -> tuple[int, str]:
    """The plan's first step past those the table has answered and those asked before,
    with the table's answers put in for "#k", that needs no answer still missing and
    passes `rejection`; with its position (-1 and "" when there is none). Before any
    answer a step that points back ("that player") cannot be asked either; later the
    guard names what it points to."""
    table = state.get("qa_table") or []
    answers = [row["answer"] for row in table]
    start = max(len(table), state.get("plan_step", 0))
    for position, step in enumerate(plan[start:], start):
        filled = fill_answers(step, answers)
        if needs_answer(filled) or (not table and has_back_reference(filled)):
            continue
        if not rejection(filled, state):
            return position, filled
    return -1, ""


def planned_step(
    plan: list[str], state: DeftState, *, gateway: LLMGateway, examples: ExampleBank
) -> tuple[list[str], int, str]:
    """The decomposition (made on first need: once per question) and the position and
    text of its next askable step (-1, "" when none is)."""
    plan = plan or plan_sub_questions(state["question"], gateway=gateway, examples=examples)
    return plan, *next_plan_step(plan, state)


def found_no_answer(state: DeftState) -> bool:
    """The step just taken found no answer: its sub-question is listed unanswerable."""
    sub_question = state.get("sub_question")
    return bool(sub_question) and sub_question in (state.get("unanswerable") or [])


def write_sub_question(
    state: DeftState, runtime: Runtime[Settings], *, gateway: LLMGateway, examples: ExampleBank
) -> dict[str, Any]:
    plan = state.get("plan") or []
    if plan or Settings.of(runtime).sub_questions == "plan" or found_no_answer(state):
        plan, position, planned = planned_step(plan, state, gateway=gateway, examples=examples)
        if planned:
            return next_step(state, planned, "decomposition", [], plan, position)
    table = state.get("qa_table") or []
    messages = load_prompt("write_sub_question").format_messages(
        examples=examples.render(state["question"], WRITER_EXAMPLES),
        question=state["question"],
        known=render_steps([(row["sub_question"], row["answer"]) for row in table]),
        forbidden=render_forbidden(state.get("unanswerable") or []),
    )
    sub_question = clean_sub_question(gateway.invoke(messages, max_tokens=SUB_QUESTION_TOKENS))
    reason = rejection(sub_question, state)
    if not reason:
        return next_step(state, sub_question, "writer", [], plan)
    # The plan's next step first: made once per question, it costs no call once made.
    rejected = [{"sub_question": sub_question, "reason": reason}]
    plan, position, planned = planned_step(plan, state, gateway=gateway, examples=examples)
    if planned:
        return next_step(state, planned, "decomposition", rejected, plan, position)
    rejected += [{"sub_question": q, "reason": NO_ASKABLE_STEP} for q in plan]
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
    reason = rejection(sub_question, state)
    if reason:
        rejected.append({"sub_question": sub_question, "reason": reason})
        return next_step(state, "", "", rejected, plan)
    return next_step(state, sub_question, "writer, told why", rejected, plan)


def next_step(
    state: DeftState,
    sub_question: str,
    written_by: str,
    rejected: list[dict[str, str]],
    plan: list[str],
    plan_position: int = -1,
) -> dict[str, Any]:
    """The update that starts step t+1 with `sub_question` ("" when none could be
    asked) and clears what the previous step found. A planned step is not asked twice:
    the guard may reword it, and the reworded one alone is listed when it finds nothing."""
    taken = state.get("plan_step", 0)
    return {
        "sub_question": sub_question,
        "written_by": written_by if sub_question else "",
        "rejected": rejected,
        "plan": plan,
        "plan_step": plan_position + 1 if plan_position >= 0 else taken,
        "hop": state.get("hop", 0) + 1,
        "rewritten_from": "",
        "cache_hit": None,
        "retrieved": [],
        "kept": [],
        "evidence": [],
        "relevant_found": False,
        "expansion": None,
        "sub_answer": "",
    }
