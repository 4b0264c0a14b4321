"""The string rules about questions and answers (tools/question_rules.py,
tools/answer_rules.py), one parametrised test each: the examples that motivated a rule
and the counter-examples that bound it. The rules the QA table's comparisons decide by
are tested in test_comparison.py."""

from __future__ import annotations

from typing import Any

import pytest

from app.settings import MAX_QUESTION_COVERAGE
from prompts import is_yes_no_question
from tools.answer_rules import (
    UNKNOWN,
    clean_answer,
    contains_words,
    final_answer_in,
    is_unknown,
    normalize_answer,
    says,
)
from tools.comparison import asks_whether_same_value
from tools.question_rules import (
    _word_key,
    about,
    answer_in_place,
    answer_kind,
    answering_row,
    as_option,
    asks_for_date,
    clean_sub_question,
    content_words,
    echoes_question,
    fill_answers,
    has_back_reference,
    hint,
    may_share_an_answer,
    names_something,
    needs_answer,
    next_plan_step,
    normalise_question,
    parse_plan,
    question_coverage,
    question_words,
    rejection,
    relation_chain,
    relation_words,
    too_vague,
    with_answers_in_place,
)


def _row(sub_question: str, answer: str, pid: int = 1) -> dict[str, Any]:
    return {"sub_question": sub_question, "answer": answer, "passage_ids": [pid]}


DUNE = "Where was the director of Dune born?"
DIRECTOR = _row("Who is the director of Dune?", "Denis Villeneuve", 1)
BIRTHPLACE = _row("Where was Denis Villeneuve born?", "Trois-Rivières", 2)
# A date comparison whose table reaches both options through their directors.
CHOICE = "Which film has the director born first, The Inside Man or Dog's Heart?"
BRIDGE = [
    _row("Who directed The Inside Man?", "Tom Clegg", 1),
    _row("When was Tom Clegg born?", "1934", 2),
    _row("Who directed Dog's Heart?", "Alberto Lattuada", 3),
    _row("When was Alberto Lattuada born?", "15 October 1914", 4),
]


# --- tools/answer_rules.py ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel-Tower!", "eiffeltower"),  # punctuation goes, words it joined stay one
        ("An apple, a pear and THE plum.", "apple pear and plum"),
        ("Theatre", "theatre"),  # an article only as a whole word
        ("  ", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "phrase", "expected"),
    [
        ("new york city", "york", True),
        ("new york city", "new york city", True),
        ("new yorker", "york", False),  # part of a word is no match
        ("a b", "", False),  # an empty phrase occurs nowhere
    ],
)
def test_contains_words(text: str, phrase: str, expected: bool) -> None:
    assert contains_words(text, phrase) is expected


@pytest.mark.parametrize(
    ("text", "phrase", "expected"),
    [
        ("Who directed The Inside Man?", "the inside man", True),  # case, articles aside
        ("Who was Arnold Schwarzenegger's wife?", "Arnold Schwarzenegger's", True),
        # The possessive 's stays part of its word (unlike in `echoes_question`).
        ("Who was Arnold Schwarzenegger's wife?", "Arnold Schwarzenegger", False),
        ("Who was Arnold Schwarzenegger's wife?", "Arnold", True),
        ("Who was Arnold Schwarzenegger's wife?", "Arnie", False),
        ("Who was Arnold Schwarzenegger's wife?", "?", False),  # nothing left to find
    ],
)
def test_says(text: str, phrase: str, expected: bool) -> None:
    assert says(text, phrase) is expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('Answer: "Paris".', "Paris"),  # prefix, quotes, and a period after the quote
        ("final answer - Dune\nmore lines", "Dune"),  # the first line only
        ("A: 1892.", "1892"),
        ("Mr. Smith Jr.", "Mr. Smith Jr"),  # only the final period goes
        ("The answer is Paris.", "The answer is Paris"),  # no label: kept as written
        ("", UNKNOWN),
        ('"".', UNKNOWN),
    ],
)
def test_clean_answer(reply: str, expected: str) -> None:
    assert clean_answer(reply) == expected


