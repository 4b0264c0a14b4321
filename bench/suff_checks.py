"""When the sufficiency check said yes, read from a DeFT run's committed traces: how many
QA-table rows it had against the question's hops, and whether its p(yes) tells right
answers from wrong ones.

    .venv/bin/python -m bench.suff_checks RUN [RUN ...]

RUN is a folder under bench/results/eval (or a path). Hops come from the question's
group where it names them ("3-hop", MuSiQue); elsewhere the rows are counted but not
compared. "AUC" is the area under the ROC curve of the deciding p(yes) against the
final answer's exact match, over the questions answered from the QA table: 0.5 means
the check's confidence says nothing about whether the answer is right.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from app.dm.eval import auc
from app.eval.run import load_run
from bench.common import find_run


def hops(record: dict[str, Any]) -> int | None:
    match = re.match(r"(\d+)-hop", record.get("group") or "")
    return int(match.group(1)) if match else None


def deciding_check(record: dict[str, Any]) -> tuple[int, float] | None:
    """(rows in the QA table, p(yes)) of the sufficiency decision that ended the loop,
    or None when the question did not end from the QA table."""
    rows, last = 0, None
    for step in record["trace"]:
        if step["node"] == "update_qa_table" and "qa_table" in step:
            rows += len(step["qa_table"])
        for decision in step.get("decisions") or []:
            if decision["kind"] == "suff" and decision["outcome"]:
                last = (rows, decision["p_yes"])
    return last


def summary(records: list[dict[str, Any]]) -> list[str]:
    ended = [(r, check) for r in records if (check := deciding_check(r)) is not None]
    lines = [f"{len(ended)} of {len(records)} questions answered after a sufficient check"]
    groups: dict[str, list[tuple[dict[str, Any], tuple[int, float]]]] = {}
    for r, check in ended:
        n = hops(r)
        key = "hops unknown" if n is None else ("rows < hops" if check[0] < n else "rows >= hops")
        groups.setdefault(key, []).append((r, check))
    for key, items in sorted(groups.items()):
        em = sum(r["em"] for r, _ in items) / len(items)
        p = sum(c[1] for _, c in items) / len(items)
        lines.append(f"  {key}: {len(items)} questions, EM {em:.3f}, mean p(yes) {p:.3f}")
    separation = auc([c[1] for _, c in ended], [int(r["em"] > 0) for r, _ in ended])
    lines.append(
        "  AUC of p(yes) for a right answer: "
        + ("-" if separation is None else f"{separation:.3f}")
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    for name in args.runs:
        folder = find_run(name)
        print(folder.name)
        for line in summary(load_run(folder)[1]):
            print(f"  {line}")


if __name__ == "__main__":
    main()
