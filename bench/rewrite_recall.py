"""Does rewriting the second sub-question find its passage? (ChainRAG's rewriting effect)

    .venv/bin/python -m bench.rewrite_recall

Dev questions with a gold decomposition whose second step refers to the first (MuSiQue
`question_decomposition` with "#1"; 2Wiki evidence triples whose second subject is the
first object). The second sub-question is asked two ways:
* `reference`: as decomposed, "#1" read as "it" (no rewriting);
* `rewritten`: "#1" replaced by the first step's gold answer (rewriting with a correct
  first answer; isolates what rewriting buys from first-step errors).
Recall@2: the step's gold passage among the top 2 fused passages, and among the passages
of the top 2 seed sentences of the sentence graph.
"""

from __future__ import annotations

import re

from app.dm.data import load_items
from app.encoders.embeddings import Embedder
from app.index.store import CorpusIndex
from app.settings import Settings
from app.traindata import musique_chain, wiki2_chain
from bench.common import DATA, questions, save
from tools.decision import DecisionModel
from tools.retriever import Retriever
from tools.sentence_graph import SentenceGraph

K = 2


def second_steps(bench: str) -> list[tuple[str, str, int]]:
    """(sub-question with its reference, first gold answer, gold passage of step 2)."""
    raw = {q["id"]: q for q in questions(bench)}
    out = []
    for item in load_items(DATA, bench, "dev"):
        if len(item.steps) < 2 or item.steps[1][2] is None:
            continue
        q = raw[item.id]
        chain = musique_chain(q, bench) if bench == "musique" else wiki2_chain(q, bench)
        if chain is None or "#1" not in chain.templated[1]:
            continue
        out.append((chain.templated[1], item.steps[0][1], int(item.steps[1][2])))
    return out


def measure(bench: str, settings: Settings, embedder: Embedder) -> dict:
    index = CorpusIndex.open(settings, bench)
    retriever = Retriever(index, embedder)
    graph = SentenceGraph.open(index, embedder, DecisionModel(None, embedder, index=index))  # type: ignore[arg-type]
    rows = second_steps(bench)
    hits: dict[str, int] = {}
    for templated, first_answer, gold in rows:
        queries = {
            "reference": re.sub(r"#1\b", "it", templated),
            "rewritten": templated.replace("#1", first_answer),
        }
        for name, query in queries.items():
            passages = {p.id for p in retriever.retrieve(query, K)}
            hits[f"{name}_passages"] = hits.get(f"{name}_passages", 0) + (gold in passages)
            if graph is not None:
                seeds = {s.passage_id for s in graph.seed_sentences(query, K)}
                hits[f"{name}_seeds"] = hits.get(f"{name}_seeds", 0) + (gold in seeds)
    index.close()
    return {"n": len(rows), **{k: round(v / len(rows), 3) for k, v in hits.items()}}


def main() -> None:
    settings = Settings()
    embedder = Embedder(settings.runtime_dir)
    results = {b: measure(b, settings, embedder) for b in ("musique", "2wikimultihopqa")}
    for bench, r in results.items():
        print(bench, r)
    save("rewrite_recall", {"command": "python -m bench.rewrite_recall", "k": K, **results})


if __name__ == "__main__":
    main()