@pytest.mark.parametrize(
    ("thought", "expected"),
    [
        ("X was born in 1900, so the answer is: 1900.", "1900"),
        ("So the answer is Paris", "Paris"),
        ("The answer is Paris.", None),  # the iterative baseline's closing words only
        ("so the answer is", None),
    ],
)
def test_final_answer_in(thought: str, expected: str | None) -> None:
    assert final_answer_in(thought) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("unknown", True),
        ("Unknown.", True),
        ("'unknown'", True),
        ("unknown - the passages do not say", True),
        ("", True),
        ("None", True),
        ("n/a", True),
        ("Not mentioned", True),
        ("Paris", False),
        ("No", False),  # a yes/no answer is an answer
        ("nobody", False),
    ],
)
def test_is_unknown(answer: str, expected: bool) -> None:
    assert is_unknown(answer) is expected


# --- tools/question_rules.py: normalised questions ---------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Who directed  THE Dune?", "who directed dune"),
        ("who directed dune", "who directed dune"),
    ],
)
def test_normalise_question(text: str, expected: str) -> None:
    assert normalise_question(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Berg's films", ["berg", "films"]),
        ("Berg\u2019s", ["berg"]),
        ("BERG'S films", ["bergs", "films"]),  # an upper-case 'S is no possessive here
    ],
)
def test_question_words(text: str, expected: list[str]) -> None:
    assert question_words(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Who is the father of Berg's wife?", {"father", "berg", "wife"}),
        ("Who is the father of X?", {"father", "x"}),
        ("Who is it?", set()),
    ],
)
def test_content_words(text: str, expected: set[str]) -> None:
    assert content_words(text) == expected


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When was X born?", "when"),
        ("What year did X die?", "when"),
        ("Which century was X built in?", "when"),
        ("Where is X?", "where"),
        ("How many children did X have?", "how many"),
        ("How old is X?", "how old"),
        ("How did X die?", "how"),
        ("Why did X leave?", "why"),
        ("Who is X?", "entity"),
        ("Whose son is X?", "entity"),
        ("What is X?", "entity"),
    ],
)
def test_answer_kind(question: str, kind: str) -> None:
    assert answer_kind(question) == kind


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("Who directed Dune?", "who directed dune", True),
        ("When was X born?", "In what year was X born?", True),  # "what year" is when
        # The pairs embedding similarity and DM_same both took for the same question.
        ("Where was X born?", "When was X born?", False),
        ("Who was the second president of X?", "Who was the president of X?", False),
        ("Who directed Dune?", "Who is the director of Dune?", False),  # other stems
    ],
)
def test_may_share_an_answer(first: str, second: str, expected: bool) -> None:
    assert may_share_an_answer(first, second) is expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When was Doug Liman born?", True),
        ("In what year did #1 die?", True),
        ("which date is it?", True),
        ("Who directed #1?", False),
        ("Whence came #1?", False),
        ("Which century was X built in?", False),  # `answer_kind` calls this "when"
        ("The film came out in what year?", False),  # it must open the question
    ],
)
def test_asks_for_date(question: str, expected: bool) -> None:
    assert asks_for_date(question) is expected


@pytest.mark.parametrize(
    ("sub_question", "expected"),
    [
        ("Who directed Dune?", True),
        ("who directed Dune", False),  # the very question, not one like it
    ],
)
def test_a_row_that_asks_the_question_answers_it(sub_question: str, expected: bool) -> None:
    row = _row(sub_question, "x")
    assert (answering_row("Who directed Dune?", [DIRECTOR, row]) is row) is expected


