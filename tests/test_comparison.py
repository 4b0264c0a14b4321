"""Date comparisons decided by rule from the QA table: what they decide, what they leave
to the LLM, and how the final-answer nodes use them."""

from __future__ import annotations

import pytest
from stubs import NoExamples, Runtime, ScriptedWriter

from nodes.final import answer_from_qa_table, answer_from_rows, fallback_answer
from nodes.sub_question import write_sub_question
from nodes.sufficiency import check_sufficiency
from tests.conftest import DEMO_QUESTION
from tools.comparison import (
    Date,
    as_tool,
    compare_dates,
    compared_options,
    comparison_options,
    for_each_option,
    is_date,
    missing_dates,
    option_frontiers,
    option_reached,
    parse_date,
    same_value,
)
from tools.decision import Calibration, DecisionModel
from tools.question_rules import asks_for_date

BRIDGE = [
    ("Who directed The Inside Man?", "Tom Clegg", 1),
    ("When was Tom Clegg born?", "1934", 2),
    ("Who directed Dog's Heart?", "Alberto Lattuada", 3),
    ("When was Alberto Lattuada born?", "15 October 1914", 4),
]


def rows(*triples: tuple[str, str, int]) -> list[dict]:
    return [
        {"sub_question": q, "answer": a, "passage_ids": [pid], "source": "retrieved"}
        for q, a, pid in triples
    ]


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("15 October 1914", Date(1914, 10, 15)),
        ("October 15, 1914", Date(1914, 10, 15)),
        ("1914-10-15", Date(1914, 10, 15)),
        ("March 1990", Date(1990, 3)),
        ("1934", Date(1934)),
        ("c. 1850", Date(1850)),
        ("1990s", None),
        ("1920 and 1930", None),
        ("Alberto Lattuada", None),
        ("the year 1950 in Paris, France, in spring", None),
    ],
)
def test_parse_date(text: str, date: Date | None) -> None:
    assert parse_date(text) == date


@pytest.mark.parametrize(
    ("text", "date_only"),
    [
        ("1892", True),
        ("8 April 1977", True),
        ("March 4, 1993", True),
        ("c. 1900", True),
        ("2001: A Space Odyssey", False),
        ("Doug Liman", False),
        ("the 1990s", False),
    ],
)
def test_is_date_takes_dates_and_nothing_else(text: str, date_only: bool) -> None:
    assert is_date(text) is date_only


def test_asks_for_date() -> None:
    assert asks_for_date("When was Doug Liman born?")
    assert asks_for_date("In what year did #1 die?")
    assert asks_for_date("which date is it?")
    assert not asks_for_date("Who directed #1?")
    assert not asks_for_date("Whence came #1?")


def test_options_and_what_is_asked() -> None:
    assert comparison_options("Which film came out first, Run The Race or Cup-Tie Honeymoon?") == (
        "Which film came out first",
        ("Run The Race", "Cup-Tie Honeymoon"),
    )
    assert comparison_options("Who was born first out of C. M. Patterson and Ann Lee?") == (
        "Who was born first ",
        ("C. M. Patterson", "Ann Lee"),
    )
    # A title with a comma stays whole.
    parsed = comparison_options(
        "Which film has the director born first, S Durga or Sweet Emma, Dear Böbe?"
    )
    assert parsed is not None and parsed[1] == ("S Durga", "Sweet Emma, Dear Böbe")
    assert comparison_options("Where was the director of Dog's Heart born?") is None


def test_a_bridge_comparison_follows_the_rows_to_each_date() -> None:
    table = rows(*BRIDGE)
    older = compare_dates(
        "Which film has the director who is older than the other, "
        "The Inside Man (Film) or Dog'S Heart?",
        table,
    )
    assert older is not None and older["answer"] == "Dog'S Heart"
    assert older["values"] == {"The Inside Man (Film)": "1934", "Dog'S Heart": "1914-10-15"}
    assert older["passage_ids"] == [1, 2, 3, 4]
    later = compare_dates(
        "Which film has the director born later, The Inside Man or Dog's Heart?", table
    )
    assert later is not None and later["answer"] == "The Inside Man"


def test_a_direct_comparison_and_words_inside_the_options() -> None:
    table = rows(
        ("When was The Last Hunt released?", "1956", 1), ("When was Run released?", "1991", 2)
    )
    # "Last" names a film here; the direction is read from "came out first" only.
    first = compare_dates("Which film came out first, The Last Hunt or Run?", table)
    assert first is not None and first["answer"] == "The Last Hunt"


