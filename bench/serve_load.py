"""Chat load through `langgraph_sdk`: on one running `hoprag serve`, or (--scale-out) on
two server processes this script starts, sharing Postgres, Chroma and the model endpoint.

One server: N chats at once, each a new thread asking one single-hop question of the
sample corpus.

    hoprag serve &                                  # HOPRAG_INDEX=sample
    .venv/bin/python -m bench.serve_load --url http://127.0.0.1:8123 [--graph vanilla]
        [--concurrency 8] [--runs 16] [--label L]

Reports throughput (finished runs per minute of wall time), latency percentiles per run
(from request to final state), how many answers contain the gold answer, and each chat's
question, answer and seconds; writes
bench/results/serve_load-GRAPH-cN[-L].json.

Scale-out (issue 36): the whole deployment on this machine, on loopback, each piece a
process of its own (`bench/services.py`): a throwaway PostgreSQL cluster (checkpoints and the
QA cache, HOPRAG_POSTGRES_URL), a Chroma server holding the index's vectors
(HOPRAG_CHROMA_URL; this script uploads them first), one model endpoint
(`hoprag llm serve`, HOPRAG_LLM_BASE_URL) and two `hoprag serve` processes on the same
index (HOPRAG_INDEX, default `sample`) and HOPRAG_HOME.

    .venv/bin/python -m bench.serve_load --scale-out [--graph deft] [--questions 8] [--label L]

Each server first builds the graph once (models and stores loaded, no chat). Then
- phase 1 (load): every multi-hop question of app/data/sample/questions.json is sent once
  to each server, all chats at once (8 questions: 16 chats), each a new thread. Per chat:
  server, answer, correct (the answer contains the gold answer or an alias), latency;
  wall time and runs per minute; runs lost (an error, or no answer).
- phase 2 (sharing): the same questions again on each server, all at once. Per server:
  QA-table rows of the final states whose source is `cache` (a sub-question answered from
  the QA cache instead of retrieval), and the rows of the shared Postgres table
  `hoprag_qa_entries` after each phase. "Cache hits shared" means: cache hits on both
  servers, from the one table both write to; a server keeps no cache of its own. Only
  graphs with a QA cache (deft) can hit it.
Everything started is stopped, and its temporary folders removed, when the script ends
(Ctrl-C and errors included). The two servers share this checkout's `.langgraph_api/`,
where `langgraph dev` keeps its threads, as any `hoprag serve` started here does. Writes
bench/results/serve_load-GRAPH-scale-out[-L].json.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_sdk import get_sync_client

from bench.common import ROOT, save

if TYPE_CHECKING:
    from app.settings import Settings

SAMPLE_QUESTIONS = ROOT / "app" / "data" / "sample" / "questions.json"
SERVERS = 2  # `hoprag serve` processes of --scale-out


def single_hops() -> list[tuple[str, str]]:
    """(question, gold answer) of every step of the sample questions' decompositions."""
    questions = json.loads(SAMPLE_QUESTIONS.read_text())
    return [(d["question"], d["answer"]) for q in questions for d in q["question_decomposition"]]


def multi_hops(count: int) -> list[dict[str, Any]]:
    """The first `count` multi-hop questions of the sample (with answer and aliases)."""
    return json.loads(SAMPLE_QUESTIONS.read_text())[:count]


def final_state(url: str, graph: str, question: str) -> tuple[dict[str, Any], float]:
    """One chat in a new thread: the run's final state, and seconds from request to it."""
    client = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    start = time.perf_counter()
    final = client.runs.wait(
        thread, graph, input={"messages": [{"role": "user", "content": question}]}
    )
    return final if isinstance(final, dict) else {}, time.perf_counter() - start


