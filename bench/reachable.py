"""How far the `deft` configurations tried so far reach, question by question.

    .venv/bin/python -m bench.reachable musique [2wikimultihopqa hotpotqa]

For each benchmark it reads the current `B-deft` run and every other `B-deft-*` run kept
(a variant beside it, or archived) that holds all of its questions (the first 60 dev
questions; each such run is one configuration measured earlier: a lever tried, a study,
an older default), and counts the questions the current run answers right (EM), the
questions some run answered right (the union: what choosing the best configuration per
question would reach, which no single configuration can), and those right in at least
half of the runs. It lists the questions the union has and the current run lacks, with
the runs that got them.
Results go to bench/results/reachable.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.eval.run import load_run
from bench.common import RESULTS, find_run, save


def deft_runs(benchmark: str) -> list[str]:
    """The current run first, then the variants kept beside it and the archived runs."""
    others = [
        *sorted((RESULTS / "eval").glob(f"{benchmark}-deft-*")),
        *sorted((RESULTS / "archive").glob(f"{benchmark}-deft*")),
    ]
    return [f"{benchmark}-deft", *(str(p) for p in others)]


def reach(benchmark: str) -> dict[str, Any]:
    runs = [
        (Path(name).name, {r["id"]: r for r in load_run(find_run(name))[1]})
        for name in deft_runs(benchmark)
    ]
    current = runs[0][1]
    used = [(name, records) for name, records in runs if current.keys() <= records.keys()]
    right = {qid: [name for name, records in used if records[qid]["em"]] for qid in current}
    now = [qid for qid in current if current[qid]["em"]]
    ever = [qid for qid in current if right[qid]]
    return {
        "benchmark": benchmark,
        "questions": len(current),
        "runs": len(used),
        "right_now": len(now),
        "right_in_some_run": len(ever),
        "right_in_half": sum(len(right[qid]) * 2 >= len(used) for qid in current),
        "reached_not_now": [
            {"question": current[qid]["question"], "runs": right[qid]}
            for qid in ever
            if qid not in now
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("benchmarks", nargs="+")
    benchmarks = parser.parse_args().benchmarks
    rows = [reach(b) for b in benchmarks]
    for row in rows:
        print({k: v for k, v in row.items() if k != "reached_not_now"})
        for item in row["reached_not_now"]:
            print(f"  {item['question'][:80]}: {', '.join(item['runs'])}")
    save(
        "reachable", {"command": "python -m bench.reachable " + " ".join(benchmarks), "rows": rows}
    )


if __name__ == "__main__":
    main()
