"""Evidence selection (tools/evidence.py): which sentences a read gets, and how what
several steps read of one passage is counted."""

from __future__ import annotations

from typing import Any

from graph.state import merge_passages
from tools.evidence import opens_with_pronoun, select_sentences

SENTENCES = {
    1: [
        "Odile Farrengast is a painter.",
        "She was born in the town of Oskelund.",
        "Bees are kept by her brother.",
    ],
    2: ["Oskelund lies on the Ulden River.", "It has a market every Tuesday."],
    3: ["The Brask River is long."],
}
PASSAGES = [
    {"id": pid, "title": f"P{pid}", "text": " ".join(texts)} for pid, texts in SENTENCES.items()
]


class _Index:
    def sentences_of(self, passage_id: int) -> list[str]:
        return SENTENCES.get(passage_id, [])


class _KeywordDM:
    """DM_rel as the share of a fixed set of words a sentence holds."""

    def __init__(self, *words: str) -> None:
        self.words = {w.lower() for w in words}
        self.batches: list[int] = []

    def p_rel(self, question: str, passages: list[dict[str, Any]], **_: Any) -> list[float]:
        self.batches.append(len(passages))
        return [
            len(self.words & set(p["text"].lower().strip(".").split())) / len(self.words)
            for p in passages
        ]


class _ScoredDM:
    """DM_rel from a table of sentence scores (0 for the rest)."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def p_rel(self, question: str, passages: list[dict[str, Any]], **_: Any) -> list[float]:
        return [self.scores.get(p["text"], 0.0) for p in passages]


def _read(chosen: list[dict[str, Any]]) -> dict[int, str]:
    return {p["id"]: p["text"] for p in chosen}


def test_a_step_reads_its_best_sentences_within_the_budget() -> None:
    dm = _KeywordDM("born", "town")
    chosen = select_sentences(dm, _Index(), "Where was Odile born?", PASSAGES, budget=12)
    assert dm.batches == [6]  # every sentence of every passage, one batch
    # "She was born ..." brings the sentence that says who she is; nothing else fits
    assert _read(chosen) == {
        1: "Odile Farrengast is a painter. She was born in the town of Oskelund."
    }
    assert chosen[0]["sentences"] == [[0, SENTENCES[1][0]], [1, SENTENCES[1][1]]]


def test_the_budget_always_leaves_one_sentence() -> None:
    passages = [PASSAGES[2], PASSAGES[0]]
    chosen = select_sentences(_KeywordDM("brask"), _Index(), "Which river?", passages, budget=1)
    assert _read(chosen) == {3: "The Brask River is long."}


def test_a_step_weighs_a_sentences_score_with_its_passages_rank() -> None:
    """The passages come best first: the first passage's best sentence beats a better
    one of the last passage, which comes next, before the first passage's other lines."""
    dm = _ScoredDM({SENTENCES[1][2]: 0.5, SENTENCES[3][0]: 0.9})
    assert _read(select_sentences(dm, _Index(), "q", PASSAGES, budget=6)) == {
        1: "Bees are kept by her brother."
    }
    assert _read(select_sentences(dm, _Index(), "q", PASSAGES, budget=11)) == {
        1: "Bees are kept by her brother.",
        3: "The Brask River is long.",
    }


def test_a_final_read_takes_every_passages_best_sentence_first() -> None:
    dm = _ScoredDM(
        {
            SENTENCES[1][0]: 0.9,
            SENTENCES[1][2]: 0.8,
            SENTENCES[2][0]: 0.7,
            SENTENCES[3][0]: 0.1,
        }
    )
    alone = select_sentences(dm, _Index(), "q", PASSAGES, budget=17)
    spread = select_sentences(dm, _Index(), "q", PASSAGES, budget=17, every_passage=True)
    assert set(_read(alone)) == {1, 2}  # by score: passage 3's line never makes the cut
    assert set(_read(spread)) == {1, 2, 3}
    assert _read(spread)[3] == "The Brask River is long."


def test_sentences_that_are_not_adjacent_are_marked_as_cut() -> None:
    dm = _KeywordDM("painter", "bees")
    chosen = select_sentences(dm, _Index(), "q", PASSAGES[:1], budget=12)
    assert _read(chosen) == {1: "Odile Farrengast is a painter. ... Bees are kept by her brother."}


def test_an_index_without_sentences_reads_the_passage_as_one() -> None:
    class _Bare:
        def sentences_of(self, passage_id: int) -> list[str]:
            return []

    passage = {"id": 9, "title": "T", "text": "One. Two."}
    chosen = select_sentences(_KeywordDM("one"), _Bare(), "q", [passage], budget=1)
    assert _read(chosen) == {9: "One. Two."}
    assert select_sentences(_KeywordDM("one"), _Bare(), "q", [], budget=50) == []


def test_pronoun_openers() -> None:
    assert opens_with_pronoun("She was born there.") and opens_with_pronoun('"It" is a film.')
    assert not opens_with_pronoun("Shelby was born there.") and not opens_with_pronoun("")


def test_excerpts_of_one_passage_merge_by_sentence() -> None:
    dm = _KeywordDM("painter")
    first = select_sentences(dm, _Index(), "q", PASSAGES[:1], budget=5)
    second = select_sentences(_KeywordDM("bees"), _Index(), "q", PASSAGES[:1], budget=5)
    merged = merge_passages(first, second)
    assert _read(merged) == {1: "Odile Farrengast is a painter. ... Bees are kept by her brother."}
    # a whole passage read covers every excerpt of it, before or after
    assert merge_passages(merged, PASSAGES[:1]) == PASSAGES[:1]
    assert merge_passages(PASSAGES[:1], first) == PASSAGES[:1]