def chat(url: str, graph: str, question: str) -> tuple[str, float]:
    final, seconds = final_state(url, graph, question)
    return str(final.get("answer", "")), seconds


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency_summary(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {}
    return {
        "p50": round(percentile(latencies, 0.5), 1),
        "p90": round(percentile(latencies, 0.9), 1),
        "p95": round(percentile(latencies, 0.95), 1),
        "max": round(max(latencies), 1),
        "mean": round(statistics.fmean(latencies), 1),
    }


def is_correct(answer: str, question: dict[str, Any]) -> bool:
    """The answer contains the gold answer or one of its aliases."""
    golds = [question["answer"], *(question.get("answer_aliases") or [])]
    return any(g.lower() in answer.lower() for g in golds if g)


def chat_record(server: int, url: str, graph: str, question: dict[str, Any]) -> dict[str, Any]:
    """One chat of the scale-out load: what it answered, or the error that stopped it."""
    start = time.perf_counter()
    try:
        final, seconds = final_state(url, graph, question["question"])
        error = ""
    except Exception as exc:  # a lost run is counted, not fatal
        final, seconds, error = {}, time.perf_counter() - start, f"{type(exc).__name__}: {exc}"
    answer = str(final.get("answer") or "")
    rows = final.get("qa_table") or []
    return {
        "server": server,
        "question_id": question["id"],
        "answer": answer,
        "correct": bool(answer) and is_correct(answer, question),
        "seconds": round(seconds, 1),
        "qa_rows": len(rows),
        "cache_rows": sum(1 for r in rows if r.get("source") == "cache"),
        **({"error": error[:300]} if error else {}),
    }


def load_phase(
    urls: list[str], graph: str, questions: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], float]:
    """Every question once on every server, all chats at once; the records (questions in
    order, servers alternating) and the wall seconds."""
    work = [(n, url, q) for q in questions for n, url in enumerate(urls, 1)]
    pool = ThreadPoolExecutor(len(work))
    try:
        start = time.perf_counter()
        records = list(pool.map(lambda w: chat_record(w[0], w[1], graph, w[2]), work))
        return records, time.perf_counter() - start
    finally:  # Ctrl-C: stop waiting; the servers are stopped next, which ends the chats
        pool.shutdown(wait=False, cancel_futures=True)


def cache_entries(postgres_url: str, index: str) -> int:
    """Rows of the shared QA cache table for the index (0 before any was written)."""
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        exists = conn.execute("SELECT to_regclass('hoprag_qa_entries')").fetchone()
        if not exists or exists[0] is None:
            return 0
        row = conn.execute(
            "SELECT count(*) FROM hoprag_qa_entries WHERE index_name = %s", (index,)
        ).fetchone()
        return int(row[0]) if row else 0


def upload_vectors(settings: Settings, index: str) -> None:
    """Put the index's passage vectors on the Chroma server (the collection any server
    opening the index looks for), so that no chat waits for the upload."""
    from app.index.store import CorpusIndex

    store = CorpusIndex.open(settings, index)
    try:
        _ = store.collection
    finally:
        store.close()


def warm_up(url: str, graph: str) -> float:
    """Build the graph once on a server (its factory opens the models and stores of the
    index), without a chat; the seconds it took."""
    client = get_sync_client(url=url)
    start = time.perf_counter()
    assistant = client.assistants.search(graph_id=graph, limit=1)[0]["assistant_id"]
    client.assistants.get_graph(assistant)
    return time.perf_counter() - start


def phase_summary(records: list[dict[str, Any]], wall: float, servers: int) -> dict[str, Any]:
    lost = [r for r in records if r.get("error") or not r["answer"]]
    return {
        "runs": len(records),
        "answered": len(records) - len(lost),
        "lost": len(lost),
        "correct": sum(r["correct"] for r in records),
        "wall_s": round(wall, 1),
        "runs_per_min": round(60 * len(records) / wall, 2),
        "latency_s": latency_summary([r["seconds"] for r in records if not r.get("error")]),
        "per_server": {
            str(n): {
                "runs": sum(r["server"] == n for r in records),
                "answered": sum(r["server"] == n and r not in lost for r in records),
                "correct": sum(r["server"] == n and r["correct"] for r in records),
                "cache_rows": sum(r["cache_rows"] for r in records if r["server"] == n),
                "chats_with_cache_rows": sum(
                    r["server"] == n and r["cache_rows"] > 0 for r in records
                ),
            }
            for n in range(1, servers + 1)
        },
        "chats": records,
    }


