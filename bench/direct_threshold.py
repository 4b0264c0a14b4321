"""Where DM_direct's threshold could sit: the shipped graph's run mixed per question with
its all-direct twin, in which every question the QA table's rules do not decide is
answered directly (`bench.run_systems --systems deft-alldirect`).

    .venv/bin/python -m bench.direct_threshold BENCHMARK [BENCHMARK ...]

The direct-answer check (SPEC step 2) is the graph's first decision, so a question that
a gate sends direct has the all-direct run's answer and cost, and one it sends to the
loop the shipped run's (whose QA cache the questions before it had warmed). A gate at
threshold t takes the questions whose depth estimate reaches `tau_shallow` and whose
DM_direct reaches t, both read from the all-direct run's trace; t above `tau_direct` is
not shown, since the shipped run answered those questions directly too and their loop
is unknown. `gold in top w` takes exactly the questions whose top w passages hold every
gold passage (what DM_direct is trained to tell), `every question` all of them. At
`tau_direct` the gate must agree with the shipped run's own check: the questions where
it does not are counted (`disagree`).
"""

from __future__ import annotations

import argparse
from statistics import mean
from typing import Any

from app.eval.run import load_run
from app.settings import Settings
from bench.common import find_run, save
from bench.cost_floor import direct_check
from bench.deft_costs import holds_all_gold

THRESHOLDS = (0.3, 0.4, 0.5, 0.6)


def check_probabilities(record: dict[str, Any]) -> tuple[float, float] | None:
    """p(shallow) and p(direct) the direct-answer check computed; None where the QA
    table's rules decide the question (it never goes direct)."""
    for step in record["trace"]:
        if step["node"] == "check_direct_answer":
            found = {d["kind"]: d for d in step.get("decisions") or []}
            if "depth" not in found or "direct" not in found:
                return None
            return found["depth"]["p_yes"], found["direct"]["p_yes"]
    return None


def mixed(
    shipped: list[dict[str, Any]], direct: dict[str, dict[str, Any]], taken: set[str]
) -> dict[str, Any]:
    """The shipped run with the `taken` questions answered as the all-direct run did."""
    rows = [direct[r["id"]] if r["id"] in taken else r for r in shipped]
    return {
        "taken": len(taken),
        "em": round(mean(r["em"] for r in rows), 3),
        "judged": round(mean(r["judged"] for r in rows), 3),
        "llm_calls": round(mean(r["llm_calls"] for r in rows), 2),
        "words_fed": round(mean(r["words_fed"] for r in rows), 1),
        # on the questions taken: what going direct did to their answers
        "taken_em_direct": round(mean(direct[i]["em"] for i in taken), 3) if taken else None,
        "taken_em_shipped": (
            round(mean(r["em"] for r in shipped if r["id"] in taken), 3) if taken else None
        ),
    }


def summarise(benchmark: str, settings: Settings) -> dict[str, Any]:
    _, shipped = load_run(find_run(f"{benchmark}-deft"))
    _, everything = load_run(find_run(f"{benchmark}-deft-alldirect"))
    direct = {r["id"]: r for r in everything}
    shipped = [r for r in shipped if r["id"] in direct]
    checks = {r["id"]: check_probabilities(direct[r["id"]]) for r in shipped}

    def gate(threshold: float) -> set[str]:
        return {
            i
            for i, p in checks.items()
            if p is not None and p[0] >= settings.tau_shallow and p[1] >= threshold
        }

    shipped_direct = {r["id"] for r in shipped if direct_check(r) == "answered directly"}
    gates = {f"t = {t}": gate(t) for t in (*THRESHOLDS, settings.tau_direct)}
    gates["gold in top w"] = {
        r["id"] for r in shipped if checks[r["id"]] is not None and holds_all_gold(r)
    }
    gates["every question"] = {i for i, p in checks.items() if p is not None}
    return {
        "n": len(shipped),
        "tau_direct": settings.tau_direct,
        "disagree": len(gate(settings.tau_direct) ^ shipped_direct),
        "gates": {name: mixed(shipped, direct, taken) for name, taken in gates.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("benchmarks", nargs="+")
    args = parser.parse_args()
    settings = Settings()
    results = {b: summarise(b, settings) for b in args.benchmarks}
    for b, r in results.items():
        print(b, r["n"], "disagree", r["disagree"])
        for name, m in r["gates"].items():
            print(f"  {name}: {m}")
    save(
        "direct_threshold",
        {
            "command": "python -m bench.direct_threshold " + " ".join(args.benchmarks),
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
