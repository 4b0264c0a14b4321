"""How a DeFT run's questions ended, read from its traces (traces.jsonl.gz beside the run,
which git does not keep), next to a baseline on the same questions: the numbers the run
notes in docs/BENCHMARKS.md quote.

    .venv/bin/python -m bench.deft_endings RUN [--baseline vanilla]

RUN is a folder under bench/results/eval (or a path). For each ending (answered from
the QA table; fallback with or without QA-table rows) it prints the number of questions
and the mean EM and judged accuracy of the run and of the baseline on those questions,
plus how many sufficiency decisions the comparison rule made and how many said yes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.eval.run import load_run
from bench.common import RESULTS, find_run, load_traced


def load(folder: Path) -> dict[str, dict[str, Any]]:
    """A run's records by question id."""
    return {r["id"]: r for r in load_run(folder)[1]}


def final_node(record: dict[str, Any]) -> str:
    """The node that wrote the answer (the last before `reply`)."""
    return [step["node"] for step in record["trace"] if step["node"] != "reply"][-1]


def ending(record: dict[str, Any]) -> str:
    """The final answering node, and whether the QA table held any row by then."""
    rows = any(step.get("qa_table") for step in record["trace"])
    return f"{final_node(record)} ({'with' if rows else 'without'} QA-table rows)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run")
    parser.add_argument("--baseline", default="vanilla")
    args = parser.parse_args()
    folder = find_run(args.run)
    meta, records = load_traced(args.run)
    run = {r["id"]: r for r in records}
    base = load(RESULTS / "eval" / f"{meta['index']}-{args.baseline}")
    groups: dict[str, list[str]] = {}
    for qid, record in run.items():
        groups.setdefault(ending(record), []).append(qid)
    print(f"{folder.name}: {len(run)} questions; baseline {args.baseline}")
    for name, ids in sorted(groups.items()):
        shared = [i for i in ids if i in base]

        def mean(records: dict[str, dict[str, Any]], key: str, ids: list[str] = shared) -> str:
            return f"{sum(records[i][key] for i in ids) / len(ids):.3f}" if ids else "-"

        print(
            f"  {name}: {len(ids)} questions; EM {mean(run, 'em')} vs {mean(base, 'em')}, "
            f"judged {mean(run, 'judged')} vs {mean(base, 'judged')} (on {len(shared)} shared)"
        )
    rule = [
        (r["id"], d)
        for r in run.values()
        for step in r["trace"]
        for d in step.get("decisions") or []
        if d.get("backend") == "rule"
    ]
    said_yes = {qid for qid, d in rule if d["outcome"]}
    print(
        f"  rule decisions: {len(rule)}; questions where the rule said sufficient: {len(said_yes)}"
    )


if __name__ == "__main__":
    main()
