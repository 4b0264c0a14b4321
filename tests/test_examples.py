"""Worked examples for the sub-question writer: gold chains from training annotations,
and the bank that picks the most similar ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.settings import Settings
from app.traindata import (
    EXAMPLES_FILE,
    musique_chain,
    phrase_relation,
    wiki2_chain,
    write_examples,
)
from tools.examples import ExampleBank, render_steps

FIXTURE_DATA = Path(__file__).parent / "data" / "benchmarks"  # made-up questions


def test_relations_read_as_questions() -> None:
    assert phrase_relation("Waking the Dead (film)", "director") == "Who directed Waking the Dead?"
    assert phrase_relation("Orhan", "place of birth") == "Where was Orhan born?"
    assert phrase_relation("X", "licensed to broadcast to") == (
        "What is the licensed to broadcast to of X?"
    )


def test_musique_back_references_are_resolved_with_gold_answers() -> None:
    item = {
        "question": "When was the start of the battle of the birthplace of the performer of III?",
        "question_decomposition": [
            {"question": "III >> performer", "answer": "Stanton Moore"},
            {"question": "#1 >> place of birth", "answer": "New Orleans"},
            {"question": "when did the battle of #2 start", "answer": "December 14, 1814"},
        ],
    }
    chain = musique_chain(item, "test")
    assert chain is not None
    assert [q for q, _ in chain.steps] == [
        "Who is the performer of III?",
        "Where was Stanton Moore born?",
        "When did the battle of New Orleans start?",
    ]
    forward = {
        "question": "Q?",
        "question_decomposition": [
            {"question": "what is #2", "answer": "a"},
            {"question": "b >> c", "answer": "d"},
        ],
    }
    assert musique_chain(forward, "test") is None  # a reference forward cannot be shown


def test_wiki2_triples_become_a_chain() -> None:
    item = {
        "question": "Who is the paternal grandfather of Fakhr Al-Dawla?",
        "evidences": [
            ["Fakhr al-Dawla", "father", "Rukn al-Dawla"],
            ["Rukn al-Dawla", "father", "Buya"],
        ],
    }
    chain = wiki2_chain(item, "test")
    assert chain is not None and chain.steps[1] == ("Who is the father of Rukn al-Dawla?", "Buya")


class _Embedder:
    """Bag-of-words vectors: similar wording, similar vector (enough to test ranking)."""

    def embed(self, texts: list[str]) -> np.ndarray:
        vocab = ["born", "directed", "film", "father", "river", "city"]
        rows = [[float(w in t.lower()) for w in vocab] + [1e-3] for t in texts]
        v = np.array(rows, dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_bank_picks_the_most_similar_chains_most_similar_last(tmp_path: Path) -> None:
    chains = [
        {
            "question": "Where was the father of X born?",
            "steps": [["Who is the father of X?", "Y"], ["Where was Y born?", "Z"]],
            "source": "t",
        },
        {
            "question": "Who directed the film F?",
            "steps": [["Who directed F?", "D"], ["Who is D?", "E"]],
            "source": "t",
        },
        {
            "question": "Which river runs through the city C?",
            "steps": [["q1?", "a"], ["q2?", "b"]],
            "source": "t",
        },
    ]
    path = tmp_path / "examples.json"
    path.write_text(json.dumps(chains))
    bank = ExampleBank(_Embedder(), path)  # type: ignore[arg-type]
    picked = bank.select("Where was the father of the director of film G born?", 2)
    assert [e.question for e in picked] == [chains[1]["question"], chains[0]["question"]]
    text = bank.render("Who was the father of Q born?", 1)
    assert text == "Complex question: Where was the father of X born?\n" + render_steps(
        [("Who is the father of X?", "Y"), ("Where was Y born?", "Z")]
    )


def test_the_shipped_bank_holds_only_training_questions() -> None:
    shipped = json.loads(EXAMPLES_FILE.read_text())
    assert len(shipped) > 300
    assert {c["source"] for c in shipped} <= {
        "musique/train",
        "extra_train/musique",
        "2wikimultihopqa/train",
    }


def _dev_questions(data: Path) -> set[str]:
    return {
        q["question"]
        for benchmark in ("musique", "2wikimultihopqa")
        for q in json.loads((data / benchmark / "questions.json").read_text())
        if q["split"] == "dev"
    }


def test_the_bank_is_built_from_training_questions_only(tmp_path: Path) -> None:
    """On the made-up benchmark folder of tests/data: dev questions, which have gold
    decompositions too, never become worked examples."""
    out = tmp_path / "examples.json"
    write_examples(FIXTURE_DATA, out)
    bank = json.loads(out.read_text())
    dev = _dev_questions(FIXTURE_DATA)
    assert len(dev) == 4 and not dev & {c["question"] for c in bank}
    sources = sorted(c["source"] for c in bank)
    assert sources == ["2wikimultihopqa/train"] * 2 + ["musique/train"] * 2
    assert bank[0]["steps"] == [
        ["Who founded Tavistrom College?", "Augustin Reyvald"],
        ["Where was Augustin Reyvald born?", "Veskaby"],
    ]


def test_the_shipped_bank_holds_no_dev_question_of_the_benchmark_data() -> None:
    data = Settings().data
    if not (data / "musique" / "questions.json").is_file():
        pytest.skip(f"no benchmark data in {data} (HOPRAG_DATA): checked on tests/data only")
    shipped = {c["question"] for c in json.loads(EXAMPLES_FILE.read_text())}
    assert not _dev_questions(data) & shipped
