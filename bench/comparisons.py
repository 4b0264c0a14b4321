"""Comparisons in parallel (issue 53, item 2): `deft` with a comparison's steps fanned out,
one per option at once, against the same steps one at a time, in the same session.

    HOPRAG_DATA=... .venv/bin/python -m bench.comparisons [--benchmarks 2wikimultihopqa ...]
        [--modes fanout serial] [--limit N] [--tag T] [--score-only]

The questions: every comparison and bridge_comparison question of 2WikiMultihopQA's dev
split (its `type`), and HotpotQA's dev questions that compare named options. HotpotQA's
copy here has no `type` (data/hotpotqa/SOURCE.md): its comparisons are those the option
parser finds (`tools.comparison.compared_options`: "Which is older, A or B?", "Are A and
B both ...?"), the same rule that sends a question to the fan-out. Their ids go to a file
under HOPRAG_HOME/bench/comparisons, and each mode runs through `hoprag eval run --ids`
into bench/results/eval/BENCHMARK-comparisons-MODE[-TAG] (resumable: rerun the same
command after a stop; traces gzipped and ignored by git), with
HOPRAG_FAN_OUT_COMPARISONS on (`fanout`) or off (`serial`, the steps as before issue 53).
Each mode starts from a cold QA cache, so that neither reuses the other's answers.

Per benchmark and mode: EM, LLM calls, median and p90 seconds per question, by question
type too where the data give one; and McNemar's exact p on EM between the modes, over
the questions both answered. Rows go to bench/results/comparisons.json (keyed by tag),
which `python -m bench.render` shows in docs/BENCHMARKS.md against the target: median
seconds down by at least 30%, EM not lower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

from app.eval.metrics import mcnemar_exact
from app.eval.run import load_run
from app.settings import Settings
from bench.common import RESULTS, load_results, questions, require_data, save
from bench.run_systems import HOPRAG, prepare_index
from tools.comparison import compared_options

BENCHMARKS = ("2wikimultihopqa", "hotpotqa")
MODES = {"fanout": "on", "serial": "off"}  # mode -> HOPRAG_FAN_OUT_COMPARISONS
TYPED = ("comparison", "bridge_comparison")  # 2WikiMultihopQA's comparison types
SPEEDUP_TARGET = 0.30  # median seconds down by at least this share (issue 53)


def comparison_ids(bench: str) -> list[str]:
    """The dev questions that compare: by the data's `type` where it has one, else by the
    option parser."""
    dev = questions(bench)
    if any(q.get("type") for q in dev):
        return [q["id"] for q in dev if q.get("type") in TYPED]
    return [q["id"] for q in dev if compared_options(q["question"])]


def run_mode(bench: str, mode: str, ids: Path, out: Path, data: Path) -> None:
    """`hoprag eval` of `deft` in one mode; a fresh run from a cold QA cache."""
    if not (out / "results.jsonl").is_file():
        subprocess.run([HOPRAG, "cache", "clear", "--index", bench, "--yes"], check=True)
    command = [HOPRAG, "eval", "run", "--data", str(data / bench / "questions.json")]
    command += ["--index", bench, "--split", "dev", "--ids", str(ids), "--system", "deft"]
    env = {**os.environ, "HOPRAG_FAN_OUT_COMPARISONS": MODES[mode]}
    subprocess.run([*command, "--out", str(out), "--quiet"], check=True, env=env)


def p90(values: list[float]) -> float:
    return (
        statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]
    )


def measures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """EM, mean LLM calls, median and p90 seconds per question."""
    seconds = [r["seconds"] for r in records]
    return {
        "questions": len(records),
        "em": round(statistics.fmean(r["em"] for r in records), 3),
        "llm_calls": round(statistics.fmean(r["llm_calls"] for r in records), 2),
        "median_s": round(statistics.median(seconds), 2),
        "p90_s": round(p90(seconds), 2),
    }


def compare(bench: str, runs: dict[str, Path], tag: str) -> dict[str, Any]:
    """One benchmark's row: each mode's measures over the questions both modes answered,
    by question type too, McNemar's p on EM, and the median's change."""
    records = {mode: {r["id"]: r for r in load_run(folder)[1]} for mode, folder in runs.items()}
    shared = [i for i in records["serial"] if i in records["fanout"]]
    row: dict[str, Any] = {"benchmark": bench, "tag": tag, "shared": len(shared)}
    if not shared:
        return row
    groups = sorted(
        {records["serial"][i]["group"] for i in shared if records["serial"][i]["group"]}
    )
    for mode, by_id in records.items():
        row[mode] = measures([by_id[i] for i in shared])
        row[mode]["groups"] = {
            g: measures([by_id[i] for i in shared if by_id[i]["group"] == g]) for g in groups
        }
    serial_only = sum(records["serial"][i]["em"] > records["fanout"][i]["em"] for i in shared)
    fanout_only = sum(records["fanout"][i]["em"] > records["serial"][i]["em"] for i in shared)
    row["em_serial_only"], row["em_fanout_only"] = serial_only, fanout_only
    row["mcnemar_p"] = round(mcnemar_exact(serial_only, fanout_only), 4)
    row["median_change"] = round(row["fanout"]["median_s"] / row["serial"]["median_s"] - 1, 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--limit", type=int, help="only the first N comparisons of each")
    parser.add_argument("--tag", default="", help="suffix for the run folders and the rows")
    parser.add_argument(
        "--score-only", action="store_true", help="score the runs already made, running nothing"
    )
    args = parser.parse_args()
    data = require_data(args.benchmarks)
    folder = Settings().home / "bench" / "comparisons"
    folder.mkdir(parents=True, exist_ok=True)
    saved = load_results("comparisons") or {}
    rows = {(r["benchmark"], r["tag"]): r for r in saved.get("rows", [])}
    for bench in args.benchmarks:
        ids = comparison_ids(bench)[: args.limit]
        ids_file = folder / f"{bench}{'-' + args.tag if args.tag else ''}.ids"
        ids_file.write_text("\n".join(ids) + "\n")
        runs = {
            mode: RESULTS / "eval" / "-".join(filter(None, (bench, "comparisons", mode, args.tag)))
            for mode in MODES
        }
        if not args.score_only:
            prepare_index(data, bench)
            for mode in args.modes:
                print(f"== {bench} / {mode}: {len(ids)} questions -> {runs[mode]}", flush=True)
                run_mode(bench, mode, ids_file, runs[mode], data)
        if not all((run / "results.jsonl").is_file() for run in runs.values()):
            continue
        rows[(bench, args.tag)] = compare(bench, runs, args.tag)
        print(rows[(bench, args.tag)], flush=True)
        command = "python -m bench.comparisons" + (f" --tag {args.tag}" if args.tag else "")
        save("comparisons", {"command": command, "rows": list(rows.values())})


if __name__ == "__main__":
    main()
