"""String rules about questions and sub-questions: how they are normalised and compared,
what names something, what points back, how much of the question a sub-question repeats,
when an answer only echoes its question, yes/no and date questions, plan steps and the
answers put into them, and why a sub-question may not be asked.

The rules on answers alone (normalisation, cleaning, "no answer", whole-word matching)
are in tools/answer_rules.py; date parsing and the comparisons the QA table decides are in
tools/comparison.py. Nodes call these rules; none of them calls a model.

Checks that look alike but differ on some inputs are kept apart, each saying how:
`asks_for_date` (the question opens with "when" or "in what year") against `_WHEN` (a
"what year" anywhere, read as "when" by `answer_kind`); `_POSSESSIVE` (an 's anywhere in
a text, lower-case s only) against `_POSSESSIVE_END` (an 's ending one word, any case);
`echoes_question` (possessive 's dropped) against `tools.answer_rules.says` (kept). The
yes/no question of the reader prompts is `prompts.is_yes_no_question`; the narrower
opener list of `tools.comparison.asks_whether_same_value` differs from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import Stemmer

from app.settings import (
    CACHE_FILLER_WORDS,
    CHAIN_MAX_SUB_QUESTIONS,
    MAX_QUESTION_COVERAGE,
    NAMELESS_MIN_WORDS,
)
from prompts import load_lines, load_words
from tools.answer_rules import contains_words, normalize_answer, says
from tools.comparison import is_date, option_reached
from tools.records import Row

# --- Normalised questions and their words -------------------------------------------

# An 's anywhere in a text, before a word boundary, lower-case s only ("Berg's" and
# "Berg's." lose it, "BERG'S" keeps it): `question_words`.
_POSSESSIVE = re.compile(r"['\u2019]s\b")
_WH_WORD = re.compile(
    r"\b(when|where|why|how many|how much|how old|how|who|whom|whose|what|which)\b"
)
# "what year", "which century", ... anywhere in a question, read as "when" by
# `answer_kind` and `may_share_an_answer`; unlike `asks_for_date` it need not open the
# question and also takes century and decade.
_WHEN = re.compile(r"\b(what|which) (year|date|day|month|century|decade)\b")
_ANSWER_KINDS = frozenset({"when", "where", "why", "how many", "how much", "how old", "how"})
_STEMMER = Stemmer.Stemmer("english")
_ASKS_FOR_DATE = re.compile(r"^(when|(in |on )?(what|which) (year|date|day|month))\b", re.I)
STOP_WORDS = load_words("stop_words")  # spaCy's English list, without loading spaCy


def normalise_question(text: str) -> str:
    """Case and punctuation ignored (SQuAD normalisation)."""
    return normalize_answer(text)


def question_words(text: str) -> list[str]:
    """Normalised words without the possessive 's ("Berg's" is "Berg")."""
    return normalise_question(_POSSESSIVE.sub("", text)).split()


def content_words(text: str) -> set[str]:
    """Normalised words without stop words or possessive 's (`question_words`)."""
    return set(question_words(text)) - STOP_WORDS


def answer_kind(question: str) -> str:
    """What the question's first wh-word asks for: "when" (also "what year"), "where",
    "how many", "how much", "how old", "how", "why", or an entity (who, what, which)."""
    match = _WH_WORD.search(_WHEN.sub("when", question.lower()))
    word = match.group(1) if match else ""
    return word if word in _ANSWER_KINDS else "entity"


def may_share_an_answer(first: str, second: str) -> bool:
    """Whether two sub-questions may share an answer (the QA cache's rule before DM_same):
    the same kind of answer about the same stemmed words, filler aside. Embedding
    similarity and DM_same both took "Where was X born?" for "When was X born?" and "Who
    was the second president of X?" for "Who was the president of X?"; a wrong hit
    poisons the QA table, a miss only costs one retrieval and one reading, so only such
    pairs go on to DM_same. (Not `tools.comparison.asks_whether_same_value`, which asks
    whether one question is a yes/no question about a shared value.)"""

    def terms(question: str) -> frozenset[str]:
        words = question_words(_WHEN.sub("when", question.lower()))
        return frozenset(_STEMMER.stemWords([w for w in words if w not in CACHE_FILLER_WORDS]))

    return answer_kind(first) == answer_kind(second) and terms(first) == terms(second)


def asks_for_date(question: str) -> bool:
    """The question asks when ("When was ...", "In what year ..."): it opens so (unlike
    `_WHEN`, which finds "what year" anywhere)."""
    return bool(_ASKS_FOR_DATE.match(question.strip()))


# --- What names something, what points back -----------------------------------------

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


def names_something(text: str) -> bool:
    """A question (or sub-question) names a thing: a capitalised word after the first, a
    number or a quoted title."""
    return any(
        word[:1].isupper() or word[:1] in "\"\u201c'" or any(c.isdigit() for c in word)
        for word in text.split()[1:]
    )


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


def echoes_question(question: str, answer: str) -> bool:
    """An answer that only repeats a name from its own question ("In which town is Brisk
    Hollow?" -> "Brisk Hollow"; "Who was Arnold Schwarzenegger's wife?" -> "Arnold
    Schwarzenegger") adds nothing. Choice questions ("A or B?") are exempt: there the
    answer is one of the names by design. Words are compared without a possessive 's
    (`question_words`), which `tools.answer_rules.says` keeps."""
    norm_answer = " ".join(question_words(answer))
    norm_question = " ".join(question_words(question))
    if not norm_answer or " or " in f" {norm_question} ":
        return False
    return contains_words(norm_question, norm_answer)


