"""Retrieval on the real sample index: dense (Chroma), BM25 (bm25s) and RRF fusion."""

from __future__ import annotations

import pytest

from app.index.store import CorpusIndex
from app.settings import Settings
from tools.retriever import Retriever, reciprocal_rank_fusion


def test_rrf_matches_hand_computed_scores() -> None:
    fused = dict(reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert [pid for pid, _ in reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60)] == [1, 3, 2]


@pytest.fixture(scope="module")
def retriever(settings: Settings, sample_index: str, embedder) -> Retriever:
    return Retriever(CorpusIndex.open(settings, sample_index), embedder)


@pytest.mark.parametrize("mode", ["dense", "bm25", "fused"])
def test_each_mode_finds_the_passage_about_the_entity(retriever: Retriever, mode: str) -> None:
    hits = retriever.retrieve("Who founded Velloway Ironworks?", k=3, mode=mode)
    assert len(hits) == 3
    assert hits[0].title == "Velloway Ironworks"
    assert hits[0].score >= hits[1].score >= hits[2].score


def test_k_and_empty_queries(retriever: Retriever) -> None:
    assert len(retriever.retrieve("lake", k=100)) == 24  # capped at the corpus size
    assert retriever.retrieve("   ", k=5) == []
    assert retriever.retrieve("zzqx wvvq", k=5, mode="bm25") == []  # no known word


def test_retrieval_signals_come_from_the_fused_ranking_whatever_the_mode(
    retriever: Retriever,
) -> None:
    question = "Who founded Velloway Ironworks?"
    fused = retriever.retrieve(question, k=3, mode="fused")
    best_bm25 = retriever.retrieve(question, k=1, mode="bm25")[0].score
    expected = [fused[1].score, fused[1].score - fused[2].score, best_bm25]
    assert retriever.retrieval_signals(question) == pytest.approx(expected)
    dense_only = Retriever(retriever.index, retriever.embedder, "dense")
    assert dense_only.retrieval_signals(question) == pytest.approx(expected)
    assert retriever.retrieval_signals("zzqx wvvq")[2] == 0.0  # no known word: no BM25 match


def test_one_search_gives_the_passages_and_their_signals(retriever: Retriever) -> None:
    dense_only = Retriever(retriever.index, retriever.embedder, "dense")
    for r in (retriever, dense_only):
        for question in ("Who founded Velloway Ironworks?", "Which river flows past it?", " "):
            passages, signals = r.retrieve_with_signals(question, 10)
            assert passages == r.retrieve(question, 10)
            assert signals == r.retrieval_signals(question)


def test_langchain_tool(retriever: Retriever) -> None:
    tool = retriever.as_tool()
    assert tool.name == "retrieve_passages"
    result = tool.invoke({"query": "Which ship did Benedek Haldstrom command?", "k": 2})
    assert len(result) == 2
    assert result[0]["title"] == "Benedek Haldstrom"
    assert set(result[0]) == {"id", "title", "text", "score"}


def test_entity_index(retriever: Retriever) -> None:
    hits = retriever.index.sentences_with("odile farrengast")
    passage_ids = {pid for _, pid, _ in hits}
    assert passage_ids == {6, 14}  # the founding sentence and her own passage
    assert retriever.index.sentences_with("Nobody Anywhere") == []
