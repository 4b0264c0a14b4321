"""Where a DeFT run lost the gold answer on the questions it got wrong, read from its
traces (traces.jsonl.gz beside the run: `hoprag eval` writes them, git does not keep them).

    .venv/bin/python -m bench.deft_errors RUN [RUN ...]

Each question with EM 0 gets the first stage at which the gold answer (or an alias,
SQuAD-normalised, as whole words) went missing; the stages are checked from the last
(the prediction) back to the first (the passages read):

- `never_read`: nothing fed to any reader holds it (of a passage read in part, the
  sentences read, which a run records as `excerpts`; runs before that record only
  whole passages): retrieval and the sub-questions never reached the line that states it.
- `read_not_taken`: a passage fed holds it, but no QA-table row's answer does (nor the
  prediction): a reader saw it and answered something else, or no step asked for it.
- `in_table_lost`: a QA-table row holds it and the final answer does not.
- `in_answer`: the prediction holds it but is not an exact match (wording, extra words).
- `yes_no`: the gold answer is yes or no, which no passage states.

For `never_read` questions it says where the chain broke (`chain_breaks`), first that
applies: `retrieved_not_read` (a gold passage it never read was retrieved for the question
or a sub-question, and the relevance filter dropped it or none of its sentences was
chosen), `named_not_retrieved` (a sub-question or an answer names a missing gold
passage's title, and no search found it),
`first_hop_missed` (no gold passage read at all, none named) and `bridge_not_found`
(the chain read a gold passage, then never named the next one: a wrong bridge entity or
a sub-question that drifted).

For wrong answers that came from the QA table it also counts `stopped_short`: fewer rows
than the question has gold passages, so the sufficiency check stopped before the chain
was complete (a row can state two hops at once, so this is an upper bound). Matching can
find a short alias inside a passage by chance, so `never_read` is a lower bound. Baseline
runs (vanilla, oracle) read once, so only the passage stages apply to them. Results go
to bench/results/deft_errors.json.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from app.index.corpus import load_corpus
from bench.common import load_traced, summarise_runs, trace_states
from bench.deft_endings import final_node
from tools.answer_rules import normalize_answer, says

STAGES = ("never_read", "read_not_taken", "in_table_lost", "in_answer", "yes_no")
BREAKS = ("retrieved_not_read", "named_not_retrieved", "first_hop_missed", "bridge_not_found")
RETRIEVALS = ("question_passages", "retrieved")


def holds(text: str, golds: list[str]) -> bool:
    """Some gold answer is in `text`, both SQuAD-normalised, as whole words."""
    return any(says(text, gold) for gold in golds)


def qa_table(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The QA table the question ended with."""
    *_, (last, state) = trace_states(record)
    return state["qa_table"] + (last.get("qa_table") or [])


def read_texts(record: dict[str, Any], corpus: dict[int, Any]) -> list[str]:
    """What the readers read of each passage fed (title and text): the sentences of a
    passage read in part (`excerpts`), else the whole passage."""
    read = record.get("excerpts") or {}
    return [
        f"{corpus[pid].title} {read.get(str(pid), corpus[pid].text)}"
        for pid in record["passages_fed"]
    ]


def lost_at(record: dict[str, Any], table: list[dict[str, Any]], corpus: dict[int, Any]) -> str:
    """The first stage at which a wrong answer's gold went missing (see the module doc);
    `table` is the QA table the question ended with, `corpus` the passages by id."""
    golds = record["gold"]
    if {normalize_answer(g) for g in golds} <= {"yes", "no"}:
        return "yes_no"
    if holds(record["prediction"], golds):
        return "in_answer"
    if any(holds(row["answer"], golds) for row in table):
        return "in_table_lost"
    if any(holds(text, golds) for text in read_texts(record, corpus)):
        return "read_not_taken"
    return "never_read"


def chain_break(record: dict[str, Any], corpus: dict[int, Any]) -> str:
    """Where a question that never read its answer broke its chain (see the module doc)."""
    missing = [pid for pid in record["gold_ids"] if pid not in set(record["passages_fed"])]
    retrieved = {
        p["id"] for step in record["trace"] for key in RETRIEVALS for p in step.get(key) or []
    }
    if retrieved & set(missing):
        return "retrieved_not_read"
    asked = " ".join(
        f"{step.get('sub_question') or ''} {step.get('sub_answer') or ''}"
        for step in record["trace"]
    )
    if any(holds(asked, [corpus[pid].title]) for pid in missing):
        return "named_not_retrieved"
    if len(missing) == len(record["gold_ids"]):
        return "first_hop_missed"
    return "bridge_not_found"


def summarise(folder_name: str) -> dict[str, Any]:
    meta, records = load_traced(folder_name)
    corpus = {p.id: p for p in load_corpus(Path(meta["data"]).with_name("corpus.json"))}
    wrong = [r for r in records if not r["em"]]
    stages: dict[str, Counter[str]] = {}
    breaks: Counter[str] = Counter()
    stopped_short = 0
    for record in wrong:
        end, table = final_node(record), qa_table(record)
        stage = lost_at(record, table, corpus)
        stages.setdefault(end, Counter())[stage] += 1
        if stage == "never_read" and any("question_passages" in s for s in record["trace"]):
            breaks[chain_break(record, corpus)] += 1
        if end == "answer_from_qa_table":
            stopped_short += len(table) < len(record["gold_ids"])
    total: Counter[str] = sum(stages.values(), Counter())
    return {
        "run": folder_name,
        "n": len(records),
        "wrong": len(wrong),
        "lost_at": {s: total[s] for s in STAGES},
        "by_ending": {e: {s: c[s] for s in STAGES} for e, c in sorted(stages.items())},
        "chain_breaks": {b: breaks[b] for b in BREAKS},
        "table_endings_stopped_short": stopped_short,
    }


def main() -> None:
    summarise_runs("deft_errors", summarise, __doc__)


if __name__ == "__main__":
    main()
