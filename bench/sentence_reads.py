"""Which sentence scorer lets a read keep the answer: replays every read of `deft` runs
(each step's kept passages for its sub-question, each final read's passages for the
question) through `tools/evidence.py` with the sentences scored by the passage adapter
(`rel`) and by the sentence adapter (`sent`), and counts how often the sentences chosen
still state a gold-chain answer that a gold passage read states: the final answer or
an alias, a MuSiQue decomposition step's answer, a 2WikiMultihopQA evidence's object.

    HOPRAG_DATA=... .venv/bin/python -m bench.sentence_reads RUN [RUN ...]

RUN names a run folder under bench/results/eval or archive (musique-deft); the results
go to bench/results/sentence_reads.json. Needs the trained DM with its `sent` adapter.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from app.eval.metrics import normalize_answer
from app.eval.run import load_run
from app.index.corpus import passage_text
from app.resources import Resources
from app.settings import Settings
from bench.common import find_run, questions, save
from tools.decision import DecisionModel
from tools.evidence import select_sentences

FINAL_NODES = ("fallback_answer", "answer_directly", "answer_from_qa_table")


class _Scorer:
    """The DM with its sentence scores from one adapter."""

    def __init__(self, dm: DecisionModel, adapter: str) -> None:
        if dm.trained is None or "sent" not in dm.trained.encoders:
            raise SystemExit("no trained DM with a sent adapter: hoprag dm train --adapter sent")
        self.dm, self.trained, self.adapter = dm, dm.trained, adapter

    def p_sentences(self, question: str, sentences: list[dict[str, Any]]) -> list[float]:
        if self.adapter == "rel":
            return self.dm.p_rel(question, sentences, stored=False)
        texts = [passage_text(s["title"], s["text"]) for s in sentences]
        return self.trained.p("sent", [(question, t) for t in texts])


def states(text: str, answers: set[str]) -> bool:
    padded = f" {normalize_answer(text)} "
    return any(f" {a} " in padded for a in answers)


def chain_answers(q: dict[str, Any]) -> set[str]:
    """Every answer along the gold chain, SQuAD-normalised."""
    answers = [q["answer"], *(q.get("answer_aliases") or [])]
    answers += [s["answer"] for s in q.get("question_decomposition") or []]
    answers += [obj for _, _, obj in q.get("evidences") or []]
    return {a for a in map(normalize_answer, answers) if a}


def reads(record: dict[str, Any]):
    """(kind, query, passages) of every read of a traced question."""
    sub_question = ""
    for step in record["trace"]:
        if step["node"] == "write_sub_question":
            sub_question = step.get("sub_question") or ""
        elif step["node"] == "filter_relevant" and step.get("kept"):
            yield "step", sub_question, step["kept"]
        elif step["node"] in FINAL_NODES and step.get("passage_ids"):
            yield "final", record["question"], step["passage_ids"]


def study(run: str, settings: Settings) -> dict[str, Any]:
    meta, records = load_run(find_run(run))
    gold = {q["id"]: q for q in questions(meta["index"])}
    resources = Resources.open(settings, meta["index"])
    scorers = {name: _Scorer(resources.dm, name) for name in ("rel", "sent")}
    kept: Counter[str] = Counter()
    words: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for record in records:
        answers = chain_answers(gold[record["id"]])
        for kind, query, passages in reads(record):
            if isinstance(passages[0], int):
                passages = [
                    {"id": p.id, "title": p.title, "text": p.text}
                    for p in resources.index.passages(passages)
                ]
            golds = [p for p in passages if p["id"] in record["gold_ids"]]
            if not any(states(p["text"], answers) for p in golds):
                continue
            totals[kind] += 1
            budget = settings.read_words if kind == "step" else settings.final_read_words
            for name, scorer in scorers.items():
                chosen = select_sentences(
                    scorer,  # type: ignore[arg-type]
                    resources.index,
                    query,
                    passages,
                    budget,
                    whole_question=kind == "final",
                )
                kept[f"{kind} {name}"] += any(
                    states(p["text"], answers) for p in chosen if p["id"] in record["gold_ids"]
                )
                words[f"{kind} {name}"] += sum(len(p["text"].split()) for p in chosen)
    resources.close()
    return {
        kind: {
            "reads": totals[kind],
            **{
                name: {
                    "answer_kept": round(kept[f"{kind} {name}"] / max(1, totals[kind]), 3),
                    "words": round(words[f"{kind} {name}"] / max(1, totals[kind]), 1),
                }
                for name in scorers
            },
        }
        for kind in ("step", "final")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    runs = parser.parse_args().runs
    settings = Settings()
    out = {run: study(run, settings) for run in runs}
    print(json.dumps(out, indent=1))
    save("sentence_reads", {"command": "python -m bench.sentence_reads " + " ".join(runs), **out})


if __name__ == "__main__":
    main()
