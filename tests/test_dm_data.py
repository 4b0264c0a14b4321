"""DM training data: labels follow the gold annotations, and the split is stable."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.dm.data import (
    DMExample,
    Item,
    count,
    depth_example,
    direct_example,
    extra_hotpotqa_depth_examples,
    extra_musique_items,
    extra_rel_examples,
    is_calibration,
    load_rewordings,
    relation_answers,
    relation_subjects,
    same_examples,
    suff_examples,
    suff_near_misses,
)
from app.dm.rewordings import build_rewordings, templates_from

FIXTURE_DATA = Path(__file__).parent / "data" / "benchmarks"  # made-up questions

CHAIN = Item(
    id="q1",
    benchmark="2wikimultihopqa",
    question="Where was the director of film Raise Your Voice born?",
    gold_ids=[3, 4],
    hops=2,
    steps=[
        ("Who directed Raise Your Voice?", "Sean McNamara", 3),
        ("Where was Sean McNamara born?", "Burbank", 4),
    ],
    triples=[
        ("Raise Your Voice", "director", "Sean McNamara"),
        ("Sean McNamara", "place of birth", "Burbank"),
    ],
    relations=[("Raise Your Voice", "director"), ("Sean McNamara", "place of birth")],
)


def test_rel_labels_every_gold_passage_for_the_question_and_one_per_step() -> None:
    texts = {3: "Raise Your Voice: ...", 4: "Sean McNamara: ...", 9: "Burbank: ..."}
    examples = list(extra_rel_examples(CHAIN, texts, {3, 4}))
    positives = {(e.text_a, e.text_b[:4], e.extra["query"]) for e in examples if e.label}
    assert positives == {
        (CHAIN.question, "Rais", "question"),
        (CHAIN.question, "Sean", "question"),
        ("Who directed Raise Your Voice?", "Rais", "sub-question"),
        ("Where was Sean McNamara born?", "Sean", "sub-question"),
    }
    negatives = [e for e in examples if not e.label]
    assert {e.text_b for e in negatives} == {texts[9]}
    assert sorted(e.extra["query"] for e in negatives) == [
        "question",
        "sub-question",
        "sub-question",
    ]


def test_suff_is_yes_only_for_the_whole_chain() -> None:
    rows = list(suff_examples(CHAIN))
    assert [(r.label, r.how) for r in rows] == [(0, "chain-prefix"), (1, "gold-chain")]
    assert rows[1].text_b.splitlines() == [
        "- Who directed Raise Your Voice? Sean McNamara",
        "- Where was Sean McNamara born? Burbank",
    ]


def test_suff_near_misses_ask_another_relation_or_repeat_a_step() -> None:
    other = Item(
        "q3",
        "2wikimultihopqa",
        "Q?",
        [],
        2,
        [("Who directed Z?", "Ann Lee", None), ("When was Ann Lee born?", "1950", None)],
        [],
        [("Z", "director"), ("Ann Lee", "date of birth")],
    )
    answers = relation_answers([CHAIN, other])
    assert answers["place of birth"] == ["Burbank"] and answers["date of birth"] == ["1950"]
    rows = list(suff_near_misses(CHAIN, answers))
    assert [r.label for r in rows] == [0, 0, 0]
    wrong = [r.text_b.splitlines() for r in rows if r.how == "wrong-step"]
    # the second step asks the closest other relation ("date of birth": "birth" shared)
    assert wrong[-1] == [
        "- Who directed Raise Your Voice? Sean McNamara",
        "- When was Sean McNamara born? 1950",
    ]
    repeated = [r.text_b.splitlines() for r in rows if r.how == "repeated-step"]
    assert repeated == [
        [
            "- Who directed Raise Your Voice? Sean McNamara",
            "- What is the director of Raise Your Voice? Sean McNamara",
        ]
    ]
    assert list(suff_near_misses(CHAIN, answers)) == rows  # stable


def test_same_pairs_paraphrases_and_near_misses() -> None:
    rows = list(same_examples(CHAIN, ["director", "place of birth", "spouse", "father"]))
    positives = [r for r in rows if r.label == 1]
    assert ("Who directed Raise Your Voice?", "What is the director of Raise Your Voice?") in {
        (r.text_a, r.text_b) for r in positives
    }
    misses = [r for r in rows if r.label == 0]
    assert all(r.how.startswith("near-miss") for r in misses)
    assert all(r.text_a != r.text_b for r in misses)
    assert list(same_examples(CHAIN, ["director", "place of birth", "spouse", "father"])) == rows
    # Every positive pairs a template with a plain form; so do near misses, or a plain
    # second question alone would read as "same".
    plain_form = re.compile(r"^What is (the .+ of .+|.+'s .+)\?$")
    assert all(plain_form.match(r.text_b) for r in positives)
    plain_misses = [r for r in misses if r.how.endswith("-plain")]
    assert plain_misses and all(plain_form.match(r.text_b) for r in plain_misses)
    for how in ("near-miss-relation", "near-miss-subject"):
        assert sum(r.how == how for r in misses) == sum(r.how == f"{how}-plain" for r in misses)


REWORDED = {
    "director": ["Who was the director of {s}?", "Who made the film {s}?"],
    "place of birth": ["In which place was {s} born?", "What is the birthplace of {s}?"],
}


def test_same_pairs_from_rewordings_name_the_same_subject_in_other_words() -> None:
    relations = ["director", "place of birth", "spouse", "father"]
    plain = list(same_examples(CHAIN, relations))
    rows = list(same_examples(CHAIN, relations, REWORDED))
    assert [r for r in rows if r.how in {p.how for p in plain}] == plain  # unchanged
    yes = [r for r in rows if r.how in ("llm-rewording", "llm-rewording-pair")]
    assert len(yes) == 4 and all(r.label == 1 for r in yes)  # two steps, two pairs each
    for r in yes:  # both questions name the step's subject, in other words
        subject = "Raise Your Voice" if "Raise Your Voice" in r.text_a else "Sean McNamara"
        assert subject in r.text_b and r.text_a != r.text_b
    assert {r.text_b for r in yes} <= {
        t.format(s="Raise Your Voice") for t in REWORDED["director"]
    } | {t.format(s="Sean McNamara") for t in REWORDED["place of birth"]}
    relation_miss = [r for r in rows if r.how == "near-miss-relation-llm"]
    subject_miss = [r for r in rows if r.how == "near-miss-subject-llm"]
    assert len(relation_miss) == len(subject_miss) == 2
    assert all(r.label == 0 and r.text_a != r.text_b for r in relation_miss + subject_miss)
    assert list(same_examples(CHAIN, relations, REWORDED)) == rows  # stable


def test_peer_near_misses_swap_in_another_subject_of_the_same_relation() -> None:
    peers = relation_subjects(
        [CHAIN, Item("q9", "2wikimultihopqa", "Q?", [], 2, [], [("Titanic", "director", "JC")])]
    )
    assert peers == {
        "director": ["Raise Your Voice", "Titanic"],
        "place of birth": ["Sean McNamara"],
    }
    rows = list(same_examples(CHAIN, ["director", "place of birth"], REWORDED, peers))
    peer = [r for r in rows if r.how == "near-miss-peer"]
    assert [(r.text_a, r.text_b, r.label) for r in peer] == [
        ("Who directed Raise Your Voice?", "Who directed Titanic?", 0)
    ]  # no peer for a relation no other question asks of another subject
    swapped = [r.text_b for r in rows if r.how == "near-miss-subject-llm"]
    assert any("Titanic" in text for text in swapped)


def test_rewording_replies_become_templates_over_the_subject() -> None:
    reply = (
        "1. Who was the director of Raise Your Voice?\n"
        "- Who directed Raise Your Voice?\n"  # the relation's own template: dropped
        "Who made Raise Your Voice (the film)?\n"
        "Raise Your Voice was directed by whom?\n"
        "Who directed it?\n"  # names no subject: dropped
        "Who was the director of Raise Your Voice?\n"  # a repeat: dropped
        "Tell me who directed Raise Your Voice."  # not a question: dropped
    )
    assert templates_from(reply, "Raise Your Voice", "director") == [
        "Who was the director of {s}?",
        "Who made {s} (the film)?",
        "{s} was directed by whom?",
    ]
    assert templates_from("Who is {odd} of X?", "X", "father") == ["Who is {{odd}} of {s}?"]


def test_the_shipped_rewordings_cover_train_and_dev() -> None:
    rewordings = load_rewordings()
    assert set(rewordings) == {"train", "dev"}
    for split in ("train", "dev"):
        assert sum(map(len, rewordings[split].values())) > 0
        for templates in rewordings[split].values():
            assert all(t.count("{s}") >= 1 and t.format(s="X") for t in templates)


def test_train_and_dev_are_reworded_apart_each_from_a_subject_of_its_own() -> None:
    """On the made-up benchmark folder of tests/data, with a chat model that numbers its
    replies: one call per relation and split, asked about that split's first subject, and
    each split keeps its own calls' wordings."""
    asked: list[str] = []

    def invoke(messages: list[Any]) -> str:
        asked.append(messages[-1].content.removeprefix("Question: "))
        return f"Reply {len(asked)}: {asked[-1]}"

    out = build_rewordings(FIXTURE_DATA, invoke, model="stub")
    assert asked == [
        "Who directed The Pale Ferrymen?",  # train
        "Who is the father of Perrin Osgood?",
        "Where was Harwin Dask born?",
        "Who directed The Bright Anchor?",  # dev
        "Who is the father of Ines Vasquell?",
        "Where was Benedek Haldstrom born?",
    ]
    for split, first in (("train", 1), ("dev", 4)):
        assert out[split] == {
            "director": [f"Reply {first}: Who directed {{s}}?"],
            "father": [f"Reply {first + 1}: Who is the father of {{s}}?"],
            "place of birth": [f"Reply {first + 2}: Where was {{s}} born?"],
        }


