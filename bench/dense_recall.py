"""How much of the exact dense top k Chroma's HNSW index returns: the approximate search
against exact cosine over the same stored vectors. Where it misses, two builds of the
same corpus can retrieve differently (the graph's construction is not deterministic).

    .venv/bin/python -m bench.dense_recall [--n 100]

For the first `--n` dev questions of each benchmark, recall at 10 and at FUSION_DEPTH
(the depth each list is fused at) of `Retriever.dense` against a brute-force ranking of
the collection's embeddings, and the lowest recall at 10 of any question.
"""

from __future__ import annotations

import argparse

import numpy as np

from app.encoders.embeddings import Embedder
from app.index.store import CorpusIndex
from app.settings import FUSION_DEPTH, Settings
from bench.common import BENCHMARKS, questions, save
from tools.retriever import Retriever


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    settings = Settings()
    embedder = Embedder(settings.runtime_dir)
    results = {}
    for bench in BENCHMARKS:
        index = CorpusIndex.open(settings, bench)
        retriever = Retriever(index, embedder, "dense")
        stored = index.collection.get(include=["embeddings"])
        ids = np.array([int(i) for i in stored["ids"]])
        vectors = unit(np.asarray(stored["embeddings"], dtype=np.float32))
        asked = [q["question"] for q in questions(bench)[: args.n]]
        at_10, at_depth = [], []
        for question, vector in zip(asked, unit(np.asarray(embedder.embed(asked))), strict=True):
            exact = ids[np.argsort(-(vectors @ vector))]
            found = [pid for pid, _ in retriever.dense(question, FUSION_DEPTH)]
            at_10.append(len(set(found[:10]) & set(exact[:10].tolist())) / 10)
            at_depth.append(len(set(found) & set(exact[:FUSION_DEPTH].tolist())) / FUSION_DEPTH)
        results[bench] = {
            "questions": len(asked),
            "recall_at_10": round(float(np.mean(at_10)), 4),
            "fusion_depth": FUSION_DEPTH,
            "recall_at_fusion_depth": round(float(np.mean(at_depth)), 4),
            "lowest_recall_at_10": min(at_10),
            "hnsw": index.collection.configuration.get("hnsw"),
        }
        print(bench, results[bench], flush=True)
        index.close()
    save(
        "dense_recall",
        {"command": f"python -m bench.dense_recall --n {args.n}", "results": results},
    )


if __name__ == "__main__":
    main()
