"""Passage retrieval: dense (MiniLM in Chroma), BM25 (bm25s), or both fused by RRF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from app.encoders.embeddings import Embedder
from app.index.bm25 import BM25Index
from app.index.store import CorpusIndex
from app.settings import FUSION_DEPTH, RRF_K, RetrievalMode


@dataclass(frozen=True)
class RetrievedPassage:
    id: int
    title: str
    text: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reciprocal_rank_fusion(rankings: list[list[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(d) = sum over lists of 1 / (k + rank of d), rank from 1."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def by_score(scores: Sequence[float]) -> list[int]:
    """Positions, highest score first (ties: the earlier position)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def fused_with_scores(order: Sequence[int], scores: Sequence[float], k: int) -> list[int]:
    """Positions ranked by RRF of `order` (positions, best first) and the order of
    `scores` (ties: the earlier position)."""
    return [i for i, _ in reciprocal_rank_fusion([list(order), by_score(scores)], k)]


class _RetrieveArgs(BaseModel):
    query: str = Field(description="What to look for, as a question or keywords.")
    k: int = Field(default=5, ge=1, le=50, description="How many passages to return.")


def signals_of(ranking: list[tuple[int, float]], sparse: list[tuple[int, float]]) -> list[float]:
    """`Retriever.retrieval_signals` from a fused ranking and its BM25 hits."""
    fused = [score for _, score in ranking[:3]] + [0.0, 0.0, 0.0]
    best_bm25 = sparse[0][1] if sparse else 0.0
    return [fused[1], fused[1] - fused[2], float(best_bm25)]


class Retriever:
    """Created once per index and shared; every query is read-only."""

    def __init__(
        self, index: CorpusIndex, embedder: Embedder, mode: RetrievalMode = "fused"
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.mode = mode
        self.bm25 = BM25Index(index.path / "bm25")

    def dense(self, query: str, k: int) -> list[tuple[int, float]]:
        """(id, cosine similarity) from the Chroma collection."""
        n = min(k, len(self.index))
        if n <= 0:
            return []
        vector = self.embedder.embed([query])
        result = self.index.collection.query(
            query_embeddings=vector, n_results=n, include=["distances"]
        )
        return [
            (int(i), 1.0 - float(d))
            for i, d in zip(result["ids"][0], result["distances"][0], strict=True)
        ]

    def sparse(self, query: str, k: int) -> list[tuple[int, float]]:
        return self.bm25.search(query, k)

    def ranked_ids(
        self, query: str, k: int, mode: RetrievalMode | None = None
    ) -> list[tuple[int, float]]:
        mode = mode or self.mode
        if not query.strip():
            return []
        if mode == "dense":
            return self.dense(query, k)
        if mode == "bm25":
            return self.sparse(query, k)
        return self._fused(query, max(k, FUSION_DEPTH))[0][:k]

    def _fused(
        self, query: str, depth: int
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """The dense and BM25 top `depth` fused by RRF, and the BM25 hits themselves."""
        sparse = self.sparse(query, depth)
        rankings = [[pid for pid, _ in self.dense(query, depth)], [pid for pid, _ in sparse]]
        return reciprocal_rank_fusion(rankings), sparse

    def retrieval_signals(self, query: str) -> list[float]:
        """How surely retrieval found what `query` needs, as DM_direct reads it
        (`app.dm.features.RETRIEVAL_SIGNALS`): the fused score at rank 2 (high when dense
        and lexical search agree on a second passage), its lead over rank 3, and the best
        BM25 score (how strongly the question's rare words are matched). Always from the
        fused ranking, whatever `mode` serves passages, so that fitting and serving agree."""
        if not query.strip():
            return [0.0, 0.0, 0.0]
        return signals_of(*self._fused(query, FUSION_DEPTH))

    def retrieve_with_signals(
        self, query: str, k: int
    ) -> tuple[list[RetrievedPassage], list[float]]:
        """`retrieve` and `retrieval_signals` of one query, from one search where the
        passages come from the same fused ranking."""
        if self.mode != "fused" or k > FUSION_DEPTH or not query.strip():
            return self.retrieve(query, k), self.retrieval_signals(query)
        ranking, sparse = self._fused(query, FUSION_DEPTH)
        return self.passages_of(ranking[:k]), signals_of(ranking, sparse)

    def retrieve(
        self, query: str, k: int = 5, mode: RetrievalMode | None = None
    ) -> list[RetrievedPassage]:
        """Top-k passages for `query`, best first."""
        return self.passages_of(self.ranked_ids(query, k, mode))

    def passages_of(self, ranked: list[tuple[int, float]]) -> list[RetrievedPassage]:
        """The passages of ranked (id, score) pairs, in order."""
        records = {p.id: p for p in self.index.passages([pid for pid, _ in ranked])}
        return [
            RetrievedPassage(pid, records[pid].title, records[pid].text, score)
            for pid, score in ranked
            if pid in records
        ]

    def as_tool(self) -> BaseTool:
        """The retriever as a LangChain tool, for agents and Studio."""

        def retrieve_passages(query: str, k: int = 5) -> list[dict[str, Any]]:
            return [p.as_dict() for p in self.retrieve(query, k)]

        return StructuredTool.from_function(
            func=retrieve_passages,
            name="retrieve_passages",
            description=f"Search the '{self.index.name}' corpus; returns passages "
            "(id, title, text, score), best first.",
            args_schema=_RetrieveArgs,
        )
