"""The compiled DeFT graph along each of its routes, in the fast tier: the scripted
writer, a stub DM and a stub retriever over a four-passage corpus, and a real QA cache
in a private SQLite file. Each test checks the nodes the graph ran, in order, and the
state after the turn. (Comparison questions have no route of their own yet: issue 53,
item 2.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stubs import NoExamples, ScriptedWriter

from app.index.store import PassageRecord
from app.settings import Settings
from graph.deft import build_deft
from graph.resources import Resources
from tools.qa_cache import QACache
from tools.retriever import RetrievedPassage

QUESTION = "Which river flows through the town where Tavistrom College is located?"
FIRST = "Where is Tavistrom College located?"
SECOND = "Which river flows through Brisk Hollow?"
CORPUS = {
    1: ("Tavistrom College", "Tavistrom College is a college in Brisk Hollow."),
    2: ("Brisk Hollow", "Brisk Hollow is a town on the Ulden River."),
    3: ("Ulden River", "The Ulden River is a river in the north."),
    4: ("Dunmere College", "Dunmere College is a college on the Brask River."),
}
# What the stub retriever finds for each query (ids, best first); other queries find nothing.
FOUND = {QUESTION: [1, 2, 4], FIRST: [1, 4], SECOND: [2, 3]}

# The nodes every DeFT turn starts and ends with, and the ones of one step that retrieves.
START = ["take_question", "retrieve_question_passages", "check_direct_answer"]
ASK = ["write_sub_question", "guard_self_contained", "lookup_qa_cache"]
READ = ["retrieve_for_sub_question", "filter_relevant", "select_evidence", "answer_sub_question"]
STEP = [*ASK, *READ, "update_qa_table", "check_sufficiency"]


class StubRetriever:
    """Finds the passages `FOUND` lists for a query, and keeps every query it was sent."""

    def __init__(self, found: dict[str, list[int]]) -> None:
        self.found, self.queries = found, []

    def retrieve(self, query: str, k: int) -> list[RetrievedPassage]:
        self.queries.append(query)
        ids = self.found.get(query, [])[:k]
        return [RetrievedPassage(i, *CORPUS[i], 1.0 / (rank + 1)) for rank, i in enumerate(ids)]

    def retrieve_with_signals(self, query: str, k: int) -> tuple[list, list[float]]:
        return self.retrieve(query, k), [0.5, 0.1, 10.0]


class StubIndex:
    """The corpus, with each passage stored as one sentence."""

    def sentences_of(self, passage_id: int) -> list[str]:
        return []

    def passages(self, ids: list[int]) -> list[PassageRecord]:
        return [PassageRecord(i, *CORPUS[i]) for i in ids]


class StubDM:
    """Every passage relevant; the question shallow and directly answerable as told; the
    table sufficient from `suff_rows` rows on. Keeps the kinds it was asked, in order."""

    def __init__(self, *, direct: bool = False, suff_rows: int = 2) -> None:
        self.direct, self.suff_rows, self.asked = direct, suff_rows, []

    def backend(self, kind: str) -> str:
        return "stub"

    def p_shallow(self, question: str) -> float:
        self.asked.append("depth")
        return 0.9

    def p_direct(self, question: str, passages: list, retrieval: list | None = None) -> float:
        self.asked.append("direct")
        return 0.9 if self.direct else 0.1

    def p_rel(self, question: str, passages: list, **how: Any) -> list[float]:
        self.asked.append("rel")
        return [0.9] * len(passages)

    def p_same(self, first: str, second: str) -> float:
        self.asked.append("same")
        return 0.0

    def p_suff(self, question: str, table: list) -> float:
        self.asked.append("suff")
        return 0.9 if len(table) >= self.suff_rows else 0.1


class NoVectors:
    """Embeddings that match nothing: the QA cache finds exact matches only."""

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)


@pytest.fixture
def turn_settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path).with_overrides(
        direct_answer=True, qa_cache=True, max_steps=6, sub_questions="write"
    )


@pytest.fixture
def cache(turn_settings: Settings):
    opened = QACache.open(turn_settings, "sample", "fp", NoVectors())  # type: ignore[arg-type]
    yield opened
    opened.close()


def run_turn(
    settings: Settings, cache: QACache, dm: StubDM, writer: ScriptedWriter
) -> tuple[list[str], dict[str, Any], StubRetriever]:
    """One turn of the compiled graph: the nodes it ran, its final state, the retriever."""
    retriever = StubRetriever(FOUND)
    resources = Resources(
        settings=settings,
        gateway=writer,  # type: ignore[arg-type]
        index=StubIndex(),  # type: ignore[arg-type]
        retriever=retriever,  # type: ignore[arg-type]
        dm=dm,  # type: ignore[arg-type]
        qa_cache=cache,
        examples=NoExamples(),  # type: ignore[arg-type]
        sentence_graph=None,
    )
    graph = build_deft(resources)
    nodes, state = [], {}
    for mode, chunk in graph.stream(
        {"question": QUESTION}, context=settings, stream_mode=["updates", "values"]
    ):
        if mode == "updates":
            nodes += list(chunk)
        else:
            state = chunk
    assert not writer.replies, "the graph made fewer LLM calls than scripted"
    return nodes, state, retriever


def rows(state: dict[str, Any]) -> list[tuple[str, str, list[int], str]]:
    return [
        (r["sub_question"], r["answer"], r["passage_ids"], r["source"]) for r in state["qa_table"]
    ]


def test_a_direct_answer_reads_the_question_passages_once(
    turn_settings: Settings, cache: QACache
) -> None:
    dm, writer = StubDM(direct=True), ScriptedWriter("Ulden River")
    nodes, state, retriever = run_turn(turn_settings, cache, dm, writer)
    assert nodes == [*START, "answer_directly", "reply"]
    assert state["direct"] is True and state["answer"] == "Ulden River"
    assert "hop" not in state and rows(state) == [] and retriever.queries == [QUESTION]
    assert dm.asked == ["depth", "direct", "rel", "rel"]  # DM_rel: passages, then sentences
    assert state["answer_passage_ids"] == [1, 2, 4]
    assert [c["id"] for c in state["citations"]] == [1, 2, 4]
    assert state["messages"][-1].content.startswith("Ulden River\n\nSources: ")


def test_a_two_hop_chain_answers_from_its_qa_table(turn_settings: Settings, cache: QACache) -> None:
    writer = ScriptedWriter(FIRST, "Brisk Hollow", SECOND, "Ulden River", "Ulden River")
    dm = StubDM(suff_rows=2)
    nodes, state, retriever = run_turn(turn_settings, cache, dm, writer)
    assert nodes == [*START, *STEP, *STEP, "answer_from_qa_table", "reply"]
    assert rows(state) == [
        (FIRST, "Brisk Hollow", [1, 4], "retrieved"),
        (SECOND, "Ulden River", [2, 3], "retrieved"),
    ]
    assert state["hop"] == 2 and state["sufficient"] is True
    assert state["answer"] == "Ulden River" and state["direct"] is False
    assert retriever.queries == [QUESTION, FIRST, SECOND]
    assert [d["kind"] for d in state["decisions"] if d["kind"] == "suff"] == ["suff", "suff"]
    assert [d["outcome"] for d in state["decisions"] if d["kind"] == "suff"] == [False, True]
    # Both answers went into the shared cache.
    assert cache.exact(FIRST).answer == "Brisk Hollow"  # type: ignore[union-attr]
    assert cache.exact(SECOND).answer == "Ulden River"  # type: ignore[union-attr]


def test_a_cached_sub_question_is_neither_retrieved_for_nor_read(
    turn_settings: Settings, cache: QACache
) -> None:
    cache.put(FIRST, "Brisk Hollow", [1])
    writer = ScriptedWriter(FIRST, SECOND, "Ulden River", "Ulden River")
    nodes, state, retriever = run_turn(turn_settings, cache, StubDM(suff_rows=2), writer)
    cached_step = [*ASK, "update_qa_table", "check_sufficiency"]
    assert nodes == [*START, *cached_step, *STEP, "answer_from_qa_table", "reply"]
    assert rows(state) == [
        (FIRST, "Brisk Hollow", [1], "cache"),
        (SECOND, "Ulden River", [2, 3], "retrieved"),
    ]
    assert state["hop"] == 2 and state["answer"] == "Ulden River"
    assert retriever.queries == [QUESTION, SECOND]  # nothing retrieved for FIRST
    assert cache.stats()["by_outcome"] == {"exact": 1, "miss": 1}


def test_a_dead_end_hands_over_to_the_fallback(turn_settings: Settings, cache: QACache) -> None:
    unfound = "Which college did Tavistrom found?"
    writer = ScriptedWriter(unfound, "unknown", "Ulden River")
    nodes, state, retriever = run_turn(
        turn_settings.with_overrides(max_steps=1), cache, StubDM(), writer
    )
    assert nodes == [*START, *STEP, "fallback_answer", "reply"]
    assert state["qa_table"] == [] and state["unanswerable"] == [unfound]
    assert state["hop"] == 1 and state["sufficient"] is False
    assert state["fallback_reason"] == "1 steps taken"
    assert state["fallback_question"] == QUESTION
    assert state["answer"] == "Ulden River" and state["answer_passage_ids"] == [1, 2, 4]
    assert retriever.queries == [QUESTION, unfound, QUESTION]  # the fallback searches Q again
    assert cache.stats()["entries"] == 0  # no answer, nothing cached
