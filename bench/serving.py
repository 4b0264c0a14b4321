"""Embedded server options on real DeFT traffic: slots, flash attention, threads and a
speculative draft model, each measured rather than assumed.

    .venv/bin/python -m bench.serving record [--benchmark musique] [--limit 8]
    .venv/bin/python -m bench.serving compare [--configs default fa-on ...]

`record` answers the first LIMIT dev questions of a benchmark with the `deft` graph and
keeps every chat call it made (messages and options) in
bench/results/serving_calls-BENCHMARK.json. `compare` replays those calls against a
fresh embedded server per configuration: one question after another (a chat), and, for
the options that concern concurrency, all questions at once (concurrent chats, each
question's calls in order; `CONFIGS` says which). It reports wall
seconds, prompt tokens read and reused, and how many replies differ from the first
configuration's (greedy decoding: a faster option must not change answers). Writes
bench/results/serving.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from langchain_core.messages import messages_from_dict, messages_to_dict

from app.eval.metrics import prompt_reuse
from app.eval.run import run_eval
from app.llm.engine import free_port
from app.llm.gateway import LLMGateway
from app.llm.models import require_model
from app.settings import Settings
from bench.common import RESULTS, require_data, save

# name -> (settings overrides of the embedded server, how its calls are replayed).
# `llama-cpp-python` is the server hoprag embedded before (llama-cpp-python's own, one
# request at a time, all logits kept), measured when that package is installed. Options
# that change one call's speed replay one chat, on four slots; slot counts replay
# concurrent chats too. The default is eight slots (`HOPRAG_LLM_SLOTS`).
BEFORE = "llama-cpp-python"
SEQUENTIAL, CONCURRENT = "sequential", "concurrent"
CONFIGS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "four slots": ({"llm_slots": 4}, (SEQUENTIAL, CONCURRENT)),
    BEFORE: ({}, (SEQUENTIAL,)),
    "one slot": ({"llm_slots": 1}, (SEQUENTIAL,)),
    "fa-on": ({"llm_slots": 4, "llm_flash_attn": True}, (SEQUENTIAL,)),
    "draft-0.5b": ({"llm_slots": 4, "llm_draft_model": "qwen2.5-coder-0.5b"}, (SEQUENTIAL,)),
    "one thread": ({"llm_slots": 4, "llm_threads": 1}, (SEQUENTIAL,)),
    "eight slots": ({"llm_slots": 8}, (CONCURRENT,)),
}


def calls_file(benchmark: str) -> Path:
    return RESULTS / f"serving_calls-{benchmark}.json"


def record(benchmark: str, limit: int) -> Path:
    """Every chat call of `deft` on the first questions, grouped by question."""
    calls: list[dict[str, Any]] = []
    complete = LLMGateway._complete

    def recording(self: LLMGateway, messages: Any, options: dict[str, Any]) -> Any:
        calls.append({"messages": messages_to_dict(list(messages)), "options": options})
        return complete(self, messages, options)

    LLMGateway._complete = recording  # type: ignore[method-assign]
    settings = Settings(judge="off")
    by_question = []
    with tempfile.TemporaryDirectory() as out:
        data = require_data([benchmark]) / benchmark / "questions.json"
        for n in range(1, limit + 1):  # one question at a time, to group its calls
            start = len(calls)
            run_eval(
                settings, data=data, system="deft", out=Path(out), index=benchmark,
                split="dev", limit=n, progress=False,
            )  # fmt: skip
            by_question.append(calls[start:])
    LLMGateway._complete = complete  # type: ignore[method-assign]
    path = calls_file(benchmark)
    path.write_text(json.dumps({"benchmark": benchmark, "questions": by_question}))
    return path


def replay_question(gateway: LLMGateway, calls: list[dict[str, Any]]) -> list[str]:
    replies = []
    for call in calls:
        messages = messages_from_dict(call["messages"])
        if call["options"].get("logprobs"):
            replies.append(f"{gateway.p_yes(messages):.2f}")
        else:
            replies.append(gateway.invoke(messages, max_tokens=call["options"]["max_tokens"]))
    return replies


class BeforeGateway(LLMGateway):
    """A gateway to llama-cpp-python's server, which reads only the legacy `max_tokens`."""

    def _complete(self, messages: Any, options: dict[str, Any]) -> Any:
        limit = {"extra_body": {"max_tokens": options.pop("max_tokens")}}
        return super()._complete(messages, {**options, **limit})