def test_depth_and_counts() -> None:
    assert depth_example(CHAIN).label == 1
    deep = Item("q2", "musique", "Q?", [1, 2, 3], 3, [], [])
    assert depth_example(deep).label == 0
    rows = [depth_example(CHAIN), depth_example(deep), DMExample("rel", "a", "b", 1, "x", "y")]
    assert count(rows) == {"depth": {"label=0": 1, "label=1": 1}, "rel": {"label=1": 1}}


def test_extra_train_questions_give_depth_rows_with_their_hops(tmp_path: Path) -> None:
    extra = tmp_path / "extra_train"
    extra.mkdir()
    hotpot = {"question": "Which band formed first, Lit or Adorable?", "answer": "Lit"}
    (extra / "hotpotqa_train_hipporag100.json").write_text(json.dumps([{**hotpot, "_id": "h1"}]))
    (extra / "hotpotqa_train_ecm500_gold_evidence_only.json").write_text(
        json.dumps([hotpot, {"question": "Who wrote the novel a film was based on?"}])
    )
    rows = list(extra_hotpotqa_depth_examples(tmp_path))
    assert (rows[0].text_a, rows[0].label, rows[0].question_id) == (hotpot["question"], 1, "h1")
    assert len(rows) == 2  # the question both files hold counts once
    assert {r.source for r in rows} == {"extra_train/hotpotqa"} and rows[1].question_id
    step = {"question": "Who directed X?", "answer": "Y", "paragraph_support_idx": 0}
    musique = {
        "id": "3hop1__1",
        "question": "When was the director of X's birthplace founded?",
        "paragraphs": [{"title": "X", "paragraph_text": "X is a film.", "is_supporting": True}],
        "question_decomposition": [step, {**step, "question": "#1 >> place of birth"}, step],
        "answer": "1850",
    }
    (extra / "musique_train_hipporag100.json").write_text(json.dumps([musique]))
    [(item, _, _)] = extra_musique_items(tmp_path)
    assert item.hops == 3 and depth_example(item).label == 0
    assert list(extra_hotpotqa_depth_examples(tmp_path / "nowhere")) == []


class _TopW:
    """A retriever whose top w for the question is fixed."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def retrieve_with_signals(self, query: str, k: int) -> tuple[list[Any], list[float]]:
        return [SimpleNamespace(id=i) for i in self.ids[:k]], [0.03, 0.001, 7.5]


def test_direct_is_yes_only_when_the_top_w_holds_every_gold_passage() -> None:
    complete = direct_example(CHAIN, _TopW([4, 8, 3]), 3)
    assert complete.label == 1 and complete.extra["passage_ids"] == [4, 8, 3]
    assert complete.extra["retrieval"] == [0.03, 0.001, 7.5]  # stored for the direct model
    assert direct_example(CHAIN, _TopW([4, 8, 9, 3]), 3).label == 0  # 3 is below the top w


def test_calibration_split_is_stable_and_about_fifteen_percent() -> None:
    ids = [f"question-{i}" for i in range(2000)]
    share = sum(map(is_calibration, ids)) / len(ids)
    assert 0.12 < share < 0.18
    assert [is_calibration(i) for i in ids[:50]] == [is_calibration(i) for i in ids[:50]]
