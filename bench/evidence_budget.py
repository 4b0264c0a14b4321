"""How many words of sentences a read needs: replays the reads of archived `deft` runs
and counts how often the answer (a sub-question's answer as the reader gave it, a final
read's gold answer), when a gold passage read holds it, is still in the sentences
`tools/evidence.py` selects.

    HOPRAG_DATA=... .venv/bin/python -m bench.evidence_budget [--benchmarks ...]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from app.eval.metrics import normalize_answer
from app.resources import Resources
from app.settings import BENCHMARKS, Settings
from bench.common import save
from nodes.answer import is_unknown
from tools.evidence import select_evidence

RUNS = Path("bench/results/eval")
STEP_BUDGETS = (40, 60, 80, 100, 150)
FINAL_BUDGETS = (100, 150, 200, 300)
FINAL_NODES = ("fallback_answer", "answer_directly")


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


def study(benchmark: str) -> dict:
    results = [json.loads(line) for line in (RUNS / f"{benchmark}-deft/results.jsonl").open()]
    resources = Resources.open(Settings(), benchmark)
    kept: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str, int] = defaultdict(int)
    words: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for kind, question, answer, ids, gold_ids in reads(results):
        records = resources.index.passages(ids)
        passages = [{"id": p.id, "title": p.title, "text": p.text} for p in records]
        # Counted only where a gold passage read holds the answer: a step's answer found
        # in a distractor is more often wrong, and losing it is no loss.
        if not holds(answer, [p for p in passages if p["id"] in gold_ids]):
            continue
        totals[kind] += 1
        words[kind][0].append(sum(len(p["text"].split()) for p in passages))
        for budget in STEP_BUDGETS if kind == "step" else FINAL_BUDGETS:
            chosen = select_evidence(resources.dm, resources.index, question, passages, budget)
            kept[kind][budget] += holds(answer, chosen)
            words[kind][budget].append(sum(len(p["text"].split()) for p in chosen))
    resources.close()
    return {
        kind: {
            "reads": totals[kind],
            "whole_words": round(sum(words[kind][0]) / max(1, totals[kind]), 1),
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
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS))
    args = parser.parse_args()
    out = {b: study(b) for b in args.benchmarks}
    print(json.dumps(out, indent=1))
    save("evidence_budget", out)


if __name__ == "__main__":
    main()
