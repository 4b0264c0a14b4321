"""Replay the sub-question writer where a committed DeFT run saw it give up by repeating
a step it had already answered, with the writer of the current code.

    .venv/bin/python -m bench.writer_repeats RUN [RUN ...]

RUN is a folder under bench/results/eval or bench/results/archive (or a path). For each
write step whose sub-question was refused twice with at least one refusal a repeat of an
answered row, the state at that step (question, QA table, unanswerable sub-questions) is
rebuilt from the trace and the writer is asked again with the embedded model. Prints how
many replays now yield an accepted sub-question, and each one.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.embeddings import Embedder
from app.evaluation import load_run
from app.llm import LLMGateway
from app.settings import Settings
from bench.common import find_run, trace_states
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
    settings = Settings()
    gateway = LLMGateway(settings)
    examples = ExampleBank(Embedder(settings.runtime_dir))
    try:
        for name in args.runs:
            _, records = load_run(find_run(name))
            states = [s for record in records for s in repeat_give_ups(record)]
            accepted = 0
            for state in states:
                update = write_sub_question(state, gateway=gateway, examples=examples)  # type: ignore[arg-type]
                accepted += bool(update["sub_question"])
                last = state["qa_table"][-1] if state["qa_table"] else {}
                print(
                    f"  {state['question'][:70]!r}\n    last row: {last.get('sub_question')} "
                    f"-> {last.get('answer')}\n    now: {update['sub_question']!r} "
                    f"refused: {[r['sub_question'] for r in update['rejected']]}",
                    flush=True,
                )
            print(f"{name}: {accepted} of {len(states)} replays give an accepted sub-question")
    finally:
        gateway.close()


if __name__ == "__main__":
    main()