@pytest.mark.parametrize(
    ("question", "chain"),
    [
        (
            "Who is Anne Gust Brown's father-in-law?",
            ["Who is the spouse of Anne Gust Brown?", "Who is the father of #1?"],
        ),
        (
            "who was the Paternal Grandmother of Robert Iii, Count Of Dreux",
            ["Who is the father of Robert Iii, Count Of Dreux?", "Who is the mother of #1?"],
        ),
        (
            "Who is Maria Antonia Of Austria (1899\u20131977)\u2019s stepmother?",
            [
                "Who is the father of Maria Antonia Of Austria (1899\u20131977)?",
                "Who is the spouse of #1?",
            ],
        ),
        (
            "Who is the daughter-in-law of Ann Lee?",
            ["Who is a child of Ann Lee?", "Who is the spouse of #1?"],
        ),
        ("Who is Fernando De Cea's uncle?", []),  # a parent's brother or an aunt's husband
        ("Who is the father of Ann Lee?", []),  # one relation: the writer asks it
        ("Where was Ann Lee's paternal grandfather born?", []),  # more than the relation
    ],
)
def test_relation_chain(question: str, chain: list[str]) -> None:
    assert relation_chain(question) == chain


def test_the_last_step_of_a_relation_chain_answers_the_question() -> None:
    question = "Who is Anne Gust Brown's father-in-law?"
    spouse = _row("Who is the spouse of Anne Gust Brown?", "Jerry Brown", 1)
    father = _row("Who is the father of Jerry Brown?", "Pat Brown", 2)
    assert answering_row(question, [spouse]) is None  # the bridge is not the answer
    assert answering_row(question, [spouse, father]) is father
    # the father of someone the chain did not reach answers nothing
    stray = _row("Who is the father of Anne Gust Brown?", "Walter Gust", 3)
    assert answering_row(question, [spouse, stray]) is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Are A and B of the same nationality?", True),
        ("Do A and B share the same director?", True),
        ('"Is the same man A?"', True),
        ("Are A and B both American?", False),  # no "same"
        ("Which is the same?", False),  # no yes/no opener
        ("Can A and B be the same?", False),  # an opener the list leaves out
    ],
)
def test_asks_whether_same_value(question: str, expected: bool) -> None:
    assert asks_whether_same_value(question) is expected


# --- what names something, what points back ----------------------------------------------


@pytest.mark.parametrize(
    ("sub_question", "expected"),
    [
        ("When was he born?", True),
        ("Where is that city?", True),
        ("Who founded the latter?", True),
        ("What is this area called?", True),
        ("Who directed Dune?", False),
        ("Who wrote The Hobbit?", False),  # "the" before a name points nowhere
        ("Is this is?", False),  # "this" before a verb is no pointer
        ("What did THIS Band release?", False),  # a capitalised word after "this" names
    ],
)
def test_has_back_reference(sub_question: str, expected: bool) -> None:
    assert has_back_reference(sub_question) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("When was Doug Liman born?", True),
        ("Who directed 2001?", True),  # a number
        ('What is "dune" about?', True),  # a quoted title
        ("What is the name of the college?", False),
        ("when was doug liman born?", False),  # all in lower case
        ("Who?", False),  # the first word never counts
    ],
)
def test_names_something(text: str, expected: bool) -> None:
    assert names_something(text) is expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who is the paternal grandfather of John Smith?", {"paternal", "grandfather"}),
        ("Who is John Smith?", {"john", "smith"}),  # nothing but names: all of them
    ],
)
def test_relation_words(question: str, expected: set[str]) -> None:
    assert relation_words(question) == expected


GRANDFATHER = "Who is the paternal grandfather of John Smith?"
FATHER_IN_LAW = "Who is the father-in-law of Princess Elisabeth, Duchess of Hohenberg?"


