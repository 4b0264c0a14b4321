"""DM_suff of two trained DMs side by side: on the `dev` examples by how their negatives
were made, and on the sufficiency checks of committed DeFT runs, replayed.

    .venv/bin/python -m bench.suff_models --before DIR --after DIR [--data dm_data]
        [--runs musique-deft-direct ...]

DIR is a trained DM folder (`dm.json` and the adapter, as in app/data/dm); --data holds
examples built by `hoprag dm data --suff-near-misses`. The dev rows give the AUC of the
whole gold chain (yes) against each kind of negative alone: a strict prefix of the
chain, a prefix whose last step asks another relation of the right subject
(`wrong-step`), and a prefix with its last step asked again (`repeated-step`).
The replay rebuilds each run's QA table at every sufficiency check from its trace and
asks both DMs again: of the questions the check ended (answered from the QA table), how
many each DM still ends at that check, split by whether the run's answer was right; and
how many checks the run had answered no that the DM would answer yes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.dm.data import read_jsonl
from app.dm.eval import auc, ece
from app.eval.run import load_run
from app.settings import Settings
from bench.common import find_run, save
from prompts import format_qa_table
from tools.decision import TrainedDM

NEGATIVE_KINDS = ("chain-prefix", "wrong-step", "repeated-step")


def dev_rows(dm: TrainedDM, data: Path) -> dict[str, dict[str, Any]]:
    rows = [e for e in read_jsonl(data / "dev.jsonl") if e.kind == "suff"]
    p = dm.p("suff", [(e.text_a, e.text_b) for e in rows])
    y = [e.label for e in rows]
    out = {"all": {"n": len(y), "auc": auc(p, y), "ece": ece(p, y)}}
    for how in NEGATIVE_KINDS:
        picked = [i for i, e in enumerate(rows) if e.label or e.how == how]
        if any(not rows[i].label for i in picked):
            labels = [y[i] for i in picked]
            out[how] = {
                "negatives": len(picked) - sum(labels),
                "auc": auc([p[i] for i in picked], labels),
            }
    return out


def checks(record: dict[str, Any]) -> list[tuple[list[dict[str, Any]], float, bool]]:
    """(QA table, p(yes), outcome) of every model-decided sufficiency check of a run."""
    table: list[dict[str, Any]] = []
    found = []
    for step in record["trace"]:
        if step["node"] == "update_qa_table":
            table = [*table, *step.get("qa_table", [])]
        if step["node"] == "check_sufficiency":
            for d in step.get("decisions") or []:
                if d["kind"] == "suff" and d["backend"] != "rule" and table:
                    found.append((table, d["p_yes"], d["outcome"]))
    return found


def replay(dms: dict[str, TrainedDM], run: str) -> dict[str, Any]:
    _, records = load_run(find_run(run))
    ended = {"right": {"n": 0}, "wrong": {"n": 0}}
    early = {name: 0 for name in dms}
    said_no = 0
    for record in records:
        found = checks(record)
        for table, _, outcome in found:
            tables = format_qa_table(table)
            for name, dm in dms.items():
                yes = dm.p("suff", [(record["question"], tables)])[0] >= 0.5
                if outcome:
                    group = ended["right" if record["em"] > 0 else "wrong"]
                    group[name] = group.get(name, 0) + int(yes)
                else:
                    early[name] += int(yes)
            if outcome:
                ended["right" if record["em"] > 0 else "wrong"]["n"] += 1
            else:
                said_no += 1
    return {
        "questions": len(records),
        "ended_by_check": ended,
        "checks_said_no": said_no,
        "of_those_now_yes": early,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    parser.add_argument("--runs", nargs="*", default=["musique-deft-direct"])
    args = parser.parse_args()
    settings = Settings()
    dms = {}
    for name, folder in (("before", args.before), ("after", args.after)):
        dm = TrainedDM.load(folder, settings.runtime_dir)
        if dm is None:
            parser.error(f"no trained DM in {folder}")
        dms[name] = dm
    result = {
        "dev": {name: dev_rows(dm, args.data) for name, dm in dms.items()},
        "runs": {run: replay(dms, run) for run in args.runs},
        "before": str(args.before),
        "after": str(args.after),
    }
    command = "python -m bench.suff_models " + " ".join(
        ["--before", str(args.before), "--after", str(args.after), "--runs", *args.runs]
    )
    print(save("suff_models", {"command": command, **result}))


if __name__ == "__main__":
    main()