@pytest.mark.parametrize(
    ("question", "table"),
    [
        # No direction to compare in.
        (
            "Who lived longer, Ann Lee or Bo Ray?",
            [("When was Ann Lee born?", "1900", 1), ("When was Bo Ray born?", "1901", 2)],
        ),
        # A date missing for one option.
        ("Who was born first, Ann Lee or Bo Ray?", [("When was Ann Lee born?", "1900", 1)]),
        # Same year, and one date gives no month: a tie at the shared precision.
        (
            "Who was born first, Ann Lee or Bo Ray?",
            [("When was Ann Lee born?", "1900", 1), ("When was Bo Ray born?", "May 1900", 2)],
        ),
        # Two dates for one option and the question names no event to choose between them.
        (
            "Which came first, Ann Lee or Bo Ray?",
            [
                ("When was Ann Lee born?", "1900", 1),
                ("When did Ann Lee die?", "1950", 2),
                ("When was Bo Ray born?", "1920", 3),
            ],
        ),
        # A birth question does not use a death date.
        (
            "Who was born first, Ann Lee or Bo Ray?",
            [("When was Ann Lee born?", "1900", 1), ("When did Bo Ray die?", "1950", 2)],
        ),
    ],
)
def test_undecided_comparisons_are_left_to_the_llm(
    question: str, table: list[tuple[str, str, int]]
) -> None:
    assert compare_dates(question, rows(*table)) is None


def test_a_choice_answered_with_a_link_of_one_chain_is_that_option() -> None:
    question = "Which film has the director born first, The Inside Man or Dog's Heart?"
    table = rows(*BRIDGE)
    assert option_reached(question, table, "Alberto Lattuada") == "Dog's Heart"
    assert option_reached(question, table, "1934") == "The Inside Man"
    assert option_reached(question, table, "Dog's Heart") is None  # already an option
    assert option_reached(question, table, "Federico Fellini") is None  # reached by neither
    assert option_reached("Who directed Dog's Heart?", table, "Alberto Lattuada") is None
    update = answer_from_rows(_Replying("Tom Clegg"), question, rows(*BRIDGE[:3]))
    assert update["answer"] == "The Inside Man"


class _Replying:
    def __init__(self, reply: str) -> None:
        self.reply = reply

    def invoke(self, messages: object, max_tokens: int | None = None) -> str:
        return self.reply


class _NoLLM:
    def invoke(self, messages: object, max_tokens: int | None = None) -> str:
        raise AssertionError("a comparison the table decides needs no LLM call")


def test_final_answer_nodes_decide_by_rule_without_reading() -> None:
    question = "Which film has the director born first, The Inside Man or Dog's Heart?"
    update = answer_from_rows(_NoLLM(), question, rows(*BRIDGE))  # type: ignore[arg-type]
    assert update["answer"] == "Dog's Heart" and update["comparison"]["values"]
    state = {"question": question, "qa_table": rows(*BRIDGE), "hop": 4}
    fallback = fallback_answer(
        state,  # type: ignore[arg-type]
        Runtime(),  # type: ignore[arg-type]
        retriever=None,  # type: ignore[arg-type]
        dm=None,  # type: ignore[arg-type]
        gateway=_NoLLM(),  # type: ignore[arg-type]
        index=None,  # type: ignore[arg-type]
    )
    assert fallback["answer"] == "Dog's Heart" and fallback["answer_passage_ids"] == [1, 2, 3, 4]


def test_the_comparison_is_a_langchain_tool() -> None:
    tool = as_tool()
    result = tool.invoke(
        {
            "question": "Who was born first, Ann Lee or Bo Ray?",
            "rows": rows(
                ("When was Ann Lee born?", "1900", 1), ("When was Bo Ray born?", "1890", 2)
            ),
        }
    )
    assert result["answer"] == "Bo Ray"


OFF = Calibration(backends=dict.fromkeys(("rel", "direct", "depth", "suff", "same"), "off"))


