"""Metric code against hand-computed cases."""

from __future__ import annotations

import pytest

from app.eval.metrics import (
    chain_covered,
    contain_match,
    exact_match,
    mcnemar_exact,
    prompt_reuse,
    token_f1,
)


def test_exact_match_uses_aliases() -> None:
    assert exact_match("the United States", ["USA", "United States"]) == 1.0
    assert exact_match("United States of America", ["USA", "United States"]) == 0.0


def test_token_f1_by_hand() -> None:
    # prediction tokens: kenton, county, kentucky; gold: kenton, county
    # precision 2/3, recall 2/2 -> F1 = 2 * (2/3 * 1) / (2/3 + 1) = 0.8
    assert token_f1("Kenton County, Kentucky", ["Kenton County"]) == pytest.approx(0.8)
    assert token_f1("Boone County", ["Kenton County", "Boone"]) == pytest.approx(2 / 3)
    assert token_f1("nothing", ["Kenton County"]) == 0.0
    assert token_f1("", [""]) == 1.0


def test_contain() -> None:
    assert contain_match("It was born in Burbank, California.", ["Burbank, California"]) == 1.0
    assert contain_match("California", ["Burbank, California"]) == 0.0
    assert contain_match("anything", [""]) == 0.0


def test_chain_coverage() -> None:
    assert chain_covered([5, 1, 9], [1, 9]) == 1.0
    assert chain_covered([5, 1], [1, 9]) == 0.0


def test_mcnemar_exact_by_hand() -> None:
    # 1 vs 6 discordant pairs: p = 2 * (C(7,0) + C(7,1)) / 2^7 = 2 * 8 / 128 = 0.125
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0  # capped at 1
    # 0 vs 10: 2 / 1024
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_prompt_reuse_is_the_reused_share_of_input_tokens() -> None:
    rows = [{"input_tokens": 100, "cached_tokens": 60}, {"input_tokens": 100, "cached_tokens": 0}]
    assert prompt_reuse(rows) == 0.3
    # runs recorded before reuse was metered have no such field: no figure, not 0
    assert prompt_reuse([{"input_tokens": 100}]) is None
    assert prompt_reuse([]) is None
