"""Which passages should the fallback read? Gold-passage recall of keep policies over the
2w passages retrieved for the whole question, scored by the shipped decision model.

    .venv/bin/python -m bench.fallback_keep [--n 60] [--split dev]

The fallback answers the question from passages retrieved for the question itself, so a
policy is good when it keeps the gold passages and few others. `vanilla` is what the
vanilla baseline reads (the top 5 by retrieval score); `steps` is the keep rule of the
loop's relevance filter (SPEC 1.3.5); `dm_*` rank the 2w passages by DM_rel;
`retrieval_top5_plus_2_passing` is what the fallback ships (`keep_for_fallback`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from app.dm.features import DM_DIR
from app.encoders.embeddings import Embedder
from app.index.store import CorpusIndex
from app.settings import Settings
from bench.common import BENCHMARKS, questions, save
from nodes.relevance import keep_for_fallback, keep_relevant
from tools.decision import DecisionModel, TrainedDM
from tools.retriever import Retriever

Policy = Callable[[Sequence[dict], Sequence[float], Settings], list[dict]]


def by_dm(passages: Sequence[dict], scores: Sequence[float]) -> list[dict]:
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    return [passages[i] for i in order]


def passing_at_least(floor: int, ceiling: int) -> Policy:
    """Those >= tau_rel by DM rank, topped up to `floor`, cut at `ceiling`."""

    def policy(passages: Sequence[dict], scores: Sequence[float], s: Settings) -> list[dict]:
        passing = sum(x >= s.tau_rel for x in scores)
        return by_dm(passages, scores)[: min(ceiling, max(floor, passing))]

    return policy


POLICIES: dict[str, Policy] = {
    "vanilla": lambda p, _s, s: list(p[: s.top_k]),
    "steps": lambda p, sc, s: keep_relevant(p, sc, s.tau_rel, s.max_kept, s.none_kept),
    "dm_top5": lambda p, sc, _s: by_dm(p, sc)[:5],
    "dm_passing_5_to_8": passing_at_least(5, 8),
    "dm_passing_5_to_10": passing_at_least(5, 10),
    "retrieval_top5_plus_2_passing": lambda p, sc, s: keep_for_fallback(
        p, sc, s.tau_rel, s.top_k, s.fallback_extra
    ),
    "retrieval_top8": lambda p, _s, _st: list(p[:8]),
}


def measure(
    retriever: Retriever, dm: DecisionModel, items: list[dict], settings: Settings
) -> dict[str, dict[str, float]]:
    """Per policy: share of gold passages kept, share of questions with all gold kept,
    passages and words read."""
    totals = {
        name: {"gold_share": 0.0, "all_gold": 0.0, "passages": 0.0, "words": 0.0}
        for name in POLICIES
    }
    for q in items:
        gold = set(q["gold_corpus_idx"])
        passages = [p.as_dict() for p in retriever.retrieve(q["question"], settings.fallback_k)]
        scores = dm.p_rel(q["question"], passages, whole_question=True)
        for name, policy in POLICIES.items():
            kept = policy(passages, scores, settings)
            ids = {p["id"] for p in kept}
            t = totals[name]
            t["gold_share"] += len(gold & ids) / len(gold)
            t["all_gold"] += gold <= ids
            t["passages"] += len(kept)
            t["words"] += sum(len(p["text"].split()) for p in kept)
    return {name: {k: round(v / len(items), 3) for k, v in t.items()} for name, t in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    settings = Settings()
    embedder = Embedder(settings.runtime_dir)
    trained = TrainedDM.load(DM_DIR, settings.runtime_dir)
    results = {}
    for bench in BENCHMARKS:
        index = CorpusIndex.open(settings, bench)
        dm = DecisionModel(None, embedder, index=index, trained=trained)  # type: ignore[arg-type]
        retriever = Retriever(index, embedder, settings.retrieval)
        results[bench] = measure(retriever, dm, questions(bench, args.split)[: args.n], settings)
        print(bench, results[bench], flush=True)
    save(
        "fallback_keep",
        {
            "command": f"python -m bench.fallback_keep --n {args.n} --split {args.split}",
            "n": args.n,
            "rel_backend": dm.backend("rel"),
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