# --- Sub-questions as written, and plans -----------------------------------------------

_LEAD = re.compile(r"^(next question|question|sub-question|q\d*)\s*[:.)-]\s*", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*\d+\s*[.)]\s*(.+)$")
_ANSWER_REFERENCE = re.compile(r"#(\d+)")


def clean_sub_question(text: str) -> str:
    """The first line that looks like a question, without labels or list markers."""
    for line in text.strip().splitlines():
        line = _LEAD.sub("", line.strip().lstrip("-*0123456789. ")).strip().strip('"')
        if line:
            return line if line.endswith("?") else f"{line}?"
    return ""


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


def _relation_pattern() -> re.Pattern[str]:
    names = sorted((k for k in load_lines("relation_chains") if not k.startswith("_")), key=len)
    relation = "|".join(re.escape(name) for name in reversed(names))
    return re.compile(
        rf"^\s*(?:who|what)\s+(?:is|was|are|were)\s+(?:(?:the\s+)?(?P<rel_of>{relation})\s+of"
        rf"\s+(?P<of>.+?)|(?P<owner>.+?)['\u2019]s\s+(?P<rel_s>{relation}))\s*\??\s*$",
        re.IGNORECASE,
    )


_RELATION = _relation_pattern()


def relation_chain(question: str) -> list[str]:
    """The plan of a question about a family relation that chains single ones ("Who is
    X's paternal grandmother?": "Who is the father of X?", then "Who is the mother of
    #1?"; `prompts/relation_chains.json`), else []. The small writer and planner mix the
    links up: a father-in-law asked as the husband's wife, a grandmother answered with
    the mother."""
    match = _RELATION.match(question)
    if not match:
        return []
    relation = (match["rel_of"] or match["rel_s"]).lower()
    subject = (match["of"] or match["owner"]).strip()
    asks = load_lines("relation_questions")
    steps = [step.strip() for step in load_lines("relation_chains")[relation].split(",")]
    return [asks[step].format(s=subject if k == 0 else f"#{k}") for k, step in enumerate(steps)]


def answering_row(question: str, table: Sequence[Row], *, chains: bool = True) -> Row | None:
    """The row whose answer is the question's, needing no LLM_fin: one that asks the
    question itself (a one-hop question asked as it is), or (with `chains`) the last step
    of its relation chain, asked of the person the steps before it found."""
    if itself := next((row for row in table if row["sub_question"] == question), None):
        return itself
    chain = relation_chain(question) if chains else []
    if not chain:
        return None
    last = fill_answers(chain[-1], [row["answer"] for row in table])
    return next((row for row in reversed(table) if row["sub_question"] == last), None)


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


# --- The question with what the table found put in place -------------------------------

_WORD = re.compile(r"[\w'\u2019.-]*\w")
# An 's ending one word, in any case ("Berg's", "BERG'S"): `_word_key`, `answer_in_place`.
_POSSESSIVE_END = re.compile(r"['\u2019]s$", re.IGNORECASE)


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


def with_answers_in_place(question: str, table: Sequence[Row]) -> str:
    """The question with each row's description replaced by its answer, in table order
    (`answer_in_place`): what is left to find. A date is no entity to ask on about, so
    its row is left out ("Were A and 1900 in the same year?" is no question)."""
    for row in table:
        if not is_date(row["answer"]):
            question = answer_in_place(question, row["sub_question"], row["answer"])
    return question


# --- Which sub-question may be asked ---------------------------------------------------


def hint(name: str, **values: str) -> str:
    """A line the writer is told (`prompts/writer_hints.json`)."""
    return load_lines("writer_hints")[name].format(**values)


def too_vague(sub_question: str, question: str, table: Sequence[Row]) -> bool:
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


def rejection(sub_question: str, state: Mapping[str, Any], *, own_rules: bool = True) -> str:
    """Why a sub-question may not be asked (empty: it may), given the run's state (DeFT's:
    its question, QA table and unanswerable sub-questions). One asked before (answered or
    not) is refused, as in the paper; with `own_rules`, also the whole question reworded
    and one too vague to search for."""
    if not sub_question:
        return hint("not_a_question")
    whole = question_coverage(sub_question, state["question"]) >= MAX_QUESTION_COVERAGE
    if own_rules and whole:
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
    if own_rules and too_vague(sub_question, state["question"], table):
        return hint("names_nothing")
    return ""


def next_plan_step(plan: list[str], state: Mapping[str, Any]) -> tuple[int, str]:
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


# --- Final answers ---------------------------------------------------------------------


def as_option(question: str, rows: Sequence[dict[str, Any]], answer: str) -> str:
    """A "which one, A or B?" answer as the option it stands for: the small reader
    often names the compared person ("István Szabó") for the film the question asks
    about (`option_reached`)."""
    return option_reached(question, rows, answer) or answer


def about(passage: dict[str, Any], name: str) -> bool:
    """The passage is about `name`: its title names it, or it names the title."""
    return says(passage["title"], name) or says(name, passage["title"])
