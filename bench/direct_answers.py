"""The questions a DeFT run answered directly (SPEC step 2), against the same questions in
a run without the direct answer: which kind of question one call reads better or worse
than the sub-question loop. Read from the committed traces.

    .venv/bin/python -m bench.direct_answers RUN LOOP_RUN

RUN and LOOP_RUN are folders under bench/results/eval or archive (or paths), e.g.
`2wikimultihopqa-deft-direct 2wikimultihopqa-deft-noexpand`. Questions are grouped by
whether the QA table's comparison rules decide them (`tools.comparison.decided_by_rule`)
and by the benchmark's group.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

from app.eval.run import load_run
from bench.common import find_run
from tools.comparison import decided_by_rule


def answered_directly(record: dict[str, Any]) -> bool:
    return any(step["node"] == "answer_directly" for step in record["trace"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run")
    parser.add_argument("loop_run")
    args = parser.parse_args()
    run = load_run(find_run(args.run))[1]
    loop = {r["id"]: r for r in load_run(find_run(args.loop_run))[1]}
    direct = [r for r in run if answered_directly(r) and r["id"] in loop]
    print(f"{args.run}: {len(direct)} of {len(run)} questions answered directly")
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in direct:
        rule = "decided by rule" if decided_by_rule(r["question"]) else "not a rule comparison"
        groups[f"{rule}, {r.get('group') or 'all'}"].append(r)
    for name, records in sorted(groups.items()):
        right = sum(r["em"] for r in records)
        loop_right = sum(loop[r["id"]]["em"] for r in records)
        print(
            f"  {name}: {len(records)} questions; right (EM) {right:.0f} directly, "
            f"{loop_right:.0f} through the loop"
        )


if __name__ == "__main__":
    main()