@contextmanager
def gateway_for(name: str) -> Iterator[LLMGateway]:
    """A gateway to a fresh server of configuration `name`, its start outside timings."""
    settings = Settings().with_overrides(**CONFIGS[name][0])
    if name != BEFORE:
        gateway = LLMGateway(settings)
        gateway.chat()
        try:
            yield gateway
        finally:
            gateway.close()
        return
    port = free_port()
    log = (settings.home / "logs" / f"llama-cpp-python-{port}.log").open("wb")
    threads = str(os.cpu_count() or 1)
    server = subprocess.Popen(  # under the watchdog that ends it with this process
        [
            sys.executable, "-m", "app.llm.server", str(os.getpid()),
            sys.executable, "-m", "llama_cpp.server", "--model", str(require_model(settings)),
            "--model_alias", settings.model, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(settings.llm_ctx), "--n_threads", threads,
            "--n_threads_batch", threads, "--logits_all", "true",
        ],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/v1"
        for _ in range(240):
            with suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=2):
                break
            time.sleep(0.5)
        yield BeforeGateway(settings.with_overrides(llm_base_url=url))
    finally:
        server.terminate()
        server.wait()
        log.close()


def measure(name: str, questions: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Each way of replaying on a fresh server, so that no prompt is cached beforehand."""
    overrides, modes = CONFIGS[name]
    row: dict[str, Any] = {"config": name, **overrides}
    for mode in modes:
        with gateway_for(name) as gateway:
            start = time.perf_counter()
            if mode == SEQUENTIAL:
                replies = [replay_question(gateway, q) for q in questions]
            else:
                with ThreadPoolExecutor(len(questions)) as pool:
                    replies = list(pool.map(lambda q: replay_question(gateway, q), questions))
            seconds = time.perf_counter() - start
            cost = gateway.meter.snapshot()
        row[mode] = {
            "seconds": round(seconds, 1),
            "calls": int(cost["llm_calls"]),
            "input_tokens": int(cost["input_tokens"]),
            "cached_tokens": int(cost["cached_tokens"]),
            "prompt_reuse": prompt_reuse([cost]),
            "replies": replies,
        }
    return row


def compare(benchmark: str, names: list[str]) -> None:
    questions = json.loads(calls_file(benchmark).read_text())["questions"]
    if BEFORE in names and importlib.util.find_spec("llama_cpp") is None:
        print(f"skipping {BEFORE}: the package is not installed", file=sys.stderr)
        names = [n for n in names if n != BEFORE]
    rows: list[dict[str, Any]] = []
    for name in names:
        row = measure(name, questions)
        for mode in (SEQUENTIAL, CONCURRENT):
            if mode not in row:
                continue
            reference = next((r[mode]["replies"] for r in rows if mode in r), row[mode]["replies"])
            row[mode]["replies_changed"] = sum(
                a != b for qa, qb in zip(reference, row[mode]["replies"], strict=True)
                for a, b in zip(qa, qb, strict=True)
            )  # fmt: skip
        shown = {k: {**v, "replies": "..."} if isinstance(v, dict) else v for k, v in row.items()}
        print(shown, flush=True)
        rows.append(row)
    for row in rows:
        for mode in (SEQUENTIAL, CONCURRENT):
            row.get(mode, {}).pop("replies", None)
    save(
        "serving",
        {
            "command": f"python -m bench.serving compare --benchmark {benchmark} --configs "
            + " ".join(f"'{n}'" for n in names),
            "questions": len(questions),
            "calls": sum(len(q) for q in questions),
            "rows": rows,
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--benchmark", default="musique")
    rec.add_argument("--limit", type=int, default=8)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("--benchmark", default="musique")
    cmp_.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    args = parser.parse_args()
    if args.command == "record":
        print(record(args.benchmark, args.limit))
    else:
        compare(args.benchmark, args.configs)


if __name__ == "__main__":
    main()
