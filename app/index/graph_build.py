"""Build the ChainRAG sentence graph of an index (docs/method.md section 3), once per corpus.

Nodes are the index's sentences (SQLite ids). Three typed, weighted edge sets, each a
symmetric `scipy.sparse` matrix saved in `sentence_graph.npz` beside the index:

* `entity`: two sentences share a key entity; weight = number of shared key entities.
  Key entities are the top 60% by BM25 importance over the sentences, taken here as
  df * idf (a corpus has no query; df * idf ranks entities that recur without being
  everywhere first, and an entity seen once links nothing). Entities in more than
  `ENTITY_MAX_SENTENCES` sentences are hubs ("American") and link no pairs.
* `semantic`: each sentence's top 10 by MiniLM cosine, kept where the pair is mutual;
  weight = cosine.
* `adjacent`: same passage, at most 3 sentences apart; weight = 1 / distance.

Sentence vectors are stored too (`sentence_vectors.npy`, float16), so loading the graph
recomputes nothing; a rebuild reuses the vectors of sentences whose text it has seen.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from tqdm import tqdm

from app.encoders.embeddings import Embedder
from app.settings import (
    ENTITY_MAX_SENTENCES,
    GRAPH_ADJACENT_WINDOW,
    GRAPH_KEY_ENTITY_SHARE,
    GRAPH_SEMANTIC_NEIGHBOURS,
)

GRAPH_FILE = "sentence_graph.npz"
VECTORS_FILE = "sentence_vectors.npy"
EDGE_TYPES = ("entity", "semantic", "adjacent")


def _symmetric(rows: list[int], cols: list[int], weights: list[float], n: int) -> sparse.csr_matrix:
    """One weight per unordered pair (the largest), stored both ways."""
    matrix = sparse.coo_matrix((weights, (rows, cols)), shape=(n, n)).tocsr()
    matrix = matrix.maximum(matrix.T)
    matrix.setdiag(0)
    matrix.eliminate_zeros()
    return matrix.tocsr()


def key_entities(mentions: dict[int, set[int]], n_sentences: int) -> set[int]:
    """The top share of entities by df * idf (BM25 idf over sentences)."""

    def importance(df: int) -> float:
        return df * math.log((n_sentences - df + 0.5) / (df + 0.5) + 1)

    ranked = sorted(mentions, key=lambda e: (-importance(len(mentions[e])), e))
    return set(ranked[: math.ceil(GRAPH_KEY_ENTITY_SHARE * len(ranked))])


def entity_edges(mentions: dict[int, set[int]], n: int) -> sparse.csr_matrix:
    keys = key_entities(mentions, n)
    shared: dict[tuple[int, int], int] = defaultdict(int)
    for entity in keys:
        sentences = sorted(mentions[entity])
        if len(sentences) > ENTITY_MAX_SENTENCES:
            continue
        for i, a in enumerate(sentences):
            for b in sentences[i + 1 :]:
                shared[(a, b)] += 1
    rows = [a for a, _ in shared]
    cols = [b for _, b in shared]
    return _symmetric(rows, cols, [float(w) for w in shared.values()], n)


def semantic_edges(vectors: np.ndarray, progress: bool = False) -> sparse.csr_matrix:
    """Mutual top-m neighbours by cosine, computed in row blocks to bound memory."""
    n, m = len(vectors), GRAPH_SEMANTIC_NEIGHBOURS
    if n < 2:
        return sparse.csr_matrix((n, n))
    k = min(m, n - 1)
    top = np.zeros((n, k), dtype=np.int64)
    cos = np.zeros((n, k), dtype=np.float32)
    block = 2048
    for start in tqdm(range(0, n, block), desc="semantic edges", disable=not progress):
        sims = vectors[start : start + block] @ vectors.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # not its own neighbour
        idx = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        top[start : start + block] = idx
        cos[start : start + block] = sims[rows[:, None], idx]
    lists = [set(row) for row in top.tolist()]
    out_rows, out_cols, weights = [], [], []
    for a in range(n):
        for j, b in enumerate(top[a]):
            if a < b and a in lists[b]:
                out_rows.append(a)
                out_cols.append(int(b))
                weights.append(float(max(cos[a, j], 1e-6)))
    return _symmetric(out_rows, out_cols, weights, n)


def adjacency_edges(positions: list[tuple[int, int, int]], n: int) -> sparse.csr_matrix:
    """positions: (sentence id, passage id, position in passage)."""
    by_passage: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for sid, pid, pos in positions:
        by_passage[pid].append((pos, sid))
    rows, cols, weights = [], [], []
    for sentences in by_passage.values():
        sentences.sort()
        for i, (pos_a, a) in enumerate(sentences):
            for pos_b, b in sentences[i + 1 : i + 1 + GRAPH_ADJACENT_WINDOW]:
                if 0 < pos_b - pos_a <= GRAPH_ADJACENT_WINDOW:
                    rows.append(a)
                    cols.append(b)
                    weights.append(1.0 / (pos_b - pos_a))
    return _symmetric(rows, cols, weights, n)


def previous_vectors(folder: Path) -> dict[str, np.ndarray]:
    """Sentence vectors of an earlier build of this index, by sentence text (reused when
    the text is unchanged); empty when there is none or it does not match."""
    path, db_path = folder / VECTORS_FILE, folder / "hoprag.sqlite"
    if not path.is_file() or not db_path.is_file():
        return {}
    try:
        old = np.load(path)
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            texts = [t for (t,) in db.execute("SELECT text FROM sentences ORDER BY id")]
        finally:
            db.close()
    except (OSError, ValueError, sqlite3.Error):
        return {}
    return dict(zip(texts, old.astype(np.float32), strict=True)) if len(texts) == len(old) else {}


def build_sentence_graph(
    folder: Path,
    embedder: Embedder,
    *,
    progress: bool = True,
    reuse: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Write the graph and sentence vectors into the index folder; return edge counts
    and timings. `reuse` maps sentence text to an earlier vector."""
    started = time.perf_counter()
    db = sqlite3.connect(folder / "hoprag.sqlite")
    try:
        positions = [
            (int(s), int(p), int(q))
            for s, p, q in db.execute("SELECT id, passage_id, position FROM sentences ORDER BY id")
        ]
        texts = [t for (t,) in db.execute("SELECT text FROM sentences ORDER BY id")]
        mentions: dict[int, set[int]] = defaultdict(set)
        for entity, sentence in db.execute("SELECT entity_id, sentence_id FROM mentions"):
            mentions[int(entity)].add(int(sentence))
    finally:
        db.close()
    n = len(texts)
    reuse = reuse or {}
    todo = [i for i, t in enumerate(texts) if t not in reuse]
    vectors = np.zeros((n, embedder.dim), dtype=np.float32)
    for i, t in enumerate(texts):
        if t in reuse:
            vectors[i] = reuse[t]
    t0 = time.perf_counter()
    if todo:
        vectors[todo] = embedder.embed([texts[i] for i in todo], progress=progress)
    embed_s = time.perf_counter() - t0
    edges = {
        "entity": entity_edges(mentions, n),
        "semantic": semantic_edges(vectors, progress),
        "adjacent": adjacency_edges(positions, n),
    }
    arrays: dict[str, np.ndarray] = {}
    for name, matrix in edges.items():
        arrays[f"{name}_data"] = matrix.data.astype(np.float32)
        arrays[f"{name}_indices"] = matrix.indices.astype(np.int32)
        arrays[f"{name}_indptr"] = matrix.indptr.astype(np.int64)
    # Written beside and renamed into place: a reader never sees half a file.
    np.save(folder / f".tmp-{VECTORS_FILE}", vectors.astype(np.float16))
    np.savez(folder / f".tmp-{GRAPH_FILE}", n=np.array([n]), **arrays)
    os.replace(folder / f".tmp-{VECTORS_FILE}", folder / VECTORS_FILE)
    os.replace(folder / f".tmp-{GRAPH_FILE}", folder / GRAPH_FILE)
    return {
        "sentences": n,
        "embedded_sentences": len(todo),
        "edges": {name: int(m.nnz // 2) for name, m in edges.items()},
        "seconds": {
            "embed": round(embed_s, 2),
            "total": round(time.perf_counter() - started, 2),
        },
    }
