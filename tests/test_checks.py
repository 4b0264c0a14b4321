"""Checks of user input that run before any model loads (`app/checks.py`)."""

from __future__ import annotations

import pytest

from app.checks import check_name, check_question, check_system
from app.errors import UserError
from app.settings import MAX_QUESTION_CHARS, SYSTEM_NAMES
from graph.systems import SYSTEMS


def test_the_cheap_system_names_are_the_systems_the_graphs_build() -> None:
    assert tuple(SYSTEMS) == SYSTEM_NAMES


@pytest.mark.parametrize("name", ["", "magic", "DEFT", "deft "])
def test_unknown_systems_are_refused(name: str) -> None:
    with pytest.raises(UserError, match="unknown system"):
        check_system(name)


def test_questions_are_cleaned_and_refused_when_empty_or_too_long() -> None:
    assert check_question("  Who\x01founded\tit? \u200b") == "Who founded it?"
    for empty in ("", " \t ", "\x01\x02\x7f"):
        with pytest.raises(UserError, match="empty"):
            check_question(empty)
    with pytest.raises(UserError, match="too long"):
        check_question("x" * (MAX_QUESTION_CHARS + 1))


@pytest.mark.parametrize(
    "name",
    [
        "",
        "../x",
        ".hidden",
        "a" * 65,
        "a b",
        "sample\n",
        "x.qa_cache.sqlite",
        "x.qa_cache.sqlite-wal",
    ],
)
def test_bad_index_names_are_refused(name: str) -> None:
    with pytest.raises(UserError, match="not a valid index name"):
        check_name(name)


@pytest.mark.parametrize("name", ["a", "my.docs-2_b", "x" * 64, "qa_cache.sqlite.x"])
def test_good_index_names_pass(name: str) -> None:
    assert check_name(name) == name