class _QueryRecorder:
    """A retriever that finds nothing and records what it was asked."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def retrieve(self, query: str, k: int) -> list:
        self.queries.append(query)
        return []


class _Recorder:
    def __init__(self) -> None:
        self.seen = ""

    def invoke(self, messages: list, max_tokens: int | None = None) -> str:
        self.seen = "\n".join(m.content for m in messages)
        return "Answer: Pat Brown.\nHe is the father of Jerry Brown."


def _fallback(state: dict, gateway: _Recorder, retriever: _QueryRecorder) -> dict:
    """The fallback with every decision off and no index (nothing retrieved is read)."""
    return fallback_answer(
        state,  # type: ignore[arg-type]
        Runtime(),  # type: ignore[arg-type]
        retriever=retriever,  # type: ignore[arg-type]
        dm=DecisionModel(gateway=None, embedder=None, calibration=OFF),  # type: ignore[arg-type]
        gateway=gateway,  # type: ignore[arg-type]
        index=None,  # type: ignore[arg-type]
    )


def test_the_fallback_reads_the_rows_it_has_when_they_decide_nothing() -> None:
    gateway = _Recorder()
    state = {
        "question": "Who is Anne Gust Brown's father-in-law?",
        "qa_table": rows(("Who is the spouse of Anne Gust Brown?", "Jerry Brown", 7)),
        "hop": 2,
    }
    update = _fallback(state, gateway, _QueryRecorder())
    assert "- Who is the spouse of Anne Gust Brown? Jerry Brown" in gateway.seen
    assert update["answer"] == "Pat Brown"  # the reply's first line, cleaned
    assert update["answer_passage_ids"] == [7]  # the row's passage: nothing was retrieved


def test_the_fallback_searches_and_reads_the_question_with_the_answers_in_place() -> None:
    gateway, retriever = _Recorder(), _QueryRecorder()
    state = {
        "question": "What film features Anil Devgan's sibling?",
        "qa_table": rows(("Who is Anil Devgan's sibling?", "Ajay Devgan", 7)),
        "hop": 6,
    }
    update = _fallback(state, gateway, retriever)
    assert retriever.queries == ["What film features Ajay Devgan?"]
    assert "Question: What film features Ajay Devgan?" in gateway.seen
    question = {"kind": "fallback_question", "text": "What film features Ajay Devgan?"}
    assert question in update["notes"]


def test_a_date_comparison_is_sufficient_exactly_when_the_rule_can_compare() -> None:
    question = "Which film has the director born first, The Inside Man or Dog's Heart?"
    one_side = rows(*BRIDGE[:3])
    state = {"question": question, "qa_table": one_side, "sub_question": BRIDGE[2][0], "hop": 3}
    # The DM is never asked: a DM with every kind switched off would say no to both.
    dm = DecisionModel(gateway=None, embedder=None, calibration=OFF)
    update = check_sufficiency(state, Runtime(), dm=dm)  # type: ignore[arg-type]
    assert update["sufficient"] is False and update["decisions"][0]["backend"] == "rule"
    state = {**state, "qa_table": rows(*BRIDGE), "sub_question": BRIDGE[3][0], "hop": 4}
    update = check_sufficiency(state, Runtime(), dm=dm)  # type: ignore[arg-type]
    assert update["sufficient"] is True and update["decisions"][0]["p_yes"] == 1.0


def test_a_row_naming_both_options_lends_its_answer_to_neither() -> None:
    question = "Which film has the director died earlier, Kanchana Sita or Ghost Of The China Sea?"
    table = rows(
        ("Who directed Kanchana Sita?", "G. Aravindan", 1),
        ("When did G. Aravindan die?", "15 March 1991", 2),
        (
            "Which film has the director who died later, Kanchana Sita or Ghost Of The China Sea?",
            "Kanchana Sita",
            3,
        ),
        ("Who directed Ghost Of The China Sea?", "Fred F. Sears", 4),
        ("When did Fred F. Sears die?", "November 30, 1957", 5),
    )
    decided = compare_dates(question, table)
    assert decided is not None and decided["answer"] == "Ghost Of The China Sea"
    assert decided["passage_ids"] == [1, 2, 4, 5]


def test_what_a_date_comparison_still_lacks() -> None:
    question = "Which film has the director born later, South American George or Getting In?"
    table = rows(
        ("Who directed South American George?", "Marcel Varnel", 1),
        ("Where was Marcel Varnel born?", "Paris", 2),
        ("Who directed Getting In?", "Doug Liman", 3),
    )
    assert missing_dates(question, table) == "when Marcel Varnel was born; when Doug Liman was born"
    assert missing_dates(question, []) == (
        "when South American George was born; when Getting In was born"
    )
    decided = "Which film has the director born first, The Inside Man or Dog's Heart?"
    assert missing_dates(decided, rows(*BRIDGE)) == ""
    assert missing_dates("Where was Doug Liman born?", table) == ""


def test_the_writer_is_told_what_a_comparison_lacks_when_it_repeats_itself() -> None:
    question = "Which film has the director born later, South American George or Getting In?"
    table = rows(("Who directed Getting In?", "Doug Liman", 3))
    # The writer repeats a step; the plan has nothing further; told why, it asks on.
    writer = ScriptedWriter(
        "Who directed Getting In?", "1. Who directed Getting In?", "When was Doug Liman born?"
    )
    update = write_sub_question(
        {"question": question, "qa_table": table, "hop": 1},  # type: ignore[arg-type]
        Runtime(),  # type: ignore[arg-type]
        gateway=writer,  # type: ignore[arg-type]
        examples=NoExamples(),  # type: ignore[arg-type]
    )
    assert update["sub_question"] == "When was Doug Liman born?"
    assert writer.last.endswith(
        "Still unknown: when South American George was born; when Doug Liman was born."
    )


@pytest.mark.parametrize(
    ("table", "answer"),
    [
        (
            [
                ("Who directed Afrika?", "Alberto Cavallone", 1),
                ("Who directed Man From The Deep River?", "Umberto Lenzi", 2),
                ("What is the nationality of Alberto Cavallone?", "Italian", 3),
                ("What is the nationality of Umberto Lenzi?", "Italian", 4),
            ],
            "yes",
        ),
        # Different words are left to the LLM: they may still name the same country.
        ([("Where is Ann Lake?", "Italy", 1), ("Where is Bo Hill?", "Italian Republic", 2)], None),
        # Only one side known.
        ([("Who directed Afrika?", "Alberto Cavallone", 1)], None),
    ],
)
def test_same_answer_questions(table: list[tuple[str, str, int]], answer: str | None) -> None:
    question = (
        "Do both films, Afrika and Man From The Deep River, have directors from the same country?"
    )
    decided = same_value(question, rows(*table))
    assert (decided or {}).get("answer") == answer
    assert same_value("Who directed Afrika, the film?", rows(*table)) is None


class _SayYes:
    """A DM whose sufficiency check always says yes, counting its calls."""

    def __init__(self) -> None:
        self.asked = 0

    def backend(self, kind: str) -> str:
        return "trained"

    def p_suff(self, question: str, table: list[dict]) -> float:
        self.asked += 1
        return 0.99


def test_a_family_relation_is_walked_link_by_link_and_its_last_link_answers() -> None:
    """ "Who is Anne Gust Brown's father-in-law?": the steps come from the relation chain
    with no writer call (none scripted), and the chain's last row is the answer without
    DM_suff or LLM_fin; the small LLM_fin named the husband here."""
    question = "Who is Anne Gust Brown's father-in-law?"
    state: dict = {"question": question, "hop": 0}

    def write(state: dict) -> dict:
        return write_sub_question(
            state,  # type: ignore[arg-type]
            Runtime(),  # type: ignore[arg-type]
            gateway=ScriptedWriter(),  # type: ignore[arg-type]
            examples=NoExamples(),  # type: ignore[arg-type]
        )

    first = write(state)
    assert first["sub_question"] == "Who is the spouse of Anne Gust Brown?"
    assert first["written_by"] == "relation chain" and first["plan_step"] == 1
    state = {**state, **first, "qa_table": rows((first["sub_question"], "Jerry Brown", 1))}
    second = write(state)
    assert second["sub_question"] == "Who is the father of Jerry Brown?"
    assert second["written_by"] == "relation chain"
    table = [*state["qa_table"], *rows((second["sub_question"], "Pat Brown", 2))]
    state = {**state, **second, "qa_table": table}
    dm = _SayYes()
    update = check_sufficiency(state, Runtime(), dm=dm)  # type: ignore[arg-type]
    assert update["sufficient"] and update["decisions"][0]["backend"] == "rule"
    assert dm.asked == 0
    final = answer_from_qa_table(state, gateway=ScriptedWriter())  # type: ignore[arg-type]
    assert final["answer"] == "Pat Brown" and final["answer_passage_ids"] == [2]


@pytest.mark.parametrize(("deep", "rows_needed"), [(True, 3), (False, 1)])
def test_a_question_judged_deep_needs_three_rows(deep: bool, rows_needed: int) -> None:
    """DM_depth said more than 2 hops: the first two rows do not suffice, whatever
    DM_suff says; a shallow question's table goes to DM_suff from its first row."""
    depth = {"kind": "depth", "outcome": not deep, "p_yes": 0.2 if deep else 0.8}
    chain = [(f"Step {k}?", f"A{k}", k) for k in range(1, 4)]
    for n in range(1, 4):
        dm = _SayYes()
        state = {
            "question": "Where was the founder of the maker of X born?",
            "qa_table": rows(*chain[:n]),
            "sub_question": chain[n - 1][0],
            "decisions": [depth],
            "hop": n,
        }
        update = check_sufficiency(state, Runtime(), dm=dm)  # type: ignore[arg-type]
        assert update["sufficient"] is (n >= rows_needed)
        assert dm.asked == (n >= rows_needed)
        assert update["decisions"][0]["backend"] == ("trained" if n >= rows_needed else "rule")


