"""How many words of sentences a read needs: replays the reads of `deft` runs that read
whole passages and counts how often the answer (a sub-question's answer as the reader
gave it, a final read's gold answer), when a gold passage read holds it, is still in the
sentences `tools/evidence.py` selects, for each budget and both orders: by score alone,
and each passage's best sentence first (`every_passage`).

    HOPRAG_DATA=... .venv/bin/python -m bench.evidence_budget RUN [RUN ...]

RUN names a run folder under bench/results/eval or archive (musique-deft-4360ebb); the
results go to bench/results/evidence_budget.json.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict

from app.eval.metrics import normalize_answer
from app.eval.run import load_run
from app.resources import Resources
from app.settings import Settings
from bench.common import find_run, save
from nodes.answer import is_unknown
from tools.evidence import select_sentences

STEP_BUDGETS = (40, 60, 80, 100, 150)
FINAL_BUDGETS = (100, 150, 200, 300)
FINAL_NODES = ("fallback_answer", "answer_directly")
ORDERS = {"by score": False, "every passage first": True}


def holds(answer: str, passages: list[dict]) -> bool:
    norm = normalize_answer(answer)
    return bool(norm) and any(f" {norm} " in f" {normalize_answer(p['text'])} " for p in passages)


def reads(results: list[dict]):
    """(kind, question, answer, passage ids, gold ids) of every read: a step's reads with
    the answer the reader gave, a final read with the gold answer."""
    for r in results:
        sub_question = ""
        for step in r["trace"]:
            if step["node"] == "write_sub_question":
                sub_question = step.get("sub_question") or ""
            elif step["node"] == "answer_sub_question" and not is_unknown(step["sub_answer"]):
                yield "step", sub_question, step["sub_answer"], step["passage_ids"], r["gold_ids"]
            elif step["node"] in FINAL_NODES and step.get("passage_ids"):
                for gold in r["gold"][:1]:
                    yield "final", r["question"], gold, step["passage_ids"], r["gold_ids"]


def study(run: str) -> dict:
    meta, results = load_run(find_run(run))
    resources = Resources.open(Settings(), meta["index"])
    kept: dict[str, Counter[str]] = defaultdict(Counter)
    totals: dict[str, int] = defaultdict(int)
    words: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for kind, question, answer, ids, gold_ids in reads(results):
        records = resources.index.passages(ids)
        passages = [{"id": p.id, "title": p.title, "text": p.text} for p in records]
        # Counted only where a gold passage read holds the answer: a step's answer found
        # in a distractor is more often wrong, and losing it is no loss.
        if not holds(answer, [p for p in passages if p["id"] in gold_ids]):
            continue
        totals[kind] += 1
        words[kind]["whole"].append(sum(len(p["text"].split()) for p in passages))
        for budget in STEP_BUDGETS if kind == "step" else FINAL_BUDGETS:
            for order, every_passage in ORDERS.items():
                chosen = select_sentences(
                    resources.dm,
                    resources.index,
                    question,
                    passages,
                    budget,
                    every_passage=every_passage,
                )
                kept[kind][f"{budget} {order}"] += holds(answer, chosen)
                words[kind][f"{budget} {order}"].append(sum(len(p["text"].split()) for p in chosen))
    resources.close()
    return {
        kind: {
            "reads": totals[kind],
            "whole_words": round(sum(words[kind]["whole"]) / max(1, totals[kind]), 1),
            "budgets": {
                b: {
                    "answer_kept": round(kept[kind][b] / max(1, totals[kind]), 3),
                    "words": round(sum(words[kind][b]) / max(1, totals[kind]), 1),
                }
                for b in kept[kind]
            },
        }
        for kind in totals
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    runs = parser.parse_args().runs
    out = {run: study(run) for run in runs}
    print(json.dumps(out, indent=1))
    save("evidence_budget", {"command": "python -m bench.evidence_budget " + " ".join(runs), **out})


if __name__ == "__main__":
    main()