@pytest.mark.parametrize(
    ("sub_question", "question", "coverage"),
    [
        ("Who is the father of John Smith?", GRANDFATHER, 0.0),  # a fine first step
        # The long name is most of the words, but not what the question asks.
        ("Who is the spouse of Princess Elisabeth, Duchess of Hohenberg?", FATHER_IN_LAW, 0.0),
        ("Where was John Smith born?", GRANDFATHER, 0.0),
        # A rewording of the whole question covers all of it.
        ("Who was John Smith's paternal grandfather?", GRANDFATHER, 1.0),
        (GRANDFATHER, GRANDFATHER, 1.0),
        ("", GRANDFATHER, 0.0),
    ],
)
def test_question_coverage(sub_question: str, question: str, coverage: float) -> None:
    assert question_coverage(sub_question, question) == coverage


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        ("In which town is Brisk Hollow?", "Brisk Hollow", True),
        # The possessive 's is dropped (unlike in `says`).
        ("Who was Arnold Schwarzenegger's wife?", "Arnold Schwarzenegger", True),
        ("Who was Arnold Schwarzenegger's wife?", "Maria Shriver", False),
        ("Who was Arnold Schwarzenegger's wife?", "Arnie Schwarzenegger", False),
        ("Which film came out first, Dune or Alien?", "Dune", False),  # a choice question
        ("Who is X?", "", False),
    ],
)
def test_echoes_question(question: str, answer: str, expected: bool) -> None:
    assert echoes_question(question, answer) is expected


# --- sub-questions as written, and plans --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Next question: Who directed Dune", "Who directed Dune?"),
        ("1. Who directed Dune?", "Who directed Dune?"),
        ('- "Who directed Dune?"', "Who directed Dune?"),
        ("Q2) Where was X born?\nmore", "Where was X born?"),
        ("\n\nWhere was X born?", "Where was X born?"),  # the first line with text
        ("\n\n", ""),
    ],
)
def test_clean_sub_question(text: str, expected: str) -> None:
    assert clean_sub_question(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "1. Who directed Dune?\n2) When was #1 born?\nnot numbered\n3. Who directed Dune?",
            ["Who directed Dune?", "When was #1 born?"],  # repeats and loose lines go
        ),
        ("1. a\n2. b\n3. c\n4. d\n5. e", ["a?", "b?", "c?", "d?"]),  # at most the cap
        ("Who directed Dune?", []),  # no numbered line
    ],
)
def test_parse_plan(text: str, expected: list[str]) -> None:
    assert parse_plan(text) == expected


@pytest.mark.parametrize(
    ("step", "answers", "expected"),
    [
        ("Who directed #1?", ["Dune"], "Who directed Dune?"),
        ("Who married #1 and #2?", ["A", "B"], "Who married A and B?"),
        ("Who directed #2?", ["Dune"], "Who directed #2?"),  # no such answer yet
        ("Who directed #1?", [""], "Who directed #1?"),  # the step found none
        # A when-step pointed at a date asks about the latest answer that is no date.
        ("When was #2 born?", ["Film A", "1892", "Director B"], "When was Director B born?"),
        ("When was #2 born?", ["Film A", "1892"], "When was Film A born?"),
        ("When was #1 born?", ["1892"], "When was #1 born?"),  # none: "#k" stays
        ("Who was born in #1?", ["1892"], "Who was born in 1892?"),  # no when-step
    ],
)
def test_fill_answers(step: str, answers: list[str], expected: str) -> None:
    assert fill_answers(step, answers) == expected


@pytest.mark.parametrize(
    ("step", "expected"),
    [("Where was #2 born?", True), ("Where was #two born?", False), ("Where was 2 born?", False)],
)
def test_needs_answer(step: str, expected: bool) -> None:
    assert needs_answer(step) is expected


# --- the question with what the table found put in place ----------------------------------


