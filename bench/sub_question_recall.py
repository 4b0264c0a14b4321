"""Does the writer's first sub-question find the first hop? (the DeFT loop's entry point)

    .venv/bin/python -m bench.sub_question_recall [--limit 30] [--variant NAME]

On dev questions with a gold decomposition (MuSiQue `question_decomposition`, 2Wiki
`evidences`), the first-hop gold passages are those of the steps that need no earlier
answer. For each question the DeFT writer (`nodes.sub_question.write_sub_question`, with
its worked examples) writes the first sub-question; we report how often it is rejected
(empty), and Hit@10: a first-hop gold passage among the top 10 fused passages for the
sub-question, next to the same for the whole question as the query. Each run's summary
is kept under its `--variant` name next to earlier variants', so writer changes can be
compared in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import re

from langgraph.runtime import Runtime
from tqdm import tqdm

from app.resources import Resources
from app.settings import Settings
from bench.common import load_results, questions, save
from nodes.sub_question import write_sub_question

K = 10


def first_hop_passages(bench: str, q: dict) -> set[int]:
    if bench == "musique":
        context = q["context_corpus_idx"]
        return {
            context[s["paragraph_support_idx"]]
            for s in q["question_decomposition"]
            if not re.search(r"#\d", s["question"])
        }
    triples = q["evidences"]
    objects = {o.lower() for _, _, o in triples}
    subjects = {s.lower() for s, _, _ in triples if s.lower() not in objects}
    return {
        idx
        for idx, title in zip(q["gold_corpus_idx"], q["gold_titles"], strict=True)
        if title.lower() in subjects
    }


def measure(bench: str, limit: int, settings: Settings) -> dict:
    items = [q for q in questions(bench) if q.get("question_decomposition") or q.get("evidences")]
    items = items[:limit]
    resources = Resources.open(settings, bench)
    rows = []
    try:
        for q in tqdm(items, desc=bench, unit="q"):
            gold = first_hop_passages(bench, q)
            state = {"question": q["question"], "qa_table": [], "unanswerable": []}
            sub = write_sub_question(
                state,  # type: ignore[arg-type]
                Runtime(context=settings),
                gateway=resources.gateway,
                examples=resources.examples,
            )
            sub_question = sub["sub_question"]

            def hit(query: str, gold: set[int] = gold) -> bool:
                return bool(gold & {p.id for p in resources.retriever.retrieve(query, K)})

            rows.append(
                {
                    "id": q["id"],
                    "question": q["question"],
                    "sub_question": sub_question,
                    "hit_sub_question": bool(sub_question) and hit(sub_question),
                    "hit_question": hit(q["question"]),
                }
            )
    finally:
        resources.close()
    n = len(rows)
    return {
        "n": n,
        "empty": round(sum(not r["sub_question"] for r in rows) / n, 3),
        f"hit@{K}_sub_question": round(sum(r["hit_sub_question"] for r in rows) / n, 3),
        f"hit@{K}_question": round(sum(r["hit_question"] for r in rows) / n, 3),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--benchmarks", nargs="+", default=["musique", "2wikimultihopqa"])
    parser.add_argument("--variant", default="shipped", help="name of the writer measured")
    args = parser.parse_args()
    settings = Settings()
    missing = [b for b in args.benchmarks if not (settings.indexes_dir / b).is_dir()]
    if missing:  # before any model call, not after the first benchmark's
        parser.error(f"no index for {', '.join(missing)}: run `hoprag index` on its corpus first")
    results = {bench: measure(bench, args.limit, settings) for bench in args.benchmarks}
    summaries = {b: {k: v for k, v in r.items() if k != "rows"} for b, r in results.items()}
    for bench, summary in summaries.items():
        print(bench, summary)
    variants = (load_results("sub_question_recall") or {}).get("variants", {})
    variants[args.variant] = summaries
    mode = settings.sub_questions
    env = f"HOPRAG_SUB_QUESTIONS={mode} " if mode != "write" else ""
    command = f"{env}python -m bench.sub_question_recall --variant '{args.variant}'"
    save("sub_question_recall", {"command": command, **results, "variants": variants})


if __name__ == "__main__":
    main()