def test_a_row_that_asks_the_question_itself_answers_it() -> None:
    """A one-hop question asked as its own sub-question: sufficient by rule (DM_suff,
    trained on longer chains, says no to one row) and answered without LLM_fin."""
    question = "Where did Marisol Quenby study?"
    table = rows((question, "Tavistrom College", 10))
    state = {"question": question, "qa_table": table, "sub_question": question, "hop": 1}
    dm = _SayYes()
    update = check_sufficiency(state, Runtime(), dm=dm)  # type: ignore[arg-type]
    assert update["sufficient"] and update["decisions"][0]["backend"] == "rule"
    assert dm.asked == 0
    final = answer_from_qa_table(state, gateway=ScriptedWriter())  # type: ignore[arg-type]
    assert final["answer"] == "Tavistrom College" and final["answer_passage_ids"] == [10]
    # Another question's one row still goes to the DM and to LLM_fin.
    other = {**state, "question": "Who founded the college where Marisol Quenby studied?"}
    check_sufficiency(other, Runtime(), dm=dm)  # type: ignore[arg-type]
    assert dm.asked == 1
    llm_fin = ScriptedWriter("Augustin Reyvald")
    assert answer_from_qa_table(other, gateway=llm_fin)["answer"] == "Augustin Reyvald"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "options"),
    [
        # "Which one, A or B?" and "out of A and B" (`comparison_options`)
        ("Which film came out first, Run The Race or Cup-Tie Honeymoon?",
         ("Run The Race", "Cup-Tie Honeymoon")),
        ("Who was born first out of Marco De Luigi and Fabio Maistro?",
         ("Marco De Luigi", "Fabio Maistro")),
        # ... and B ends at a comma that goes on in lower case
        ("Which person, William Blake Herron or John Carpenter, held more diverse roles?",
         ("William Blake Herron", "John Carpenter")),
        ("Which film came out earlier, Murder, She Said or Story Of Barbara?",
         ("Murder, She Said", "Story Of Barbara")),
        # yes/no questions that set two names side by side
        ("Was Sammy Hagar or Renaud Garcia-Fons born first?",
         ("Sammy Hagar", "Renaud Garcia-Fons")),
        ("Are Ailes Gilmour and Chris Schwinden of the same nationality?",
         ("Ailes Gilmour", "Chris Schwinden")),
        ("Are both Țerova and Slava (River) located in the same country?",
         ("Țerova", "Slava (River)")),
        ("Do the movies Thor The Conqueror and City Of Pain, originate from the same country?",
         ("Thor The Conqueror", "City Of Pain")),
        ("Do director of film An Ideal Woman and director of film Goodbye Emmanuelle share the "
         "same nationality?", ("An Ideal Woman", "Goodbye Emmanuelle")),
        ("Are both directors of films The Pit And The Pendulum (1913 Film) and How Sweet It Is! "
         "from the same country?", ("The Pit And The Pendulum (1913 Film)", "How Sweet It Is!")),
        ("Does Leslie Pietrzyk have the same nationality as Marianne Wiggins?",
         ("Leslie Pietrzyk", "Marianne Wiggins")),
        ("Were Scott Derrickson and Ed Wood of the same nationality?",
         ("Scott Derrickson", "Ed Wood")),
        ("Are the Laleli Mosque and Esma Sultan Mansion located in the same neighborhood?",
         ("Laleli Mosque", "Esma Sultan Mansion")),
        ("Is the Atlanta Hawks or the Charlotte Hornets older?",
         ("Atlanta Hawks", "Charlotte Hornets")),
        # no comparison: a chain, a yes/no question about one thing, two names not compared
        (DEMO_QUESTION, ()),
        ("Is Tavistrom College in Brisk Hollow?", ()),
        ("Did Tom Clegg and Dennis Hopper make a film together?", ()),
        ("Who directed Run The Race or Cup-Tie Honeymoon", ()),
    ],
)  # fmt: skip
def test_compared_options(question: str, options: tuple[str, ...]) -> None:
    assert compared_options(question) == options