@pytest.mark.parametrize(
    ("question", "sub_question", "answer", "expected"),
    [
        (
            "What film features Anil Devgan's sibling?",
            "Who is Anil Devgan's sibling?",
            "Ajay Devgan",
            "What film features Ajay Devgan?",
        ),
        (
            DUNE,
            "Who is the director of Dune?",
            "Denis Villeneuve",
            "Where was Denis Villeneuve born?",
        ),
        (
            "Where was the wife of the director of Dune born?",
            "Who is the director of Dune?",
            "Denis Villeneuve",
            "Where was the wife of Denis Villeneuve born?",
        ),
        (DUNE, "Who directed Dune?", "Denis Villeneuve", DUNE),  # no shared description
        # The shared words are the whole question: nothing to put in place.
        (
            "Who is the director of Dune?",
            "Who is the director of Dune?",
            "X",
            "Who is the director of Dune?",
        ),
        # A run without a name describes nothing.
        (
            "What is the capital of the country where Paris is?",
            "What country is Paris in?",
            "France",
            "What is the capital of the country where Paris is?",
        ),
    ],
)
def test_answer_in_place(question: str, sub_question: str, answer: str, expected: str) -> None:
    assert answer_in_place(question, sub_question, answer) == expected


@pytest.mark.parametrize(
    ("question", "table", "expected"),
    [
        (DUNE, [DIRECTOR], "Where was Denis Villeneuve born?"),
        (
            "Where was the wife of the director of Dune born?",
            [DIRECTOR, _row("Who is the wife of Denis Villeneuve?", "Tanya Lapointe")],
            "Where was Tanya Lapointe born?",  # in table order
        ),
        (DUNE, [_row("Who is the director of Dune?", "1967")], DUNE),  # a date is left out
        (DUNE, [], DUNE),
    ],
)
def test_with_answers_in_place(question: str, table: list[dict[str, Any]], expected: str) -> None:
    assert with_answers_in_place(question, table) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sub_question", "question", "table", "expected"),
    [
        ("What is the name of the college?", DUNE, [], True),
        ("When was the playwright born?", DUNE, [], True),
        ("Where was he born?", DUNE, [], True),  # points back before anything is found
        ("Who was the player with the most league sacks?", DUNE, [], False),  # described
        ("Where was he born?", DUNE, [DIRECTOR], False),  # the guard can name him
        ("When was Doug Liman born?", DUNE, [], False),  # names something
        ("when was the playwright born?", "where was the director of dune born?", [], False),
    ],
)
def test_too_vague(
    sub_question: str, question: str, table: list[dict[str, Any]], expected: bool
) -> None:
    assert too_vague(sub_question, question, table) is expected  # type: ignore[arg-type]


IN_PLACE = hint(
    "answered_in_place", answer="Denis Villeneuve", reduced="Where was Denis Villeneuve born?"
)


@pytest.mark.parametrize(
    ("sub_question", "state", "reason"),
    [
        ("", {"question": DUNE}, hint("not_a_question")),
        (DUNE, {"question": DUNE}, hint("repeats_question")),
        ("What is the name of the college?", {"question": DUNE}, hint("names_nothing")),
        ("Who directed Dune?", {"question": DUNE}, ""),
        # Asked before and answered: the question with the answer in place points on.
        ("who is the director of Dune", {"question": DUNE, "qa_table": [DIRECTOR]}, IN_PLACE),
        (
            "Who directed Dune?",
            {"question": DUNE, "qa_table": [_row("Who directed Dune?", "Denis Villeneuve")]},
            hint("answered", answer="Denis Villeneuve"),  # nothing to put in place
        ),
        (
            "Who made Dune?",
            {"question": DUNE, "unanswerable": ["Who made Dune?"]},
            hint("unanswerable"),
        ),
        ("Where was Denis Villeneuve born?", {"question": DUNE, "qa_table": [DIRECTOR]}, ""),
    ],
)
def test_rejection(sub_question: str, state: dict[str, Any], reason: str) -> None:
    assert rejection(sub_question, state) == reason  # type: ignore[arg-type]


PLAN = ["Who is the director of Dune?", "Where was #1 born?", "When was #2 founded?"]


