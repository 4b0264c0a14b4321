"""Which passages and sentences a step should read: replays the relevance filter and the
evidence selection of every step of committed `deft` runs whose retrieval found a gold
passage, under two policies, and counts how often the step keeps a gold passage, reads a
sentence of one, and reads the question's gold answer (counted where a kept gold passage
holds it).

- `dm`: the keep rules choose by DM_rel alone, and the sentences go by DM_rel alone (the
  policy of runs before 8ad19aa).
- `fused`: both choose by DM_rel fused (RRF, `STEP_FUSION_K`) with the order the items
  came in (retrieval rank; for sentences, their passage's rank), as `nodes/relevance.py`
  and `tools/evidence.py` do now.

    HOPRAG_DATA=... .venv/bin/python -m bench.step_reads RUN [RUN ...]

RUN names a run folder under bench/results/eval or archive (musique-deft-9e3d0d0); the
DM_rel scores are the ones the run recorded, the sentences are scored again. Results go to
bench/results/step_reads.json.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from app.eval.run import load_run
from app.resources import Resources
from app.settings import Settings
from bench.common import find_run, save
from bench.deft_errors import holds
from nodes.relevance import fused_with_retrieval, keep_relevant
from tools.evidence import opens_with_pronoun, select_sentences, sentences_of


def by_dm_alone(
    resources: Resources, question: str, passages: list[dict], budget: int
) -> list[dict[str, Any]]:
    """The sentences read under the `dm` policy (the removed order), as excerpts."""
    split = [sentences_of(resources.index, p) for p in passages]
    flat = [(i, pos, text) for i, texts in enumerate(split) for pos, text in enumerate(texts)]
    scores = resources.dm.p_rel(
        question, [{"title": passages[i]["title"], "text": t} for i, _, t in flat], stored=False
    )
    chosen: dict[tuple[int, int], str] = {}
    words = 0
    for n in sorted(range(len(flat)), key=lambda n: -scores[n]):
        i, pos, text = flat[n]
        wanted = {(i, pos): text}
        if pos > 0 and opens_with_pronoun(text):
            wanted[(i, pos - 1)] = split[i][pos - 1]
        new = {key: t for key, t in wanted.items() if key not in chosen}
        size = sum(len(t.split()) for t in new.values())
        if chosen and words + size > budget:
            continue
        chosen.update(new)
        words += size
    read = sorted({i for i, _ in chosen})
    return [
        {**passages[i], "text": " ".join(t for (j, _), t in sorted(chosen.items()) if j == i)}
        for i in read
    ]


def steps(results: list[dict]) -> Any:
    """(sub-question, retrieved passages, their DM_rel scores, record) of every step."""
    for record in results:
        sub_question, retrieved = "", []
        for step in record["trace"]:
            if step["node"] == "write_sub_question":
                sub_question = step.get("sub_question") or sub_question
            elif step["node"] == "retrieve_for_sub_question":
                retrieved = step["retrieved"]
            elif step["node"] == "filter_relevant":
                p = {d["inputs"][0]: d["p_yes"] for d in step["decisions"]}
                yield sub_question, retrieved, [p[r["id"]] for r in retrieved], record


def study(run: str) -> dict[str, Any]:
    meta, results = load_run(find_run(run))
    settings = Settings()
    resources = Resources.open(settings, meta["index"])
    counts: Counter[str] = Counter()
    keep = (settings.tau_rel, settings.max_kept, settings.none_kept)
    for sub_question, retrieved, scores, record in steps(results):
        gold = set(record["gold_ids"])
        if not gold & {p["id"] for p in retrieved}:
            continue
        counts["steps"] += 1
        kept = {
            "dm": keep_relevant(retrieved, scores, *keep),
            "fused": keep_relevant(retrieved, scores, *keep, fused_with_retrieval(scores)),
        }
        holder = [p for p in kept["fused"] if p["id"] in gold]
        answerable = any(holds(f"{p['title']} {p['text']}", record["gold"]) for p in holder)
        counts["answer_in_kept_gold"] += answerable
        for policy, passages in kept.items():
            chosen = (
                by_dm_alone(resources, sub_question, passages, settings.read_words)
                if policy == "dm"
                else select_sentences(
                    resources.dm, resources.index, sub_question, passages, settings.read_words
                )
            )
            text = " ".join(f"{p['title']} {p['text']}" for p in chosen)
            counts[f"{policy}: gold kept"] += bool(gold & {p["id"] for p in passages})
            counts[f"{policy}: gold read"] += bool(gold & {p["id"] for p in chosen})
            counts[f"{policy}: answer read"] += answerable and holds(text, record["gold"])
            counts[f"{policy}: words"] += sum(len(p["text"].split()) for p in chosen)
    resources.close()
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    runs = parser.parse_args().runs
    out = {run: study(run) for run in runs}
    print(json.dumps(out, indent=1))
    save("step_reads", {"command": "python -m bench.step_reads " + " ".join(runs), **out})


if __name__ == "__main__":
    main()
