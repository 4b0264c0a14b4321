"""Chat load through `langgraph_sdk`: on one running `hoprag serve`, or (--scale-out,
--replicas) on two server processes this script starts, sharing Postgres, Chroma and the
model endpoint.

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

Replicas (issue 54, item 5): the same deployment, the chats sent as the README's client
sends them (`runs.stream`, `stream_mode=["updates", "custom"]`), each a new thread with a
follow-up turn (the next sample question, in the same thread), on both engines of
`hoprag serve` in the same run, then a replica killed in the middle of the load.

    .venv/bin/python -m bench.serve_load --replicas [--graph deft] [--questions 8] [--label L]

One PostgreSQL server, one Chroma server and one model endpoint serve everything; each
engine gets a database of its own on that server (threads, runs and checkpoints for the
production engine; the QA cache for both), so each starts with an empty QA cache.
- Load, per engine: two replicas of `hoprag serve` (development: `langgraph dev`), then
  of `hoprag serve --production` (Aegra). Every question sent once to each replica, all
  chats at once (8 questions: 16 chats, 32 turns). A development replica holds its
  threads in its own memory, so there a follow-up goes back to the replica that has the
  thread; a production follow-up goes to the other replica. Per turn: replica, seconds
  from request to the stream's end, answered, correct (the answer contains the gold
  answer or an alias), error. Per engine: answered turns per minute of wall time, p50/p90
  seconds of the answered turns, correct, lost (an error, or no answer).
- Fault, production only: the QA cache emptied, the same first turns on fresh threads,
  and replica 1 SIGKILLed (its process group) once half of its first turns have ended
  and each of its others has streamed a step, so that it dies with runs in flight whose
  saved steps can be checked. Then, through replica 2: every thread read (200) with its
  checkpoint history; each step a client saw streamed found in that history (else a
  checkpoint lost); each run that was in flight on replica 1 ended, `error` (with the
  hint to `hoprag resume`) within REPLICA_LOST_S plus a few heartbeats, or `success`;
  each `error` one continued by `hoprag resume THREAD --json` (the server's Postgres,
  index, Chroma and model endpoint; two at a time, as each loads the models), its answer
  checked; then every thread's follow-up turn sent to replica 2.
Everything started is stopped when the script ends, as with --scale-out. Writes
bench/results/serve_load-GRAPH-replicas[-L].json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_sdk import get_sync_client

from bench.common import ROOT, save

if TYPE_CHECKING:
    from app.settings import Settings
    from bench.services import Server

SAMPLE_QUESTIONS = ROOT / "app" / "data" / "sample" / "questions.json"
SERVERS = 2  # `hoprag serve` processes of --scale-out and --replicas
ENGINES = {"development": False, "production": True}  # --replicas: name, `--production`
KILLED = 1  # the replica --replicas kills
RESUMES_AT_ONCE = 2  # `hoprag resume` processes at once: each loads the models
RESUME_TIMEOUT_S = 900
MARK_BEATS = 6  # heartbeats past REPLICA_LOST_S within which a lost run must be marked

Work = tuple[int, int, dict[str, Any], dict[str, Any]]  # chat, replica, question, follow-up


def single_hops() -> list[tuple[str, str]]:
    """(question, gold answer) of every step of the sample questions' decompositions."""
    questions = json.loads(SAMPLE_QUESTIONS.read_text())
    return [(d["question"], d["answer"]) for q in questions for d in q["question_decomposition"]]


def multi_hops(count: int | None = None) -> list[dict[str, Any]]:
    """The first `count` (default: all) multi-hop questions of the sample (with answer and
    aliases)."""
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


@contextmanager
def deployment(settings: Settings, index: str) -> Iterator[tuple[dict[str, str], Path]]:
    """What the servers share, started on loopback and stopped when the block ends
    (SIGTERM, Ctrl-C and errors included): a PostgreSQL server, a Chroma server holding
    the index's vectors and one model endpoint. Their settings for a hoprag process
    (HOPRAG_INDEX, HOPRAG_POSTGRES_URL, HOPRAG_CHROMA_URL, HOPRAG_LLM_BASE_URL), and the
    folder for the logs (removed afterwards)."""
    from bench.services import chroma_server, model_endpoint, postgres_server

    # SIGTERM stops the script as Ctrl-C does: every service is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hoprag-load-")))
        postgres = stack.enter_context(postgres_server())
        chroma = stack.enter_context(chroma_server())
        upload_vectors(settings.with_overrides(chroma_url=chroma), index)
        model = stack.enter_context(model_endpoint(log_dir=logs))
        env = {
            "HOPRAG_INDEX": index,
            "HOPRAG_POSTGRES_URL": postgres,
            "HOPRAG_CHROMA_URL": chroma,
            "HOPRAG_LLM_BASE_URL": model,
        }
        yield env, logs