@pytest.mark.parametrize(
    ("plan", "state", "expected"),
    [
        (PLAN, {"question": DUNE}, (0, "Who is the director of Dune?")),
        (PLAN, {"question": DUNE, "qa_table": [DIRECTOR]}, (1, "Where was Denis Villeneuve born?")),
        (
            PLAN,
            {"question": DUNE, "qa_table": [DIRECTOR, BIRTHPLACE]},
            (2, "When was Trois-Rivières founded?"),
        ),
        # Before any answer a step that points back, or waits for one, is passed over.
        (["Where was that director born?", PLAN[0]], {"question": DUNE}, (1, PLAN[0])),
        (["Where was #1 born?", PLAN[0]], {"question": DUNE}, (1, PLAN[0])),
        (["Where was #2 born?"], {"question": DUNE}, (-1, "")),
        ([PLAN[0]], {"question": DUNE, "plan_step": 1}, (-1, "")),  # taken already
        ([DUNE], {"question": DUNE}, (-1, "")),  # rejected: it repeats the question
    ],
)
def test_next_plan_step(plan: list[str], state: dict[str, Any], expected: tuple[int, str]) -> None:
    assert next_plan_step(plan, state) == expected  # type: ignore[arg-type]


# --- final answers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        (CHOICE, "Alberto Lattuada", "Dog's Heart"),  # the compared director: his film
        (CHOICE, "1934", "The Inside Man"),
        (CHOICE, "Dog's Heart", "Dog's Heart"),  # already an option
        (CHOICE, "Federico Fellini", "Federico Fellini"),  # reached by neither
        (CHOICE, "yes", "yes"),
        ("Who directed Dog's Heart?", "Alberto Lattuada", "Alberto Lattuada"),  # no choice
    ],
)
def test_as_option(question: str, answer: str, expected: str) -> None:
    assert as_option(question, BRIDGE, answer) == expected


@pytest.mark.parametrize(
    ("title", "name", "expected"),
    [
        ("Dune (film)", "Dune", True),  # the title names it
        ("Dune", "Dune (film)", True),  # it names the title
        ("Dune Messiah", "Dune", True),
        ("Alien", "Dune", False),
        ("Dunes", "Dune", False),  # whole words only
    ],
)
def test_about(title: str, name: str, expected: bool) -> None:
    assert about({"title": title}, name) is expected


# --- look-alike checks kept apart: each pair differs on some input ------------------------


@pytest.mark.parametrize(
    ("first", "second", "text"),
    [
        # Date questions: `answer_kind` reads any "which century" as when,
        # `asks_for_date` only an opening "when" or "in what year".
        (lambda q: answer_kind(q) == "when", asks_for_date, "Which century was X built in?"),
        # Yes/no questions: the reader prompts take more openers than the same-value rule.
        (is_yes_no_question, asks_whether_same_value, "Can A and B be the same?"),
        # Possessives: per word in any case, against lower-case 's in running text.
        (
            lambda w: _word_key(w) == "berg",
            lambda w: question_words(w) == ["berg"],
            "BERG'S",
        ),
        # Whole-word matches: with and without the possessive 's.
        (
            lambda q: echoes_question(q, "Arnold Schwarzenegger"),
            lambda q: says(q, "Arnold Schwarzenegger"),
            "Who was Arnold Schwarzenegger's wife?",
        ),
    ],
)
def test_look_alike_checks_differ(first: Any, second: Any, text: str) -> None:
    """Why each pair was not merged into one check."""
    assert first(text) and not second(text)


def test_the_coverage_threshold_separates_the_examples() -> None:
    """The examples above fall on the two sides of `MAX_QUESTION_COVERAGE`."""
    assert question_coverage("Who is the father of John Smith?", GRANDFATHER) < (
        MAX_QUESTION_COVERAGE
    )
    assert question_coverage("Who was John Smith's paternal grandfather?", GRANDFATHER) >= (
        MAX_QUESTION_COVERAGE
    )
