"""The least the DeFT graph (SPEC section 1) can spend on a run's questions, against what
the run spent: how far issue 4's cost targets are from what the method allows.

    .venv/bin/python -m bench.cost_floor RUN [RUN ...]

The floor assumes a perfect writer (one call per sub-question, never refused), a perfect
decision model and a QA table whose rows are all right, and counts what SPEC's rules
then still spend on each question:

* `loop`: the sub-question loop alone. A question of h hops takes h steps of two calls
  (write, answer) and one final call, none where the QA table's rules decide the
  comparison (`tools.comparison.decided_by_rule`, as the graph routes them). Each step
  reads its gold passage and, since exactly one passes the relevance filter, the one
  ranked next (SPEC step 3.5): counted as a passage of the corpus's median length.
* `direct`: as `loop`, except that a question of at most 2 hops whose top-w passages
  (the run's own retrieval) hold every gold passage is answered in one call from its
  gold passages (SPEC step 2), unless the rules decide it.

Hops: MuSiQue's `hops`, 2WikiMultihopQA's evidence triples, 2 for HotpotQA. With each
floor come the questions the direct path would take and, on them, the EM of this run
and of the `oracle` reader (the same model handed the gold passages in one call: the
best a direct answer can do), so that the cost of going direct shows in answers too,
and how the run's own direct-answer check ended on them.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from statistics import mean, median
from typing import Any

from app.eval.run import load_run
from app.index.corpus import load_corpus
from bench.common import RESULTS, find_run, questions, summarise_runs
from bench.deft_costs import holds_all_gold
from tools.comparison import decided_by_rule

DIRECT_MAX_HOPS = 2  # SPEC step 2: the depth estimate allows a direct answer up to 2 hops


def hops(item: dict[str, Any], benchmark: str) -> int:
    """Sub-questions a perfect writer asks: the benchmark's own count of hops."""
    if benchmark == "musique":
        return int(item["hops"])
    if benchmark == "2wikimultihopqa":
        evidences = item["evidences"]
        return len(ast.literal_eval(evidences) if isinstance(evidences, str) else evidences)
    return 2


def loop_cost(question: str, n_hops: int, gold_words: int, other_words: float) -> tuple[int, float]:
    """Calls and words of the sub-question loop at its best."""
    calls = 2 * n_hops + (0 if decided_by_rule(question) else 1)
    return calls, gold_words + n_hops * other_words


def direct_check(record: dict[str, Any]) -> str:
    """How the run's direct-answer check ended: `direct` (answered in one call), or the
    decision that sent the question to the loop (`depth`, `direct` below threshold)."""
    for step in record["trace"]:
        if step["node"] == "check_direct_answer":
            if step.get("direct"):
                return "answered directly"
            refused = [d["kind"] for d in step.get("decisions") or [] if not d["outcome"]]
            return f"stopped by {refused[0]}" if refused else "not checked"
    return "not checked"


def summarise(folder_name: str) -> dict[str, Any]:
    meta, records = load_run(find_run(folder_name))
    benchmark = meta["index"]
    corpus = load_corpus(Path(meta["data"]).with_name("corpus.json"))
    length = {p.id: len(p.text.split()) for p in corpus}
    other = median(length.values())
    items = {q["id"]: q for q in questions(benchmark)}
    oracle_run = RESULTS / "eval" / f"{benchmark}-oracle"
    oracle = {r["id"]: r["em"] for r in load_run(oracle_run)[1]} if oracle_run.exists() else {}
    loop: list[tuple[int, float]] = []
    direct: list[tuple[int, float]] = []
    taken: list[dict[str, Any]] = []
    for record in records:
        question = record["question"]
        n_hops = hops(items[record["id"]], benchmark)
        gold_words = sum(length[pid] for pid in record["gold_ids"])
        at_best = loop_cost(question, n_hops, gold_words, other)
        loop.append(at_best)
        goes_direct = (
            n_hops <= DIRECT_MAX_HOPS and holds_all_gold(record) and not decided_by_rule(question)
        )
        direct.append((1, gold_words) if goes_direct else at_best)
        if goes_direct:
            taken.append(record)

    def averaged(costs: list[tuple[int, float]]) -> dict[str, float]:
        return {
            "llm_calls": round(mean(c for c, _ in costs), 2),
            "words_fed": round(mean(w for _, w in costs), 1),
        }

    ids = [r["id"] for r in taken]
    return {
        "run": folder_name,
        "n": len(records),
        "run_cost": {
            "llm_calls": round(mean(r["llm_calls"] for r in records), 2),
            "words_fed": round(mean(r["words_fed"] for r in records), 1),
        },
        "loop_floor": averaged(loop),
        "direct_floor": averaged(direct),
        "direct_taken": {
            "n": len(taken),
            "run_em": round(mean(r["em"] for r in taken), 3) if taken else None,
            "oracle_em": round(mean(oracle[i] for i in ids), 3)
            if taken and all(i in oracle for i in ids)
            else None,
            "run_check": dict(Counter(direct_check(r) for r in taken)),
        },
    }


def main() -> None:
    summarise_runs("cost_floor", summarise, __doc__)


if __name__ == "__main__":
    main()
