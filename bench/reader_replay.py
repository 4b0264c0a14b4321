"""Replay the final answering step of committed runs with today's prompts: what a reader
prompt change does, measured on the exact inputs the runs' readers saw, without
re-running retrieval, decisions and sub-questions.

    .venv/bin/python -m bench.reader_replay RUN [RUN ...] [--only yes-no|fallback-rows]

RUN is a folder under bench/results/eval or bench/results/archive (or a path). The step
replayed is the one that wrote the reply: `answer_from_passages` (vanilla, oracle: the
passages fed), DeFT's `fallback_answer` (the QA-table rows found by then and the passages
the fallback kept) or `answer_from_qa_table` (the rows). Answers a rule gave (a date
comparison) are replayed by the same rule. Prints EM before and after per run, and each
question whose EM changed; results accumulate in bench/results/reader_replay.json.
`--only yes-no` keeps questions that ask whether something is so ("Are both ...?",
"Did ...?"); `--only fallback-rows` keeps DeFT's fallbacks that had QA-table rows.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from app.eval.metrics import exact_match
from app.eval.run import load_run
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import Settings
from bench.common import commit, find_run, load_results, save, trace_states
from nodes.answer import read_passages
from nodes.final import answer_from_rows, read_facts_and_passages
from prompts import is_yes_no_question

REPLAYED = ("answer_from_passages", "fallback_answer", "answer_from_qa_table")


def final_reading(record: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[int]] | None:
    """(node, QA-table rows by then, ids of the passages read) of the step that wrote the
    reply, or None when another step did (a direct answer, ChainRAG's integration)."""
    last = None
    for step, state in trace_states(record):
        if step["node"] in REPLAYED:
            ids = step.get("passage_ids") or record["passages_fed"]
            last = (step["node"], state["qa_table"], ids)
    return last


def _fallback_with_rows(record: dict[str, Any]) -> bool:
    reading = final_reading(record)
    return reading is not None and reading[0] == "fallback_answer" and bool(reading[1])


FILTERS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "all": lambda record: True,
    "yes-no": lambda record: is_yes_no_question(record["question"]),
    "fallback-rows": _fallback_with_rows,
}


def replay(gateway: LLMGateway, index: CorpusIndex, record: dict[str, Any]) -> str | None:
    reading = final_reading(record)
    if reading is None:
        return None
    node, rows, ids = reading
    passages = [vars(p) for p in index.passages(ids)]
    if node == "answer_from_qa_table":
        return answer_from_rows(gateway, record["question"], rows)["answer"]
    if node == "fallback_answer":
        return read_facts_and_passages(gateway, record["question"], rows, passages)
    return read_passages(gateway, record["question"], passages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--only", choices=sorted(FILTERS), default="all")
    args = parser.parse_args()
    settings, ran_on = Settings(), commit()
    gateway = LLMGateway(settings)
    # Replays accumulate: each (run, filter) keeps its latest result and the commit it ran.
    previous = load_results("reader_replay") or {}
    results = previous.get("results", {})
    try:
        for name in args.runs:
            folder = find_run(name)
            meta, records = load_run(folder)
            records = [r for r in records if FILTERS[args.only](r)]
            index = CorpusIndex.open(settings, meta["index"])
            before = after = n = 0
            changed = []
            for record in records:
                answer = replay(gateway, index, record)
                if answer is None:
                    continue
                em = exact_match(answer, record["gold"])
                n, before, after = n + 1, before + record["em"], after + em
                if em != record["em"]:
                    changed.append([record["question"], record["prediction"], answer])
                    print(f"  {changed[-1]}", flush=True)
            index.close()
            key = f"{folder.name} {args.only}"
            results[key] = {
                "run": folder.name,
                "only": args.only,
                "replayed": n,
                "em_before": before,
                "em_after": after,
                "changed": changed,
                "commit": ran_on,
            }
            print(json.dumps(results[key]), flush=True)
    finally:
        gateway.close()
        if results:
            save(
                "reader_replay",
                {
                    "command": "python -m bench.reader_replay RUN ... --only FILTER",
                    "note": previous.get("note", ""),  # written by hand, kept
                    "results": results,
                },
            )


if __name__ == "__main__":
    main()