def command_line(mode: str, args: argparse.Namespace) -> str:
    """The command that made a result, with the flags that differ from their defaults."""
    return f"python -m bench.serve_load {mode} --graph {args.graph}" + "".join(
        f" {flag} {value}"
        for flag, value, default in (
            ("--questions", args.questions, 8),
            ("--index", args.index, "sample"),
            ("--label", args.label, ""),
        )
        if value != default
    )


def write_report(mode: str, args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Save the report as bench/results/serve_load-GRAPH-MODE[-LABEL].json and print it
    without its per-chat records (the `records` and `chats` lists)."""
    name = f"serve_load-{args.graph}-{mode}" + (f"-{args.label}" if args.label else "")
    path = save(name, {"command": command_line(f"--{mode}", args), **report})

    def brief(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: brief(v)
                for k, v in value.items()
                if k not in ("records", "chats") or not isinstance(v, list)
            }
        return value

    print(json.dumps(brief(report), indent=2))
    print(f"wrote {path}", file=sys.stderr)


def scale_out(args: argparse.Namespace) -> None:
    """Start the deployment, run the two phases, stop it; see the module docstring."""
    from app.checks import require_index
    from app.settings import Settings
    from bench.services import hoprag_server

    settings = Settings()
    require_index(settings, args.index)
    questions = multi_hops(args.questions)
    with ExitStack() as stack:
        started = time.perf_counter()
        env, logs = stack.enter_context(deployment(settings, args.index))
        postgres = env["HOPRAG_POSTGRES_URL"]
        urls = [
            stack.enter_context(hoprag_server(env=env, log_dir=logs)).url for _ in range(SERVERS)
        ]
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
    write_report("scale-out", args, report)


# --replicas (issue 54, item 5): both engines of `hoprag serve`, then a replica killed.


def stream_turn(
    url: str,
    graph: str,
    thread: str | None,
    question: str,
    seen: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One turn as the README's client sends it: `runs.stream` with updates and custom
    events, in `thread` (None: a new thread, made on `url`). The thread, the run id, the
    top-level steps streamed (node names, in order), the answer, the count of each kind of
    event, and the error that ended the turn, if any ("" when it ended as it should).
    `seen(kind)` is called after each event."""
    client = get_sync_client(url=url)
    out: dict[str, Any] = {"thread": thread or "", "run_id": "", "steps": [], "answer": ""}
    events: Counter[str] = Counter()
    error = ""
    try:
        out["thread"] = thread or client.threads.create()["thread_id"]
        for part in client.runs.stream(
            out["thread"],
            graph,
            input={"messages": [{"role": "user", "content": question}]},
            stream_mode=["updates", "custom"],
        ):
            kind = part.event.split("|")[0]  # "updates|SUBGRAPH" where subgraphs stream
            events[kind] += 1
            if kind == "metadata" and isinstance(part.data, dict):
                out["run_id"] = str(part.data.get("run_id") or "")
            elif kind == "updates" and isinstance(part.data, dict):
                for node, update in part.data.items():
                    if not node.startswith("__"):
                        out["steps"].append(node)
                    if isinstance(update, dict) and update.get("answer"):
                        out["answer"] = str(update["answer"])
            elif kind == "error":
                error = f"error event: {part.data}"
            if seen is not None:
                seen(kind)
        if not error and not out["answer"]:  # not streamed: read the thread's state
            values = client.threads.get_state(out["thread"]).get("values") or {}
            out["answer"] = str(values.get("answer") or "") if isinstance(values, dict) else ""
    except Exception as exc:  # a lost turn is counted, not fatal
        error = f"{type(exc).__name__}: {exc}"
    return {**out, "events": dict(events), "error": error[:300]}


def turn_record(
    chat: int,
    turn: int,
    replica: int,
    url: str,
    graph: str,
    thread: str | None,
    question: dict[str, Any],
    seen: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One turn of a chat of --replicas: which replica took it, what it answered, how long
    it took, or the error that stopped it."""
    start = time.perf_counter()
    streamed = stream_turn(url, graph, thread, question["question"], seen)
    answered = bool(streamed["answer"]) and not streamed["error"]
    return {
        "chat": chat,
        "turn": turn,
        "replica": replica,
        "question_id": question["id"],
        **streamed,
        "answered": answered,
        "correct": answered and is_correct(streamed["answer"], question),
        "seconds": round(time.perf_counter() - start, 1),
    }


def chat_work(questions: list[dict[str, Any]]) -> list[Work]:
    """(chat, replica, first question, follow-up) of each chat: every question once on
    each replica; the follow-up is the sample's next question."""
    sample = multi_hops()
    ids = [q["id"] for q in sample]
    follow = {q["id"]: sample[(ids.index(q["id"]) + 1) % len(sample)] for q in questions}
    pairs = [(q, n) for q in questions for n in range(1, SERVERS + 1)]
    return [(c, n, q, follow[q["id"]]) for c, (q, n) in enumerate(pairs, 1)]


def other(replica: int) -> int:
    return replica % SERVERS + 1


def chat_turns(urls: list[str], graph: str, production: bool, work: Work) -> list[dict[str, Any]]:
    """A chat of the load: a new thread on its replica, then the follow-up turn in it, on
    the same replica (development: it holds the thread) or on the other (production)."""
    chat, replica, first, follow = work
    one = turn_record(chat, 1, replica, urls[replica - 1], graph, None, first)
    if not one["thread"]:
        return [one]  # no thread was made: no follow-up to send
    second = other(replica) if production else replica
    return [one, turn_record(chat, 2, second, urls[second - 1], graph, one["thread"], follow)]


def all_at_once(work: list[Any], job: Callable[[Any], Any]) -> tuple[list[Any], float]:
    """`job` on every item at once; the results in order and the wall seconds."""
    if not work:
        return [], 0.0
    pool = ThreadPoolExecutor(len(work))
    try:
        start = time.perf_counter()
        return list(pool.map(job, work)), time.perf_counter() - start
    finally:  # Ctrl-C: stop waiting; the servers are stopped next, which ends the chats
        pool.shutdown(wait=False, cancel_futures=True)


def engine_summary(records: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    """An engine's load: turns, answered, correct, lost, answered turns per minute of wall
    time, and the seconds of the answered turns (all, first turns, follow-ups)."""
    answered = [r for r in records if r["answered"]]

    def seconds(turn: int | None = None) -> dict[str, float]:
        return latency_summary([r["seconds"] for r in answered if turn in (None, r["turn"])])

    return {
        "chats": len({r["chat"] for r in records}),
        "turns": len(records),
        "answered": len(answered),
        "correct": sum(r["correct"] for r in records),
        "lost": len(records) - len(answered),
        "wall_s": round(wall, 1),
        "turns_per_min": round(60 * len(answered) / wall, 2) if wall else 0.0,
        "latency_s": seconds(),
        "latency_s_first": seconds(1),
        "latency_s_follow_up": seconds(2),
        "per_replica": {
            str(n): {
                "turns": sum(r["replica"] == n for r in records),
                "answered": sum(r["replica"] == n and r["answered"] for r in records),
                "correct": sum(r["replica"] == n and r["correct"] for r in records),
            }
            for n in range(1, SERVERS + 1)
        },
        "events": dict(sum((Counter(r["events"]) for r in records), Counter())),
        "records": records,
    }


class KillMoment:
    """What the clients have seen of the first turns, to pick the moment of the kill: once
    half (rounded down) of the killed replica's first turns have ended and each of its
    others has streamed a step, or all of them have ended."""

    def __init__(self, killed: list[int]) -> None:
        self.cond = threading.Condition()
        self.steps = dict.fromkeys(killed, 0)  # the killed replica's chats: steps seen
        self.ended: set[int] = set()  # chats of either replica whose first turn ended

    def seen(self, chat: int) -> Callable[[str], None]:
        def note(kind: str) -> None:
            if kind == "updates" and chat in self.steps:
                with self.cond:
                    self.steps[chat] += 1
                    self.cond.notify_all()

        return note

    def end(self, chat: int) -> None:
        with self.cond:
            self.ended.add(chat)
            self.cond.notify_all()

    def ripe(self) -> bool:
        running = [c for c in self.steps if c not in self.ended]
        finished = len(self.steps) - len(running)
        return not running or (
            finished >= len(self.steps) // 2 and all(self.steps[c] for c in running)
        )

    def wait_and(self, act: Callable[[], None]) -> set[int]:
        """Wait for the moment, `act` (the kill) then; the chats that had ended before."""
        with self.cond:
            while not self.ripe():
                self.cond.wait(1.0)  # a timeout, so that Ctrl-C and SIGTERM get through
            act()
            return set(self.ended)


def completed_steps(history: list[dict[str, Any]]) -> Counter[str]:
    """The top-level steps a thread's checkpoints hold: the tasks of every state but the
    newest (a later state exists, so they ended), and those of the newest that have saved
    writes (a step of an unfinished superstep)."""
    states = sorted(history, key=lambda s: (s.get("metadata") or {}).get("step", 0))
    done: Counter[str] = Counter()
    for i, state in enumerate(states):
        for task in state.get("tasks") or []:
            name = task.get("name") or ""
            if not name.startswith("__") and (
                i < len(states) - 1 or task.get("result") is not None
            ):
                done[name] += 1
    return done


def thread_check(url: str, record: dict[str, Any]) -> dict[str, Any]:
    """A thread of the fault phase read through `url`: readable (the thread and its state
    answer 200), its checkpoints, and the steps its client saw streamed that they lack."""
    client = get_sync_client(url=url)
    thread = record["thread"]
    out: dict[str, Any] = {"chat": record["chat"], "thread": thread, "readable": False}
    try:
        client.threads.get(thread)
        client.threads.get_state(thread)
        out["readable"] = True
        history = client.threads.get_history(thread, limit=1000)
    except Exception as exc:
        return {**out, "checkpoints": 0, "missing_steps": [], "error": f"{exc}"[:300]}
    missing = Counter(record["steps"]) - completed_steps(history)
    return {**out, "checkpoints": len(history), "missing_steps": sorted(missing.elements())}


def run_end(url: str, thread: str, run_id: str, killed_at: datetime) -> dict[str, Any]:
    """How a run that was in flight on the killed replica ended, read through `url`:
    its status once it is neither pending nor running (waiting up to REPLICA_LOST_S plus
    MARK_BEATS heartbeats after the kill), the seconds from the kill to its last update,
    and whether its error names `hoprag resume`."""
    from app.settings import HEARTBEAT_S, REPLICA_LOST_S

    client = get_sync_client(url=url)
    deadline = killed_at.timestamp() + REPLICA_LOST_S + MARK_BEATS * HEARTBEAT_S
    run: dict[str, Any] = {}
    try:
        run_id = run_id or client.runs.list(thread)[-1]["run_id"]  # the thread's first run
        run = dict(client.runs.get(thread, run_id))
        while run.get("status") in ("pending", "running") and time.time() < deadline:
            time.sleep(HEARTBEAT_S)
            run = dict(client.runs.get(thread, run_id))
    except Exception as exc:
        return {"thread": thread, "status": "unreadable", "error": f"{exc}"[:300]}
    updated = run.get("updated_at")
    seconds = (
        round(datetime.fromisoformat(str(updated)).timestamp() - killed_at.timestamp(), 1)
        if updated
        else None
    )
    message = str(run.get("error_message") or run.get("error") or "")
    return {
        "thread": thread,
        "run_id": run_id,
        "status": run.get("status", "?"),
        "seconds_after_kill": seconds,
        "in_time": run.get("status") not in ("pending", "running"),
        "names_resume": "hoprag resume" in message,
    }


def resume_thread(
    thread: str, env: dict[str, str], question: dict[str, Any], children: set
) -> dict[str, Any]:
    """`hoprag resume THREAD --json` with the servers' settings: exit code, answer,
    correct, seconds. Its process group is in `children` while it runs."""
    from bench.services import SOURCE, hoprag_env

    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "resume", thread, "--json"],
        env=hoprag_env(None, **env),
        cwd=SOURCE,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    children.add(proc)
    try:
        out, err = proc.communicate(timeout=RESUME_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    finally:
        children.discard(proc)
    try:
        answer = str(json.loads(out).get("answer") or "") if proc.returncode == 0 else ""
    except json.JSONDecodeError:
        answer = ""
    return {
        "thread": thread,
        "code": proc.returncode,
        "answer": answer,
        "correct": bool(answer) and is_correct(answer, question),
        "seconds": round(time.perf_counter() - start, 1),
        **({"stderr": err.strip()[-300:]} if proc.returncode else {}),
    }


@contextmanager
def process_groups() -> Iterator[set[subprocess.Popen[str]]]:
    """A set to put child processes in; those still running when the block ends (an
    error, Ctrl-C, SIGTERM) are killed with their groups."""
    children: set[subprocess.Popen[str]] = set()
    try:
        yield children
    finally:
        for proc in list(children):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def clear_qa_cache(postgres_url: str) -> None:
    """Empty the shared QA cache (the servers keep none of their own), so that the fault
    phase starts as the load did."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for table in ("hoprag_qa_entries", "hoprag_qa_lookups"):
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]:
                conn.execute(f"DELETE FROM {table}")


def fault_phase(
    servers: list[Server], graph: str, work: list[Work], env: dict[str, str]
) -> dict[str, Any]:
    """The first turns of `work` on fresh threads, replica KILLED killed in the middle;
    then the checks, resumes and follow-ups of the module docstring, through the other
    replica. `env`: the servers' settings, for `hoprag resume`."""
    survivor = other(KILLED)
    urls = [s.url for s in servers]
    alive = urls[survivor - 1]
    moment = KillMoment([chat for chat, n, _, _ in work if n == KILLED])
    killed_at = datetime.now(UTC)

    def kill() -> None:
        nonlocal killed_at
        killed_at = datetime.now(UTC)
        servers[KILLED - 1].kill()

    pool = ThreadPoolExecutor(len(work))
    try:
        start = time.perf_counter()
        futures = []
        for chat, n, first, _ in work:
            future = pool.submit(
                turn_record, chat, 1, n, urls[n - 1], graph, None, first, moment.seen(chat)
            )
            future.add_done_callback(lambda _, chat=chat: moment.end(chat))
            futures.append(future)
        ended = moment.wait_and(kill)
        kill_after = time.perf_counter() - start
        print(f"replica {KILLED} killed after {kill_after:.0f} s", file=sys.stderr)
        first_turns = [f.result() for f in futures]
    finally:  # Ctrl-C: stop waiting; the servers are stopped next, which ends the chats
        pool.shutdown(wait=False, cancel_futures=True)
    question = {r["thread"]: work[r["chat"] - 1][2] for r in first_turns}
    in_flight = [r for r in first_turns if r["replica"] == KILLED and r["chat"] not in ended]
    checks, _ = all_at_once(first_turns, lambda r: thread_check(alive, r))
    ends, _ = all_at_once(in_flight, lambda r: run_end(alive, r["thread"], r["run_id"], killed_at))
    for r, end in zip(in_flight, ends, strict=True):
        if end["status"] == "success" and not r["answered"]:  # its client lost the stream
            values = get_sync_client(url=alive).threads.get_state(r["thread"])["values"]
            r["answer"] = str(values.get("answer") or "")
            r["answered"] = bool(r["answer"])
            r["correct"] = r["answered"] and is_correct(r["answer"], question[r["thread"]])
    to_resume = [e["thread"] for e in ends if e["status"] == "error"]
    print(f"{len(to_resume)} run(s) to resume", file=sys.stderr)
    with process_groups() as children, ThreadPoolExecutor(RESUMES_AT_ONCE) as resumer:
        resumes = list(
            resumer.map(lambda t: resume_thread(t, env, question[t], children), to_resume)
        )
    resumed = {r["thread"]: r for r in resumes if r["answer"]}
    print("follow-ups", file=sys.stderr)
    follow_ups, follow_wall = all_at_once(
        [r for r in first_turns if r["thread"]],
        lambda r: turn_record(
            r["chat"], 2, survivor, alive, graph, r["thread"], work[r["chat"] - 1][3]
        ),
    )
    both = 0
    for r in follow_ups:
        values = get_sync_client(url=alive).threads.get_state(r["thread"])["values"]
        both += [m.get("type") for m in values.get("messages") or []] == ["human", "ai"] * 2
    lost = [r for r in first_turns if not r["answered"] and r["thread"] not in resumed]
    return {
        "threads": len(first_turns),
        "killed_replica": KILLED,
        "kill_after_s": round(kill_after, 1),
        "readable": sum(c["readable"] for c in checks),
        "with_checkpoints": sum(c["checkpoints"] > 0 for c in checks),
        "checkpoints": sum(c["checkpoints"] for c in checks),
        "completed_before_kill": sum(r["answered"] and r["chat"] in ended for r in first_turns),
        "completed_after_kill_on_survivor": sum(
            r["replica"] == survivor and r["answered"] and r["chat"] not in ended
            for r in first_turns
        ),
        "in_flight_on_killed": len(in_flight),
        "completed_there": sum(e["status"] == "success" for e in ends),
        "marked_error": len(to_resume),
        "marked_error_naming_resume": sum(
            e["status"] == "error" and e["names_resume"] for e in ends
        ),
        "not_ended_in_time": sum(not e.get("in_time") for e in ends),
        "seconds_kill_to_end": latency_summary(
            [e["seconds_after_kill"] for e in ends if e.get("seconds_after_kill") is not None]
        ),
        "resumed": len(resumed),
        "resumed_right": sum(r["correct"] for r in resumes),
        "lost_for_good": len(lost),
        "steps_streamed": sum(len(r["steps"]) for r in first_turns),
        "checkpoints_lost": sum(len(c["missing_steps"]) for c in checks),
        "threads_missing_steps": sum(bool(c["missing_steps"]) for c in checks),
        "follow_ups": {
            "sent": len(follow_ups),
            "answered": sum(r["answered"] for r in follow_ups),
            "correct": sum(r["correct"] for r in follow_ups),
            "wall_s": round(follow_wall, 1),
            "latency_s": latency_summary([r["seconds"] for r in follow_ups if r["answered"]]),
        },
        "threads_with_both_answers": both,
        "records": first_turns + follow_ups,
        "thread_checks": checks,
        "in_flight_ends": ends,
        "resumes": resumes,
    }


def replicas(args: argparse.Namespace) -> None:
    """Both engines under the same load, then the fault phase; see the module docstring."""
    from app.checks import require_index
    from app.settings import HEARTBEAT_S, REPLICA_LOST_S, Settings
    from bench.services import hoprag_server, new_database

    settings = Settings()
    require_index(settings, args.index)
    work = chat_work(multi_hops(args.questions))
    engines: dict[str, Any] = {}
    warm: dict[str, list[float]] = {}
    fault: dict[str, Any] = {}
    with ExitStack() as outer:
        started = time.perf_counter()
        shared, logs = outer.enter_context(deployment(settings, args.index))
        print(f"shared services up in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for engine, production in ENGINES.items():
            database = new_database(shared["HOPRAG_POSTGRES_URL"], f"load_{engine}")
            env = {**shared, "HOPRAG_POSTGRES_URL": database}
            with ExitStack() as stack:
                servers = [
                    stack.enter_context(hoprag_server(env=env, log_dir=logs, production=production))
                    for _ in range(SERVERS)
                ]
                urls = [s.url for s in servers]
                warm[engine] = [round(warm_up(url, args.graph), 1) for url in urls]
                print(f"{engine}: {urls}, graphs built in {warm[engine]} s", file=sys.stderr)
                records, wall = all_at_once(
                    work, lambda w, urls=urls, p=production: chat_turns(urls, args.graph, p, w)
                )
                engines[engine] = engine_summary([r for pair in records for r in pair], wall)
                print(f"{engine}: {wall:.0f} s", file=sys.stderr)
                if production:
                    clear_qa_cache(database)
                    print("fault phase", file=sys.stderr)
                    fault = fault_phase(servers, args.graph, work, env)
    report = {
        "mode": "replicas",
        "graph": args.graph,
        "label": args.label,
        "index": args.index,
        "replicas": SERVERS,
        "questions": len(work) // SERVERS,
        "jobs_per_server": settings.jobs,
        "llm_slots": settings.llm_slots,
        "model": settings.model,
        "replica_lost_s": REPLICA_LOST_S,
        "heartbeat_s": HEARTBEAT_S,
        "mark_beats": MARK_BEATS,
        "warm_up_s": warm,
        "engines": engines,
        "fault": fault,
    }
    write_report("replicas", args, report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8123")
    parser.add_argument(
        "--graph", default=None, help="default: vanilla; deft with --scale-out, --replicas"
    )
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
        "--replicas",
        action="store_true",
        help="the same deployment; chats with follow-ups on `hoprag serve` and `hoprag serve "
        "--production`, then a production replica killed mid-load",
    )
    parser.add_argument(
        "--questions",
        type=int,
        default=8,
        help="--scale-out, --replicas: the first N multi-hop sample questions (each sent to "
        "each server)",
    )
    parser.add_argument(
        "--index", default="sample", help="--scale-out, --replicas: the index served"
    )
    args = parser.parse_args()
    if args.scale_out or args.replicas:
        from app.errors import UserError, exit_with
        from bench.services import ServiceFailed

        args.graph = args.graph or "deft"
        try:
            (scale_out if args.scale_out else replicas)(args)
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
