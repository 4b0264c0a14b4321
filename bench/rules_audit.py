"""The rules audit of issue 52: which of DeFT's own rule families earn their place on the
validation slice.

    python -m bench.rules_audit [--benchmarks hotpotqa ...]

It needs the slice's `deft` and `deft-lean` runs (`bench.run_systems --systems deft
deft-lean --slice validation`). On the questions the two answer differently (EM), it
runs the default again, traced and from a cold QA cache, reads from each trace which
families fired, and then runs the default less one family (`HOPRAG_RULES_OFF=FAMILY`) on
the questions where that family fired, each from a cold cache too. A family that did not
fire on a question cannot change its answer, so this measures what the family does on the
slice at a fraction of a whole run per family. The verdicts (EM and LLM calls with and
without each family, McNemar's exact test) go to bench/results/rules_audit.json, which
docs/BENCHMARKS.md shows. Resumable: finished runs are kept and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.eval.metrics import mcnemar_exact
from app.eval.run import RUN, TRACES, load_run, read_traces
from app.settings import RULE_FAMILIES
from bench.common import RESULTS, require_data, run_name, save
from bench.run_systems import HOPRAG, eval_command, prepare_index
from tools.question_rules import hint

Trace = list[dict[str, Any]]
EVAL = RESULTS / "eval"
DEFAULT_RUN = "audit-default"  # the default, rerun traced on the questions that differ


def events(trace: Trace, node: str) -> list[dict[str, Any]]:
    return [e for e in trace if e.get("node") == node]


def decisions(trace: Trace, kind: str) -> list[dict[str, Any]]:
    return [d for e in trace for d in e.get("decisions") or [] if d["kind"] == kind]


def note_texts(trace: Trace, kind: str) -> list[str]:
    return [n["text"] for e in trace for n in e.get("notes") or [] if n["kind"] == kind]


def refused_by_own_rule(trace: Trace) -> bool:
    """A sub-question refused for rewording the question or naming nothing (the reasons
    `rejection` gives only with its own rules on), or the question asked as it is."""
    own = {hint("repeats_question"), hint("names_nothing")}
    steps = events(trace, "write_sub_question")
    return any(r["reason"] in own for e in steps for r in e.get("rejected") or []) or any(
        e.get("written_by") == "the question itself" for e in steps
    )


def echo_dropped(trace: Trace) -> bool:
    """A step answered, yet the table took no row: the answer repeated a name."""
    steps = zip(
        events(trace, "answer_sub_question"), events(trace, "update_qa_table"), strict=False
    )
    unknown = ("", "unknown")
    return any(
        a.get("sub_answer", "").strip(". ").lower() not in unknown and u.get("unanswerable")
        for a, u in steps
    )


# What in a trace shows each family at work; evidence selection reads every step.
FIRED: dict[str, Callable[[Trace], bool]] = {
    "sub_question_refusals": refused_by_own_rule,
    "plan_first": lambda t: any(
        e.get("written_by") == "decomposition" for e in events(t, "write_sub_question")
    ),
    "relation_chains": lambda t: any(
        e.get("written_by") == "relation chain" for e in events(t, "write_sub_question")
    ),
    "direct_answer_extras": lambda t: (
        bool(events(t, "answer_directly"))
        or any(d["backend"] == "rule" for d in decisions(t, "direct"))
    ),
    "evidence_selection": lambda t: True,
    "answer_echoes": echo_dropped,
    "sufficiency_rules": lambda t: any(d["backend"] == "rule" for d in decisions(t, "suff")),
    "dead_end_endings": lambda t: any(
        "found no answer" in text for text in note_texts(t, "fallback_reason")
    ),
    "comparison_rules": lambda t: (
        any(e.get("comparison") for e in t)
        or any(d["backend"] == "rule" for d in decisions(t, "suff"))
    ),
    "fallback_extras": lambda t: bool(events(t, "fallback_answer")),
}


def scores(folder: Path) -> dict[str, dict[str, Any]]:
    """A run's scores by question id (none before it starts); a line cut short by a kill
    is dropped, as `hoprag eval` drops it."""
    return {r["id"]: r for r in load_run(folder)[1]} if (folder / RUN).is_file() else {}


def run_on(data: Path, bench: str, name: str, ids: Sequence[str], env: dict[str, str]) -> Path:
    """`deft` on these questions only, from a cold QA cache (resumed if started, or if a
    retraced default fired the family on more questions)."""
    out = EVAL / run_name(bench, name, "validation")
    if len(scores(out)) >= len(ids):
        return out
    ids_file = RESULTS / "rules_audit_ids" / f"{bench}-{name}.txt"
    ids_file.parent.mkdir(parents=True, exist_ok=True)
    ids_file.write_text("\n".join(ids) + "\n")
    # cleared on a resume too: the QA cache is shared by every configuration, and what
    # ran since (the traced default, another family) would otherwise answer for this one
    subprocess.run([HOPRAG, "cache", "clear", "--index", bench, "--yes"], check=True)
    print(f"== {bench} / {name}: {len(ids)} questions -> {out}", flush=True)
    proc = subprocess.run(
        eval_command(data, bench, "deft", out, "--ids", str(ids_file)),
        env={**os.environ, **env},
    )
    if proc.returncode != 0:
        raise SystemExit(proc.returncode)
    return out


def fired_on(data: Path, bench: str, rerun: Path, differ: Sequence[str]) -> dict[str, list[str]]:
    """The questions each family fired on in the traced default, kept in git beside the
    ids files: traces stay on the machine that made them, and a fresh clone that resumes
    the audit would otherwise have to trace the default again. Where neither is here, it
    does that (the rerun's scores are rewritten with the same EM, `rerun_agrees`)."""
    path = RESULTS / "rules_audit_ids" / f"{bench}-fired.json"
    if path.is_file():
        return json.loads(path.read_text())
    if not (rerun / TRACES).is_file():
        shutil.rmtree(rerun)
        run_on(data, bench, DEFAULT_RUN, differ, {})
    traces = read_traces(rerun)
    where = {family: [i for i in differ if fired(traces[i])] for family, fired in FIRED.items()}
    path.write_text(json.dumps(where, indent=1) + "\n")
    return where


def verdict(default: dict[str, dict], off: dict[str, dict], ids: Sequence[str]) -> dict[str, Any]:
    """EM and calls on `ids` with the family (the default) and without it."""
    wins = sum(default[i]["em"] > off[i]["em"] for i in ids)
    losses = sum(default[i]["em"] < off[i]["em"] for i in ids)

    def mean(run: dict[str, dict], key: str) -> float:
        return round(sum(run[i][key] for i in ids) / len(ids), 3) if ids else 0.0

    return {
        "questions": len(ids),
        "em_with": mean(default, "em"),
        "em_without": mean(off, "em"),
        "right_only_with": wins,
        "right_only_without": losses,
        "p": round(mcnemar_exact(wins, losses), 3),
        "calls_with": mean(default, "llm_calls"),
        "calls_without": mean(off, "llm_calls"),
    }


def audit(data: Path, bench: str, only: Sequence[str]) -> dict[str, Any]:
    default = scores(EVAL / run_name(bench, "deft", "validation"))
    lean = scores(EVAL / run_name(bench, "deft-lean", "validation"))
    if not default or len(lean) < len(default):
        raise SystemExit(f"{bench}: run deft and deft-lean on the validation slice first")
    differ = [i for i in default if default[i]["em"] != lean[i]["em"]]
    prepare_index(data, bench)
    rerun = run_on(data, bench, DEFAULT_RUN, differ, {})
    where = fired_on(data, bench, rerun, differ)
    again = scores(rerun)
    families = {}
    for family in FIRED:
        if family not in only:
            continue  # not measured in this call: no verdict
        ids = where[family]
        if ids:
            off = scores(
                run_on(data, bench, f"audit-no-{family}", ids, {"HOPRAG_RULES_OFF": family})
            )
            families[family] = verdict(again, off, ids)
        else:
            families[family] = verdict(again, again, [])
    ids = list(default)
    return {
        "slice": {"questions": len(ids), **verdict(default, lean, ids)},
        "differ": len(differ),
        "rerun_agrees": sum(again[i]["em"] == default[i]["em"] for i in differ),
        "families": families,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--benchmarks", nargs="+", default=["hotpotqa", "2wikimultihopqa", "musique"]
    )
    parser.add_argument(
        "--families", nargs="+", default=list(FIRED), choices=list(FIRED), help="those audited"
    )
    args = parser.parse_args()
    assert set(FIRED) == set(RULE_FAMILIES), "every family needs its trace test"
    data = require_data(args.benchmarks)
    path = RESULTS / "rules_audit.json"
    previous = json.loads(path.read_text()).get("benchmarks", {}) if path.is_file() else {}
    results = {
        **previous,
        **{bench: audit(data, bench, args.families) for bench in args.benchmarks},
    }
    print(json.dumps(results, indent=2))
    save("rules_audit", {"command": "python -m bench.rules_audit", "benchmarks": results})


if __name__ == "__main__":
    main()
