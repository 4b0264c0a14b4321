"""Fit the decision model's per-kind Platt scaling on *train* questions only.

    .venv/bin/python -m bench.calibrate_dm [--per-kind 60] [--direct 30]

Labels come from the benchmarks' gold annotations (how each is made is written into the
calibration file's notes):

* rel:    question vs each of its top-w fused passages; yes = a gold passage.
* depth:  yes = at most 2 hops (MuSiQue `hops`, 2Wiki: all types but bridge_comparison).
* suff:   QA table from 2Wiki evidence triples; yes = all triples, no = one left out.
* same:   2Wiki triple questions in two wordings (yes) vs another relation or subject (no).
* direct: question vs its top-w fused passages; yes = every gold passage among them.

Writes app/data/dm_calibration.json (used by `DecisionModel`).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from app.dm.calibration import fit_platt, logit
from app.encoders.embeddings import Embedder
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import Settings
from bench.common import questions
from tools.decision import CALIBRATION_FILE, Calibration, DecisionModel, rel_cosines
from tools.retriever import Retriever

SEED = 13


def _triple_question(subject: str, relation: str, style: int = 0) -> str:
    if style == 0:
        return f"What is the {relation} of {subject}?"
    return f"Which {relation} does {subject} have?"


def _balanced(examples: list[tuple[Any, int]], n: int, rng: random.Random) -> list[tuple[Any, int]]:
    pos = [e for e in examples if e[1] == 1]
    neg = [e for e in examples if e[1] == 0]
    rng.shuffle(pos)
    rng.shuffle(neg)
    half = n // 2
    return pos[:half] + neg[: n - min(half, len(pos))]


def rel_examples(settings: Settings, embedder: Embedder) -> list[tuple[float, int]]:
    pairs = []
    for bench in ("musique", "2wikimultihopqa", "hotpotqa"):
        retriever = Retriever(CorpusIndex.open(settings, bench), embedder)
        for q in questions(bench, "train"):
            passages = [p.as_dict() for p in retriever.retrieve(q["question"], settings.w)]
            scores = rel_cosines(embedder, q["question"], passages, retriever.index)
            gold = set(q["gold_corpus_idx"])
            pairs += [(s, int(p["id"] in gold)) for s, p in zip(scores, passages, strict=True)]
    return pairs


def depth_examples(rng: random.Random) -> list[tuple[dict[str, str], int]]:
    items = [
        ({"question": q["question"]}, int(q["hops"] <= 2)) for q in questions("musique", "train")
    ]
    items += [
        ({"question": q["question"]}, int(q["type"] != "bridge_comparison"))
        for q in questions("2wikimultihopqa", "train")
    ]
    return items


def suff_examples(rng: random.Random) -> list[tuple[dict[str, Any], int]]:
    items = []
    for q in questions("2wikimultihopqa", "train"):
        rows = [{"sub_question": _triple_question(s, r), "answer": o} for s, r, o in q["evidences"]]
        items.append(({"question": q["question"], "qa_table": rows}, 1))
        if len(rows) > 1:
            drop = rng.randrange(len(rows))
            items.append(
                ({"question": q["question"], "qa_table": rows[:drop] + rows[drop + 1 :]}, 0)
            )
    return items


def same_examples(rng: random.Random) -> list[tuple[dict[str, str], int]]:
    triples = [t for q in questions("2wikimultihopqa", "train") for t in q["evidences"]]
    items = []
    for s, r, _ in triples:
        items.append(({"first": _triple_question(s, r), "second": _triple_question(s, r, 1)}, 1))
        other = rng.choice(triples)
        if (other[0], other[1]) != (s, r):
            swap = (s, other[1]) if rng.random() < 0.5 else (other[0], r)
            if swap != (s, r):
                items.append(
                    ({"first": _triple_question(s, r), "second": _triple_question(*swap, 1)}, 0)
                )
    return items


def direct_examples(settings: Settings, embedder: Embedder) -> list[tuple[dict[str, Any], int]]:
    items = []
    for bench in ("musique", "2wikimultihopqa", "hotpotqa"):
        retriever = Retriever(CorpusIndex.open(settings, bench), embedder)
        for q in questions(bench, "train"):
            passages = [p.as_dict() for p in retriever.retrieve(q["question"], settings.w)]
            label = int(set(q["gold_corpus_idx"]) <= {p["id"] for p in passages})
            items.append(({"question": q["question"], "passages": passages}, label))
    return items


def fit_llm_kind(
    kind: str, examples: list[tuple[dict[str, Any], int]], call: Callable[..., float]
) -> tuple[list[float], list[int]]:
    xs, ys = [], []
    start = time.perf_counter()
    for i, (inputs, label) in enumerate(examples, 1):
        xs.append(logit(call(**inputs)))
        ys.append(label)
        if i % 10 == 0:
            print(f"  {kind}: {i}/{len(examples)} ({time.perf_counter() - start:.0f}s)", flush=True)
    return xs, ys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-kind", type=int, default=60)
    parser.add_argument("--direct", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(SEED)
    settings = Settings()
    embedder = Embedder(settings.runtime_dir)
    identity = Calibration()
    calibration = Calibration(notes={"seed": SEED, "split": "train"})

    rel = rel_examples(settings, embedder)
    calibration.platt["rel"] = fit_platt([x for x, _ in rel], [y for _, y in rel])
    calibration.notes["rel"] = {
        "n": len(rel),
        "positives": sum(y for _, y in rel),
        "feature": "MiniLM cosine(question, title: text)",
        "labels": "gold passages among the top-w fused passages",
    }
    print("rel", calibration.platt["rel"], calibration.notes["rel"], flush=True)

    gateway = LLMGateway(settings)
    dm = DecisionModel(gateway, embedder, identity)
    plans = {
        "depth": (
            _balanced(depth_examples(rng), args.per_kind, rng),
            dm.p_shallow,
            "yes = at most 2 hops (MuSiQue hops; 2Wiki non-bridge_comparison)",
        ),
        "suff": (
            _balanced(suff_examples(rng), args.per_kind, rng),
            dm.p_suff,
            "2Wiki evidence triples as a QA table: complete (yes) or one left out",
        ),
        "same": (
            _balanced(same_examples(rng), args.per_kind, rng),
            dm.p_same,
            "2Wiki triple questions in two wordings (yes) vs other subject/relation",
        ),
        "direct": (
            _balanced(direct_examples(settings, embedder), args.direct, rng),
            dm.p_direct,
            "yes = all gold passages among the top-w fused passages",
        ),
    }
    try:
        for kind, (examples, call, how) in plans.items():
            xs, ys = fit_llm_kind(kind, examples, call)
            calibration.platt[kind] = fit_platt(xs, ys)
            if calibration.platt[kind].a <= 0:
                # The zero-shot p(yes) does not rise with the label: it carries no signal,
                # and a threshold on it would only add cost and noise. Switch it off.
                calibration.backends[kind] = "off"
            calibration.notes[kind] = {
                "n": len(ys),
                "positives": sum(ys),
                "labels": how,
                "feature": "logit of the zero-shot p(yes)",
            }
            print(kind, calibration.platt[kind], calibration.notes[kind], flush=True)
    finally:
        gateway.close()
    calibration.notes["command"] = (
        f"python -m bench.calibrate_dm --per-kind {args.per_kind} --direct {args.direct}"
    )
    calibration.save(CALIBRATION_FILE)
    print(f"wrote {CALIBRATION_FILE}")


if __name__ == "__main__":
    main()
