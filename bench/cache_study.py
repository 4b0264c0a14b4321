"""The QA cache on and off over the first 100 MuSiQue dev questions (issue 4): hit rate
and the LLM calls it saves, read from the two runs' traces.

    .venv/bin/python -m bench.run_systems --benchmarks musique --systems deft deft-nocache \\
        --limit 100 --tag 100q
    .venv/bin/python -m bench.cache_study

The cached run starts cold (run_systems clears the cache before a fresh deft run), so
every hit comes from an earlier question of the same run.
"""

from __future__ import annotations

import json
from statistics import mean, median
from typing import Any

from app.eval.run import load_run
from bench.common import RESULTS
from tools.comparison import RULE

TAG = "100q"
RUNS = {"on": f"musique-deft-{TAG}", "off": f"musique-deft-nocache-{TAG}"}


def lookups(records: list[dict[str, Any]]) -> dict[str, int]:
    """Cache lookups in the traces, by outcome (exact, similar or miss), and the same-question
    checks behind them: refused by the wording rule (no model call), or put to DM_same."""
    counts = {"exact": 0, "similar": 0, "miss": 0, "rule_no": 0, "dm_yes": 0, "dm_no": 0}
    for record in records:
        for step in record["trace"]:
            if step["node"] != "lookup_qa_cache":
                continue
            hit = step.get("cache_hit")
            counts[hit["how"] if hit else "miss"] += 1
            for decision in step.get("decisions") or []:
                if decision["backend"] == RULE:
                    counts["rule_no"] += 1
                else:
                    counts["dm_yes" if decision["outcome"] else "dm_no"] += 1
    return counts


def run_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n": len(records),
        "em": mean(r["em"] for r in records),
        "judged": mean(r["judged"] for r in records),
        "llm_calls": mean(r["llm_calls"] for r in records),
        "total_llm_calls": sum(r["llm_calls"] for r in records),
        "seconds_median": median(r["seconds"] for r in records),
        "lookups": lookups(records),
    }


def study() -> dict[str, dict[str, Any]] | None:
    """Both runs' summaries over the questions both have answered (a run may be partial),
    when both folders exist, else None."""
    folders = {k: RESULTS / "eval" / name for k, name in RUNS.items()}
    if not all((f / "results.jsonl").is_file() for f in folders.values()):
        return None
    runs = {k: load_run(f)[1] for k, f in folders.items()}
    shared = set.intersection(*({r["id"] for r in records} for records in runs.values()))
    if not shared:
        return None
    return {k: run_summary([r for r in v if r["id"] in shared]) for k, v in runs.items()}


if __name__ == "__main__":
    print(json.dumps(study(), indent=2))
