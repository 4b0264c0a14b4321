"""The sentence graph at run time: seed sentences for a query, expansion along entity,
semantic and adjacency edges, and the entity index (docs/method.md section 3).

Loaded once per index (`SentenceGraph.open`) from the files `app/index/graph_build.py` wrote;
nothing is recomputed. Every tool returns an empty result, never an error, for a query
that finds nothing (no entities, no sentences, an index built without a graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from langchain_core.tools import BaseTool, StructuredTool
from scipy import sparse

from app.encoders.embeddings import Embedder
from app.index.graph_build import EDGE_TYPES, GRAPH_FILE, VECTORS_FILE
from app.index.nlp import SentenceNER
from app.index.store import CorpusIndex, SentenceRecord
from app.settings import (
    GRAPH_MAX_HOPS,
    GRAPH_MAX_WORDS,
    GRAPH_SEED_CANDIDATES,
    GRAPH_SEEDS,
)


@dataclass(frozen=True)
class GraphSentence:
    id: int
    passage_id: int
    title: str
    text: str
    hop: int  # 0 for a seed
    via: str  # edge type that reached it ("seed" for a seed)

    def as_passage(self) -> dict[str, Any]:
        """A sentence in the shape readers and the DM take passages in."""
        return {"id": self.passage_id, "title": self.title, "text": self.text}


def _sentence(record: SentenceRecord, hop: int, via: str) -> GraphSentence:
    return GraphSentence(record.id, record.passage_id, record.title, record.text, hop, via)


class SentenceGraph:
    """Typed sentence adjacency plus stored sentence vectors of one index."""

    def __init__(self, index: CorpusIndex, embedder: Embedder, dm: Any, ner: Any = None) -> None:
        self.index = index
        self.embedder = embedder
        self.dm = dm
        self._ner = ner
        stored = np.load(index.path / GRAPH_FILE)
        n = int(stored["n"][0])
        self.edges = {
            name: sparse.csr_matrix(
                (stored[f"{name}_data"], stored[f"{name}_indices"], stored[f"{name}_indptr"]),
                shape=(n, n),
            )
            for name in EDGE_TYPES
        }
        self.vectors = np.load(index.path / VECTORS_FILE, mmap_mode="r")

    @classmethod
    def open(cls, index: CorpusIndex, embedder: Embedder, dm: Any) -> SentenceGraph | None:
        """None for an index built before the graph existed (rebuild with
        `hoprag graph build --index NAME`)."""
        if not (index.path / GRAPH_FILE).is_file() or not (index.path / VECTORS_FILE).is_file():
            return None
        return cls(index, embedder, dm)

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def edge_counts(self) -> dict[str, int]:
        return {name: int(m.nnz // 2) for name, m in self.edges.items()}

    @property
    def ner(self) -> Any:
        if self._ner is None:  # spaCy loads on the first entity query only
            self._ner = SentenceNER()
        return self._ner

    def entities(self, text: str) -> list[str]:
        """Named entities spaCy finds in `text`, in order, without repeats."""
        if not text.strip():
            return []
        analysis = next(self.ner.analyse([text]))
        return list(dict.fromkeys(surface for surface, _, _ in analysis.mentions))

    def sentences_with(self, entity: str) -> list[GraphSentence]:
        ids = [sid for sid, _, _ in self.index.sentences_with(entity)]
        return [_sentence(r, 0, "entity-index") for r in self.index.sentences(ids)]

    def seed_sentences(self, query: str, k: int = GRAPH_SEEDS) -> list[GraphSentence]:
        """Cosine candidates over all sentences, reranked by the DM's relevance score."""
        if not query.strip() or not len(self):
            return []
        scores = np.asarray(self.vectors @ self.embedder.embed([query])[0].astype(np.float16))
        take = min(GRAPH_SEED_CANDIDATES, len(scores))
        candidates = np.argpartition(-scores.astype(np.float32), take - 1)[:take]
        records = self.index.sentences([int(i) for i in candidates])
        relevance = self.dm.p_rel(
            query,
            [{"id": r.passage_id, "title": r.title, "text": r.text} for r in records],
            stored=False,
        )
        ranked = sorted(zip(relevance, records, strict=True), key=lambda x: -x[0])[:k]
        return [_sentence(r, 0, "seed") for _, r in ranked]

    def similarity(self, query: str, ids: Sequence[int]) -> list[float]:
        """Cosine of the query and each sentence (stored vectors; one query encoding)."""
        if not ids:
            return []
        rows = self.vectors[np.asarray(ids, dtype=np.int64)].astype(np.float32)
        return (rows @ self.embedder.embed([query])[0].astype(np.float32)).tolist()

    def neighbours(self, ids: Sequence[int]) -> dict[int, tuple[float, str]]:
        """Sentences one edge away from `ids` (not in it): total edge weight and the type
        of the strongest edge that reached each."""
        total: dict[int, float] = {}
        strongest: dict[int, tuple[float, str]] = {}
        if not ids:
            return {}
        rows = np.asarray(ids, dtype=np.int64)
        for name, matrix in self.edges.items():
            sub = matrix[rows].tocoo()
            for col, weight in zip(sub.col.tolist(), sub.data.tolist(), strict=True):
                total[col] = total.get(col, 0.0) + weight
                if weight > strongest.get(col, (0.0, ""))[0]:
                    strongest[col] = (weight, name)
        for sid in ids:
            total.pop(int(sid), None)
        return {col: (weight, strongest[col][1]) for col, weight in total.items()}

    def expand(
        self,
        seeds: Sequence[GraphSentence],
        question: str,
        *,
        max_hops: int = GRAPH_MAX_HOPS,
        max_words: int = GRAPH_MAX_WORDS,
        sufficient: Any = None,
    ) -> list[GraphSentence]:
        """Seeds, then all their one-hop neighbours, then further hops (strongest links
        first) until `sufficient(question, sentences)` says yes, `max_hops` is reached or
        about `max_words` words are gathered."""
        gathered = list(seeds)
        words = sum(len(s.text.split()) for s in gathered)
        for hop in range(1, max_hops + 1):
            found = self.neighbours([s.id for s in gathered])
            if not found:
                break
            order = sorted(found, key=lambda sid: (-found[sid][0], sid))
            added = 0
            for record in self.index.sentences(order):
                if words >= max_words:
                    break
                gathered.append(_sentence(record, hop, found[record.id][1]))
                words += len(record.text.split())
                added += 1
            if not added or words >= max_words:
                break
            if sufficient is not None and sufficient(question, gathered):
                break
        return gathered

    def as_tools(self) -> list[BaseTool]:
        """seed_sentences, expand_from_seeds, entities and sentences_with as LangChain tools."""

        def seed_sentences(query: str, k: int = GRAPH_SEEDS) -> list[dict[str, Any]]:
            """The k sentences most relevant to the query (cosine, then DM relevance)."""
            return [asdict(s) for s in self.seed_sentences(query, k)]

        def expand_from_seeds(query: str, max_words: int = GRAPH_MAX_WORDS) -> list[dict[str, Any]]:
            """Sentences reached from the query's seed sentences along the graph."""
            seeds = self.seed_sentences(query)
            return [asdict(s) for s in self.expand(seeds, query, max_words=max_words)]

        def entities(text: str) -> list[str]:
            """Named entities in the text."""
            return self.entities(text)

        def sentences_with(entity: str) -> list[dict[str, Any]]:
            """Every sentence of the corpus that mentions the entity."""
            return [asdict(s) for s in self.sentences_with(entity)]

        return [
            StructuredTool.from_function(f)
            for f in (seed_sentences, expand_from_seeds, entities, sentences_with)
        ]
