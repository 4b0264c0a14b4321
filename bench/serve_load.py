"""Chat load on a running `hoprag serve`: N chats at once, each a new thread asking one
single-hop question of the sample corpus, through `langgraph_sdk`.

    hoprag serve &                                  # HOPRAG_INDEX=sample
    .venv/bin/python -m bench.serve_load --url http://127.0.0.1:8123 [--graph vanilla]
        [--concurrency 8] [--runs 16] [--label L]

Reports throughput (finished runs per minute of wall time), latency percentiles per run
(from request to final state) and how many answers contain the gold answer; writes
bench/results/serve_load-GRAPH-cN[-L].json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from langgraph_sdk import get_sync_client

from bench.common import ROOT, save

SAMPLE_QUESTIONS = ROOT / "app" / "data" / "sample" / "questions.json"


def single_hops() -> list[tuple[str, str]]:
    """(question, gold answer) of every step of the sample questions' decompositions."""
    questions = json.loads(SAMPLE_QUESTIONS.read_text())
    return [(d["question"], d["answer"]) for q in questions for d in q["question_decomposition"]]


def chat(url: str, graph: str, question: str) -> tuple[str, float]:
    client = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    start = time.perf_counter()
    final = client.runs.wait(
        thread, graph, input={"messages": [{"role": "user", "content": question}]}
    )
    return str(final.get("answer", "")), time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8123")
    parser.add_argument("--graph", default="vanilla")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument(
        "--label", default="", help="what else this run measures (results file suffix)"
    )
    args = parser.parse_args()
    pairs = single_hops()
    work = [pairs[i % len(pairs)] for i in range(args.runs)]
    start = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        done = list(pool.map(lambda qa: chat(args.url, args.graph, qa[0]), work))
    wall = time.perf_counter() - start
    latencies = [seconds for _, seconds in done]
    correct = sum(
        gold.lower() in answer.lower() for (_, gold), (answer, _) in zip(work, done, strict=True)
    )
    report = {
        "graph": args.graph,
        "label": args.label,
        "concurrency": args.concurrency,
        "runs": args.runs,
        "wall_s": round(wall, 1),
        "runs_per_min": round(60 * args.runs / wall, 2),
        "latency_s": {
            "p50": round(percentile(latencies, 0.5), 1),
            "p90": round(percentile(latencies, 0.9), 1),
            "p95": round(percentile(latencies, 0.95), 1),
            "max": round(max(latencies), 1),
            "mean": round(statistics.fmean(latencies), 1),
        },
        "correct": correct,
    }
    command = (
        f"python -m bench.serve_load --graph {args.graph} --concurrency {args.concurrency} "
        f"--runs {args.runs}" + (f" --label {args.label}" if args.label else "")
    )
    name = f"serve_load-{args.graph}-c{args.concurrency}" + (f"-{args.label}" if args.label else "")
    save(name, {"command": command, **report})
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
