"""Replay a DeFT run's direct-answer check (SPEC step 2) with today's retrieval and decision
model: which questions would now be answered directly, and which not. Where neither the
question's top w nor the outcome changed, today's code takes the run's first step again
(nothing else in the graph reads DM_direct on the question's passages).

    .venv/bin/python -m bench.direct_replay RUN [RUN ...]

RUN is a folder under bench/results/eval or bench/results/archive (or a path). The top w
and the retrieval signals DM_direct reads come from the run's index today; how many
questions' top w differ from the traced `question_passages` is reported too. The chat
model is never started: depth and direct must be served by the trained DM.
"""

from __future__ import annotations

import argparse
from typing import Any

from langgraph.runtime import Runtime

from app.dm.features import DM_DIR
from app.encoders.embeddings import Embedder
from app.eval.run import load_run
from app.index.store import CorpusIndex
from app.llm.gateway import LLMGateway
from app.settings import Settings
from bench.common import commit, find_run, load_results, save
from nodes.direct import check_direct_answer
from tools.decision import DecisionModel, TrainedDM
from tools.retriever import Retriever


def traced_direct(record: dict[str, Any]) -> tuple[list[dict[str, Any]], bool] | None:
    """The run's question passages and whether it answered directly; None when the
    trace holds no direct-answer check (a run with the direct answer off)."""
    passages = None
    for step in record["trace"]:
        if step["node"] == "retrieve_question_passages":
            passages = step["question_passages"]
        if step["node"] == "check_direct_answer" and passages is not None:
            return passages, bool(step.get("direct"))
    return None


def replay(name: str, settings: Settings, embedder: Embedder) -> dict[str, Any]:
    manifest, records = load_run(find_run(name))
    index = CorpusIndex.open(settings, manifest["index"])
    retriever = Retriever(index, embedder)
    trained = TrainedDM.load(DM_DIR, settings.runtime_dir, embedder)
    dm = DecisionModel(LLMGateway(settings), embedder, index=index, trained=trained)
    if trained is None or {dm.backend("depth"), dm.backend("direct")} != {"trained"}:
        raise SystemExit("depth and direct must be served by the trained DM to replay")
    changed, replayed, direct_before, direct_now, retrieval_changed = [], 0, 0, 0, 0
    for r in records:
        traced = traced_direct(r)
        if traced is None:
            continue
        traced_passages, was_direct = traced
        passages = [p.as_dict() for p in retriever.retrieve(r["question"], settings.w)]
        retrieval_changed += [p["id"] for p in passages] != [p["id"] for p in traced_passages]
        state = {
            "question": r["question"],
            "question_passages": passages,
            "question_retrieval": retriever.retrieval_signals(r["question"]),
        }
        now = bool(check_direct_answer(state, Runtime(context=settings), dm=dm)["direct"])  # type: ignore[arg-type]
        replayed += 1
        direct_before += was_direct
        direct_now += now
        if now != was_direct:
            changed.append({"question": r["question"], "was_direct": was_direct, "em": r["em"]})
    index.close()
    return {
        "run": name,
        "replayed": replayed,
        "direct_before": direct_before,
        "direct_now": direct_now,
        "retrieval_changed": retrieval_changed,
        "changed": changed,
        "commit": commit(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    settings = Settings()
    embedder = Embedder(settings.runtime_dir)
    results = (load_results("direct_replay") or {}).get("results", {})
    for name in args.runs:
        result = replay(name, settings, embedder)
        print(
            f"{name}: {result['replayed']} replayed, direct {result['direct_before']} -> "
            f"{result['direct_now']}, {len(result['changed'])} changed; top w differs for "
            f"{result['retrieval_changed']}",
            flush=True,
        )
        for c in result["changed"]:
            was = "direct" if c["was_direct"] else "loop"
            print(f"  was {was} (EM {c['em']}): {c['question']}")
        results[name] = result
    save(
        "direct_replay",
        {"command": "python -m bench.direct_replay RUN ...", "results": results},
    )


if __name__ == "__main__":
    main()
