"""Replay the sub-question writer where a committed DeFT run saw it give up by repeating
a step it had already answered, with the writer of the current code.

    .venv/bin/python -m bench.writer_repeats RUN [RUN ...]

RUN is a folder under bench/results/eval or bench/results/archive (or a path). For each
write step whose sub-question was refused twice with at least one refusal a repeat of an
answered row, the state at that step (question, QA table, unanswerable sub-questions) is
rebuilt from the trace and the writer is asked again with the embedded model. Prints how
many replays now yield an accepted sub-question, and each one. Results accumulate in
bench/results/writer_repeats.json, one entry per run and commit whose writer ran.
"""

from __future__ import annotations

import argparse
from typing import Any

from langgraph.runtime import Runtime

from app.encoders.embeddings import Embedder
from app.eval.run import load_run
from app.llm.gateway import LLMGateway
from app.settings import Settings
from bench.common import commit, find_run, load_results, save, trace_states
from nodes.sub_question import write_sub_question
from tools.examples import ExampleBank


def repeat_give_ups(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The writer states, rebuilt from the trace, at which it gave up after repeating an
    answered step."""
    states = []
    for step, state in trace_states(record):
        answered = {row["sub_question"] for row in state["qa_table"]}
        refused = [r["sub_question"] for r in step.get("rejected", [])]
        gave_up = step["node"] == "write_sub_question" and not step.get("sub_question")
        if gave_up and any(q in answered for q in refused):
            states.append({"question": record["question"], "hop": step.get("hop", 0), **state})
    return states


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    settings, ran_on = Settings(), commit()
    gateway = LLMGateway(settings)
    examples = ExampleBank(Embedder(settings.runtime_dir))
    results = (load_results("writer_repeats") or {}).get("results", {})
    try:
        for name in args.runs:
            folder = find_run(name)
            _, records = load_run(folder)
            states = [s for record in records for s in repeat_give_ups(record)]
            replays = []
            for state in states:
                update = write_sub_question(
                    state,  # type: ignore[arg-type]
                    Runtime(context=settings),
                    gateway=gateway,
                    examples=examples,
                )
                last = state["qa_table"][-1] if state["qa_table"] else {}
                replays.append(
                    {
                        "question": state["question"],
                        "last_row": [last.get("sub_question"), last.get("answer")],
                        "now": update["sub_question"],
                        "refused": [r["sub_question"] for r in update["rejected"]],
                    }
                )
                print(f"  {replays[-1]}", flush=True)
            accepted = sum(bool(r["now"]) for r in replays)
            results[f"{folder.name} {ran_on}"] = {  # one entry per run and writer
                "run": folder.name,
                "replays": len(replays),
                "accepted": accepted,
                "commit": ran_on,
                "rows": replays,
            }
            print(f"{name}: {accepted} of {len(replays)} replays give an accepted sub-question")
    finally:
        gateway.close()
        if results:
            command = "python -m bench.writer_repeats RUN ..."
            save("writer_repeats", {"command": command, "results": results})


if __name__ == "__main__":
    main()
