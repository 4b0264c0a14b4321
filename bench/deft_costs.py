"""Where a DeFT run's LLM calls and words go, read from its committed traces.

    .venv/bin/python -m bench.deft_costs RUN [RUN ...]

For each run: LLM calls per question by purpose (writing sub-questions, including
refused tries and decompositions; rewriting back-references; answering sub-questions;
the final answer; the fallback; DM judgements served by the chat model), and words fed
per question by the reading that first fed a passage (a step whose relevance filter
kept what passed, a step where one passed and the top 2 were read, a step where none
passed and the top `none_kept` were read, the graph walk, the fallback).
`none_passed_rank3+` is what the passages ranked 3 to 5 of those steps added and nothing
else read: the words `HOPRAG_NONE_KEPT=2` would save on the same path; `none_passed_steps`
says where those steps found the question's first gold passage. `by_steps`: questions by
the number of sub-question steps they took, with their EM and cost. `direct_eligible`:
the questions whose top-w passages hold every gold passage (where a perfect
direct-answer check would answer at once), with this run's EM there and that of the
`vanilla` and `oracle` readers. `write_steps`: sub-question steps by what wrote the
sub-question; `graph_walks`: steps that walked the sentence graph; `seconds_by_walk`:
median seconds of the questions with and without a walk.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from app.eval.run import load_run
from app.index.corpus import load_corpus
from bench.common import RESULTS, find_run, summarise_runs


def reader(node: str) -> str:
    """`fallback` for `fallback_answer`, `directly` for `answer_directly`."""
    return node.removesuffix("_answer").removeprefix("answer_")


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
            calls[reader(node)] += 1
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
    return "passing" if passed >= 2 else "one_passed_top2" if passed == 1 else "none_passed"


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
        source = reading(filtered) if node == "answer_sub_question" else reader(node)
        ranked = [p["id"] for p in (filtered or {}).get("kept") or []]
        for pid in step.get("passage_ids") or []:
            if pid in seen:
                continue
            seen.add(pid)
            fed[source] += length[pid]
            if source == "none_passed" and pid in ranked[2:]:
                fed["none_passed_rank3+"] += length[pid]
    return fed


def none_passed_gold(record: dict[str, Any]) -> Counter[str]:
    """Steps where no passage passed: where the question's first gold passage was among
    the passages the step read (ranked by DM_rel)."""
    gold = set(record["gold_ids"])
    where: Counter[str] = Counter()
    for step in record["trace"]:
        if step["node"] != "filter_relevant" or any(d["outcome"] for d in step["decisions"]):
            continue
        ranks = [i for i, p in enumerate(step.get("kept") or []) if p["id"] in gold]
        where["top2" if ranks and ranks[0] < 2 else "rank3+" if ranks else "no_gold"] += 1
    return where


def steps(record: dict[str, Any]) -> int:
    """Sub-question steps the question took (0: answered directly)."""
    return max((s.get("hop", 0) for s in record["trace"] if "hop" in s), default=0)


def holds_all_gold(record: dict[str, Any]) -> bool:
    """The top-w passages retrieved for the whole question hold every gold passage: the
    direct-answer check's `yes` (SPEC section 1, step 2)."""
    for step in record["trace"]:
        if step["node"] == "retrieve_question_passages":
            return set(record["gold_ids"]) <= {p["id"] for p in step["question_passages"]}
    return False


def by_steps(records: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    groups: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(steps(record), []).append(record)
    return {
        k: {
            "n": len(g),
            "em": round(sum(r["em"] for r in g) / len(g), 3),
            "llm_calls": round(sum(r["llm_calls"] for r in g) / len(g), 1),
            "words_fed": round(sum(r["words_fed"] for r in g) / len(g)),
        }
        for k, g in sorted(groups.items())
    }


def direct_eligible(meta: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """On the questions whose top-w passages hold all gold ones: EM of this run and of
    the readers a direct answer stands between (vanilla's top 5, the gold passages)."""
    ids = {r["id"] for r in records if holds_all_gold(r)}
    result: dict[str, Any] = {"n": len(ids), "run_em": _em(records, ids)}
    for system in ("vanilla", "oracle"):
        folder = RESULTS / "eval" / f"{meta['index']}-{system}"
        if folder.exists():
            result[f"{system}_em"] = _em(load_run(folder)[1], ids)
    return result


def _em(records: list[dict[str, Any]], ids: set[str]) -> float | None:
    chosen = [r["em"] for r in records if r["id"] in ids]
    return round(sum(chosen) / len(chosen), 3) if chosen else None


def write_steps(record: dict[str, Any]) -> Counter[str]:
    """Sub-question steps by what wrote the sub-question (`gave up`: nothing passed)."""
    return Counter(
        step.get("written_by") or "gave up"
        for step in record["trace"]
        if step["node"] == "write_sub_question"
    )


def walk_seconds(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median seconds of the questions with and without a sentence-graph walk."""
    walked = {r["id"] for r in records if any(s["node"] == "expand_from_graph" for s in r["trace"])}
    groups = {
        "with_walk": [r["seconds"] for r in records if r["id"] in walked],
        "without_walk": [r["seconds"] for r in records if r["id"] not in walked],
    }
    return {k: {"n": len(v), "median": round(median(v), 1)} for k, v in groups.items() if v}


def summarise(folder_name: str) -> dict[str, Any]:
    meta, records = load_run(find_run(folder_name))
    corpus = load_corpus(Path(meta["data"]).with_name("corpus.json"))
    length = {p.id: len(p.text.split()) for p in corpus}
    n = len(records)
    calls: Counter[str] = Counter()
    fed: Counter[str] = Counter()
    none_passed: Counter[str] = Counter()
    writers: Counter[str] = Counter()
    for record in records:
        writers.update(write_steps(record))
        calls.update(call_purposes(record))
        fed.update(word_sources(record, length))
        none_passed.update(none_passed_gold(record))
    return {
        "run": folder_name,
        "n": n,
        "llm_calls": round(sum(r["llm_calls"] for r in records) / n, 2),
        "calls": {k: round(v / n, 2) for k, v in sorted(calls.items())},
        "words_fed": round(sum(r["words_fed"] for r in records) / n, 1),
        "words": {k: round(v / n, 1) for k, v in sorted(fed.items())},
        "none_passed_steps": dict(none_passed),
        "by_steps": by_steps(records),
        "direct_eligible": direct_eligible(meta, records),
        "write_steps": dict(writers),
        "graph_walks": sum(s["node"] == "expand_from_graph" for r in records for s in r["trace"]),
        "seconds_by_walk": walk_seconds(records),
    }


def main() -> None:
    summarise_runs("deft_costs", summarise, __doc__)


if __name__ == "__main__":
    main()