DOG = "Which film has the director who is older, The Inside Man (Film) or Dog'S Heart?"
OPTIONS = ("The Inside Man (Film)", "Dog'S Heart")


@pytest.mark.parametrize(
    ("table", "frontiers"),
    [
        ([], list(OPTIONS)),  # before any row: the options themselves
        (BRIDGE[:1] + BRIDGE[2:3], ["Tom Clegg", "Alberto Lattuada"]),  # one row each
        (BRIDGE, ["1934", "15 October 1914"]),
        # one option's chain fell behind: its next step is the writer's alone
        (BRIDGE[:2], None),
        (BRIDGE[:1], None),
        # a row about both options lends its answer to neither
        ([(DOG, "Dog's Heart", 9)], list(OPTIONS)),
        # the same name reached by both: one question, not two
        ([("Who directed The Inside Man?", "Tom Clegg", 1),
          ("Who directed Dog's Heart?", "Tom Clegg", 2)], None),
    ],
)  # fmt: skip
def test_option_frontiers(table: list[tuple[str, str, int]], frontiers: list[str] | None) -> None:
    assert option_frontiers(OPTIONS, rows(*table)) == frontiers


@pytest.mark.parametrize(
    ("sub_question", "frontiers", "asked"),
    [
        ("Who directed The Inside Man?", OPTIONS,
         ["Who directed The Inside Man?", "Who directed Dog'S Heart?"]),
        # written in other case, and with the qualifier: the other's name as the question has it
        ("Who directed Dog's Heart?", OPTIONS,
         ["Who directed The Inside Man (Film)?", "Who directed Dog's Heart?"]),
        ("When was Alberto Lattuada born?", ("Tom Clegg", "Alberto Lattuada"),
         ["When was Tom Clegg born?", "When was Alberto Lattuada born?"]),
        # naming both, or neither: no sub-question per option
        ("Which came first, The Inside Man or Dog's Heart?", OPTIONS, []),
        ("Who directed the film?", OPTIONS, []),
        # named in words the rule cannot find as such
        ("Who directed Inside Man (Film)?", OPTIONS, []),
    ],
)  # fmt: skip
def test_for_each_option(sub_question: str, frontiers: tuple[str, ...], asked: list[str]) -> None:
    assert for_each_option(sub_question, frontiers) == asked


def test_sufficiency_judges_every_row_a_fan_out_added() -> None:
    """Two parallel steps add two rows at once: the rows after those the last judgement
    saw are new, whichever branch's sub-question the turn kept last."""
    question = "Which film has the director born first, The Inside Man or Dog's Heart?"
    judged = {"kind": "suff", "inputs": [2], "outcome": False}
    state = {
        "question": question,
        "qa_table": rows(*BRIDGE[:1], *BRIDGE[2:3], *BRIDGE[1:2], *BRIDGE[3:]),
        "sub_question": BRIDGE[1][0],  # the branch that found a date
        "decisions": [judged],
        "hop": 4,
    }
    dm = DecisionModel(gateway=None, embedder=None, calibration=OFF)
    update = check_sufficiency(state, Runtime(), dm=dm)  # type: ignore[arg-type]
    assert update["sufficient"] is True and update["decisions"][0]["inputs"] == [4]
    # No row since the last judgement: it still holds, and nothing is asked.
    again = {**state, "decisions": [judged, update["decisions"][0]], "sufficient": True}
    assert check_sufficiency(again, Runtime(), dm=dm) == {"sufficient": False}
