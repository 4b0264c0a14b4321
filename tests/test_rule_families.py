"""The rules audit's switch (issue 52): HOPRAG_RULES_OFF turns DeFT's rule families of
hoprag's own off, one by one or all ("the lean graph"), and the default turns none off.
Each family off is checked on the compiled graph where it changes the route or the
state, with the stub writer, DM and retriever of test_deft_routes."""

from __future__ import annotations

import pytest
from stubs import ScriptedWriter

from app.errors import UserError
from app.eval.run import deft_signature
from app.settings import ALL_RULES_OFF, RULE_FAMILIES, Settings
from tests.conftest import DEMO_QUESTION
from tests.test_deft_routes import FIRST, SECOND, START, STEP, StubDM, rows, run_turn
from tools.qa_cache import QACache
from tools.question_rules import answering_row, rejection
from tools.step_limits import loop_end

pytest_plugins = ["tests.test_deft_routes"]  # its fixtures: turn_settings, cache


def test_the_default_turns_no_family_off_and_all_turns_every_one_off(tmp_path) -> None:
    default = Settings(home=tmp_path)
    assert default.families_off() == frozenset()
    assert all(default.rule(f) for f in RULE_FAMILIES)
    lean = default.with_overrides(rules_off=ALL_RULES_OFF)
    assert lean.families_off() == frozenset(RULE_FAMILIES)
    some = default.with_overrides(rules_off=" answer_echoes, plan_first ")
    assert some.families_off() == {"answer_echoes", "plan_first"}
    assert not some.rule("answer_echoes") and some.rule("relation_chains")


def test_an_unknown_family_is_refused_at_start(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOPRAG_RULES_OFF", "answer_echoes,bridges")
    with pytest.raises(UserError, match="unknown rule family bridges"):
        Settings(home=tmp_path)
    monkeypatch.delenv("HOPRAG_RULES_OFF")
    with pytest.raises(KeyError):
        Settings(home=tmp_path).rule("bridges")  # a family the code misnames


def test_a_run_signature_names_the_families_off_only_when_there_are_some(tmp_path) -> None:
    """Runs made before the switch existed keep matching the default's signature, so a
    resumed default run is not refused; a lean run never matches a default one."""
    default = deft_signature(Settings(home=tmp_path))
    assert "rules_off" not in default
    lean = deft_signature(Settings(home=tmp_path).with_overrides(rules_off="plan_first"))
    assert "rules_off=plan_first" in lean and lean != default


def test_off_the_code_s_own_refusals_leave_the_paper_s() -> None:
    state = {
        "question": "Which team did the player with the most league sacks play for?",
        "qa_table": [{"sub_question": "Who had the most league sacks?", "answer": "Reggie White"}],
        "unanswerable": ["When was Reggie White born?"],
    }
    reworded = "Which team did the player with the most sacks in the league play for?"
    assert "whole question" in rejection(reworded, state)
    assert rejection(reworded, state, own_rules=False) == ""
    assert rejection("What is the name of the college?", state, own_rules=False) == ""
    # A sub-question asked before is refused either way, as the paper refuses it.
    for asked in ("who had the most league sacks", "When was Reggie White born?"):
        assert rejection(asked, state, own_rules=False)


def test_off_relation_chains_and_dead_ends_leave_the_plain_rules() -> None:
    question = "Who is Anne Gust Brown's father-in-law?"
    spouse = {"sub_question": "Who is the spouse of Anne Gust Brown?", "answer": "Jerry Brown"}
    father = {"sub_question": "Who is the father of Jerry Brown?", "answer": "Pat Brown"}
    assert answering_row(question, [spouse, father]) is father  # type: ignore[arg-type]
    assert answering_row(question, [spouse, father], chains=False) is None  # type: ignore[arg-type]
    two_dead_ends = {"hop": 2, "unanswerable": ["Who?", "What?"]}
    assert loop_end(two_dead_ends, 6) == "2 sub-questions found no answer"
    assert loop_end(two_dead_ends, 6, dead_ends=False) == ""
    assert loop_end({**two_dead_ends, "hop": 6}, 6, dead_ends=False) == "6 steps taken"


def test_off_an_answer_that_echoes_its_sub_question_becomes_a_row(
    turn_settings: Settings, cache: QACache
) -> None:
    one_step = turn_settings.with_overrides(max_steps=1, direct_answer=False)
    # "Tavistrom College" for "Where is Tavistrom College located?" repeats its name.
    writer = ScriptedWriter(FIRST, "Tavistrom College", "Ulden River")
    nodes, state, _ = run_turn(one_step, cache, StubDM(), writer)
    assert state["unanswerable"] == [FIRST] and rows(state) == []
    assert nodes[-2:] == ["fallback_answer", "reply"]
    writer = ScriptedWriter(FIRST, "Tavistrom College", "Ulden River")
    lean = one_step.with_overrides(rules_off="answer_echoes")
    nodes, state, _ = run_turn(lean, cache, StubDM(), writer)
    assert rows(state) == [(FIRST, "Tavistrom College", [1, 4], "retrieved")]
    assert not state.get("unanswerable")


def test_off_two_dead_ends_do_not_end_the_loop(turn_settings: Settings, cache: QACache) -> None:
    # With the plan off, the writer alone writes each step (no decomposition call).
    three_steps = turn_settings.with_overrides(
        max_steps=3, direct_answer=False, rules_off="plan_first"
    )
    unfound = ["Which college did Tavistrom found?", "Which town did Ulden name?"]
    replies = [unfound[0], "unknown", unfound[1], "unknown"]
    _, state, _ = run_turn(three_steps, cache, StubDM(), ScriptedWriter(*replies, "Ulden River"))
    assert state["hop"] == 2 and state["notes"][0]["text"] == "2 sub-questions found no answer"
    third = "Which river flows past Tavistrom College?"
    writer = ScriptedWriter(*replies, third, "unknown", "Ulden River")
    lean = three_steps.with_overrides(rules_off="plan_first,dead_end_endings")
    _, state, _ = run_turn(lean, cache, StubDM(), writer)
    assert state["hop"] == 3 and state["notes"][0]["text"] == "3 steps taken"
    assert state["unanswerable"] == [*unfound, third]


def test_off_evidence_selection_a_step_reads_its_kept_passages_whole(
    turn_settings: Settings, cache: QACache
) -> None:
    """DM_rel scores a step's passages, then their sentences; whole passages need only
    the first."""
    chain = turn_settings.with_overrides(direct_answer=False)
    replies = (FIRST, "Brisk Hollow", SECOND, "Ulden River", "Ulden River")
    dm = StubDM(suff_rows=2)
    nodes, state, _ = run_turn(chain, cache, dm, ScriptedWriter(*replies))
    assert dm.asked.count("rel") == 4 and nodes == [*START, *STEP, *STEP, *nodes[-2:]]
    cache.clear()
    dm = StubDM(suff_rows=2)
    lean = chain.with_overrides(rules_off="evidence_selection")
    _, state, _ = run_turn(lean, cache, dm, ScriptedWriter(*replies))
    assert dm.asked.count("rel") == 2 and state["answer"] == "Ulden River"
    assert state["question"] == DEMO_QUESTION
