"""Where a DeFT run's LLM calls and words go, read from its committed traces.

    .venv/bin/python -m bench.deft_costs RUN [RUN ...]

For each run: LLM calls per question by purpose (writing sub-questions, including
refused tries and decompositions; rewriting back-references; answering sub-questions;
the final answer; the fallback; DM judgements served by the chat model), and words fed
per question by the reading that first fed a passage (a step whose relevance filter
kept what passed, a step where one passed and the top 2 were read, a step where none
passed and the top 5 were read, the graph walk, the fallback). `none_passed_tail` is
what the passages ranked 3 to 5 of the none-passed steps added and nothing else read:
the words a "read the top 2 when none passes" rule would have saved on the same path.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from app.corpus import load_corpus
from app.evaluation import load_run
from bench.common import find_run, save


def call_purposes(record: dict[str, Any]) -> Counter[str]:
    """LLM calls by purpose; the writer's are what is left of the question's total (its
    node records the sub-question, not how many tries and plans it took)."""
    calls: Counter[str] = Counter()
    for step in record["trace"]:
        node = step["node"]
        if node == "answer_sub_question":
            calls["answer"] += 1
        elif node == "answer_from_qa_table" and not step.get("comparison"):
            calls["final"] += 1
        elif node in ("fallback_answer", "answer_directly"):
            calls[node.removesuffix("_answer").removeprefix("answer_")] += 1
        elif node == "guard_self_contained" and step.get("rewritten_from"):
            calls["rewrite"] += 1
        for decision in step.get("decisions") or []:
            if decision["backend"] == "llm":
                calls[f"dm_{decision['kind']}"] += 1
    calls["write"] = record["llm_calls"] - sum(calls.values())
    return calls


def reading(filtered: dict[str, Any] | None) -> str:
    """Which rule chose the passages a sub-question step read."""
    if filtered is None:
        return "graph_walk"
    passed = sum(d["outcome"] for d in filtered.get("decisions") or [])
    return "passing" if passed >= 2 else "one_passed_top2" if passed == 1 else "none_passed_top5"


def word_sources(record: dict[str, Any], length: dict[int, int]) -> Counter[str]:
    """Words fed, each passage counted once, under the reading that fed it first."""
    seen: set[int] = set()
    fed: Counter[str] = Counter()
    filtered: dict[str, Any] | None = None
    for step in record["trace"]:
        node = step["node"]
        if node == "filter_relevant":
            filtered = step
        elif node == "expand_from_graph":
            filtered = None
        if node not in ("answer_sub_question", "fallback_answer", "answer_directly"):
            continue
        source = (
            reading(filtered)
            if node == "answer_sub_question"
            else node.removesuffix("_answer").removeprefix("answer_")
        )
        ranked = [p["id"] for p in (filtered or {}).get("kept") or []]
        for pid in step.get("passage_ids") or []:
            if pid in seen:
                continue
            seen.add(pid)
            fed[source] += length[pid]
            if source == "none_passed_top5" and pid in ranked[2:]:
                fed["none_passed_tail"] += length[pid]
    return fed


def summarise(folder_name: str) -> dict[str, Any]:
    meta, records = load_run(find_run(folder_name))
    corpus = load_corpus(Path(meta["data"]).with_name("corpus.json"))
    length = {p.id: len(p.text.split()) for p in corpus}
    n = len(records)
    calls: Counter[str] = Counter()
    fed: Counter[str] = Counter()
    for record in records:
        calls.update(call_purposes(record))
        fed.update(word_sources(record, length))
    return {
        "run": folder_name,
        "n": n,
        "llm_calls": round(sum(r["llm_calls"] for r in records) / n, 2),
        "calls": {k: round(v / n, 2) for k, v in sorted(calls.items())},
        "words_fed": round(sum(r["words_fed"] for r in records) / n, 1),
        "words": {k: round(v / n, 1) for k, v in sorted(fed.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    rows = [summarise(run) for run in args.runs]
    for row in rows:
        print(row)
    save(
        "deft_costs",
        {"command": "python -m bench.deft_costs " + " ".join(args.runs), "rows": rows},
    )


if __name__ == "__main__":
    main()