def scale_out(args: argparse.Namespace) -> None:
    """Start the deployment, run the two phases, stop it; see the module docstring."""
    from app.checks import require_index
    from app.settings import Settings
    from bench.services import chroma_server, hoprag_server, model_endpoint, postgres_server

    settings = Settings()
    require_index(settings, args.index)
    questions = multi_hops(args.questions)
    # SIGTERM stops the script as Ctrl-C does: every service is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hoprag-load-")))
        started = time.perf_counter()
        postgres = stack.enter_context(postgres_server())
        chroma = stack.enter_context(chroma_server())
        upload_vectors(settings.with_overrides(chroma_url=chroma), args.index)
        model = stack.enter_context(model_endpoint(log_dir=logs))
        env = {
            "HOPRAG_INDEX": args.index,
            "HOPRAG_POSTGRES_URL": postgres,
            "HOPRAG_CHROMA_URL": chroma,
            "HOPRAG_LLM_BASE_URL": model,
        }
        urls = [stack.enter_context(hoprag_server(env=env, log_dir=logs)) for _ in range(SERVERS)]
        print(f"started in {time.perf_counter() - started:.0f} s: {urls}", file=sys.stderr)
        warm = [round(warm_up(url, args.graph), 1) for url in urls]
        print(f"graphs built in {warm} s; phase 1", file=sys.stderr)
        load, load_wall = load_phase(urls, args.graph, questions)
        entries_after_load = cache_entries(postgres, args.index)
        print(f"phase 1: {load_wall:.0f} s; phase 2", file=sys.stderr)
        sharing, sharing_wall = load_phase(urls, args.graph, questions)
        entries_after_sharing = cache_entries(postgres, args.index)
    phase1 = phase_summary(load, load_wall, SERVERS)
    phase2 = phase_summary(sharing, sharing_wall, SERVERS)
    hits = {n: s["cache_rows"] for n, s in phase2["per_server"].items()}
    report = {
        "mode": "scale-out",
        "graph": args.graph,
        "label": args.label,
        "index": args.index,
        "servers": SERVERS,
        "questions": len(questions),
        "jobs_per_server": settings.jobs,
        "llm_slots": settings.llm_slots,
        "model": settings.model,
        "warm_up_s": warm,
        "load": phase1,
        "sharing": phase2,
        "cache_entries": {"after_load": entries_after_load, "after_sharing": entries_after_sharing},
        "cache_hits_per_server": hits,
        "all_answered": phase1["lost"] == 0,
        "hits_shared": len(hits) > 1 and all(h > 0 for h in hits.values()),
    }
    command = f"python -m bench.serve_load --scale-out --graph {args.graph}" + "".join(
        f" {flag} {value}"
        for flag, value, default in (
            ("--questions", args.questions, 8),
            ("--index", args.index, "sample"),
            ("--label", args.label, ""),
        )
        if value != default
    )
    name = f"serve_load-{args.graph}-scale-out" + (f"-{args.label}" if args.label else "")
    path = save(name, {"command": command, **report})
    brief = {k: v for k, v in report.items() if k not in ("load", "sharing")}
    for phase in ("load", "sharing"):
        brief[phase] = {k: v for k, v in report[phase].items() if k != "chats"}
    print(json.dumps(brief, indent=2))
    print(f"wrote {path}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8123")
    parser.add_argument("--graph", default=None, help="default: vanilla; deft with --scale-out")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument(
        "--label", default="", help="what else this run measures (results file suffix)"
    )
    parser.add_argument(
        "--scale-out",
        action="store_true",
        help="start Postgres, Chroma, a model endpoint and two `hoprag serve` and load them",
    )
    parser.add_argument(
        "--questions",
        type=int,
        default=8,
        help="--scale-out: the first N multi-hop sample questions (each sent to each server)",
    )
    parser.add_argument("--index", default="sample", help="--scale-out: the index served")
    args = parser.parse_args()
    if args.scale_out:
        from app.errors import UserError, exit_with
        from bench.services import ServiceFailed

        args.graph = args.graph or "deft"
        try:
            scale_out(args)
        except UserError as exc:
            exit_with(exc)
        except ServiceFailed as exc:
            raise SystemExit(f"error: {exc}") from None
        return
    args.graph = args.graph or "vanilla"
    pairs = single_hops()
    work = [pairs[i % len(pairs)] for i in range(args.runs)]
    start = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        done = list(pool.map(lambda qa: chat(args.url, args.graph, qa[0]), work))
    wall = time.perf_counter() - start
    latencies = [seconds for _, seconds in done]
    chats = [
        {
            "question": question,
            "gold": gold,
            "answer": answer,
            "correct": gold.lower() in answer.lower(),
            "seconds": round(seconds, 1),
        }
        for (question, gold), (answer, seconds) in zip(work, done, strict=True)
    ]
    correct = sum(c["correct"] for c in chats)
    report = {
        "graph": args.graph,
        "label": args.label,
        "concurrency": args.concurrency,
        "runs": args.runs,
        "wall_s": round(wall, 1),
        "runs_per_min": round(60 * args.runs / wall, 2),
        "latency_s": latency_summary(latencies),
        "correct": correct,
        "chats": chats,
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
