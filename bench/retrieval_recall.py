"""Recall of *all* gold passages in the top k, for dense, BM25 and fused retrieval.

    .venv/bin/python -m bench.retrieval_recall [--split dev]

Needs the three benchmark indexes (`python -m bench.index_build` builds them). A question
counts as recalled at k only if every one of its gold passages is among the top k.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from app.encoders.embeddings import Embedder
from app.index.store import CorpusIndex
from app.settings import Settings
from bench.common import BENCHMARKS, questions, save
from tools.retriever import Retriever

KS = (5, 10, 20)
MODES = ("dense", "bm25", "fused")


def recall_table(
    retriever: Retriever, items: list[dict], group_key: str | None
) -> dict[str, dict[str, dict[int, float]]]:
    """{group: {mode: {k: recall}}}; group 'all' plus one per hop count or type."""
    hits: dict[str, dict[str, dict[int, int]]] = defaultdict(
        lambda: {m: dict.fromkeys(KS, 0) for m in MODES}
    )
    counts: dict[str, int] = defaultdict(int)
    for q in items:
        gold = set(q["gold_corpus_idx"])
        groups = ["all"] + ([f"{group_key}={q[group_key]}"] if group_key else [])
        for g in groups:
            counts[g] += 1
        for mode in MODES:
            ranked = [pid for pid, _ in retriever.ranked_ids(q["question"], max(KS), mode)]
            for k in KS:
                if gold <= set(ranked[:k]):
                    for g in groups:
                        hits[g][mode][k] += 1
    return {
        g: {m: {k: round(hits[g][m][k] / counts[g], 3) for k in KS} for m in MODES}
        | {"n": counts[g]}
        for g in sorted(counts)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    settings = Settings()
    embedder = Embedder(settings.runtime_dir)
    results = {}
    for bench in BENCHMARKS:
        retriever = Retriever(CorpusIndex.open(settings, bench), embedder)
        group = {"musique": "hops", "2wikimultihopqa": "type"}.get(bench)
        results[bench] = recall_table(retriever, questions(bench, args.split), group)
        for g, row in results[bench].items():
            cells = "  ".join(f"{m}@{k}={row[m][k]:.3f}" for m in MODES for k in KS)
            print(f"{bench:16s} {g:22s} n={row['n']:3d}  {cells}", flush=True)
    save(
        "retrieval_recall",
        {
            "command": f"python -m bench.retrieval_recall --split {args.split}",
            "split": args.split,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
