"""Evidence selection: the reader sees the sentences that matter, not whole passages
(docs/method.md section 1, step 3.6). Small readers are known to gain from evidence
selection (RECOMP, EXIT), and every word not read is prompt time saved.

Every sentence of the chosen passages is scored by DM_rel in one batch and taken best
first until the word budget is spent. A final read (the whole question) first takes each
passage's best sentence, so that a bridge passage ranked low still shows its best line;
a sub-question, which one passage answers, ranks its sentences by score fused with the
rank of their passage (the passages come best first), since DM_rel alone misranks the
sentences of model-written sub-questions. A sentence that opens with a pronoun brings
the sentence before it, which names what it refers to. The budgets and orders were chosen
on archived reads (docs/decisions.md, "Reading sentences", "Which passages a step
reads").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.index.corpus import excerpt
from app.index.store import CorpusIndex
from app.settings import STEP_FUSION_K, Settings
from prompts import load_words
from tools.decision import DecisionModel
from tools.retriever import by_score, fused_with_scores

PRONOUN_OPENERS = load_words("pronoun_openers")


def opens_with_pronoun(sentence: str) -> bool:
    first = sentence.split(maxsplit=1)[0].strip("\"'(").lower() if sentence.strip() else ""
    return first in PRONOUN_OPENERS


def sentences_of(index: CorpusIndex, passage: dict[str, Any]) -> list[str]:
    """The stored sentences of an index passage; the text as one sentence otherwise."""
    return index.sentences_of(passage["id"]) or [passage["text"]]


def read_within(
    dm: DecisionModel,
    index: CorpusIndex,
    question: str,
    passages: Sequence[dict[str, Any]],
    settings: Settings,
) -> list[dict[str, Any]]:
    """What a whole-question read (the direct answer, the fallback) takes of `passages`:
    their best sentences within `final_read_words`, each passage's best first; with
    `evidence_selection` off, the passages whole."""
    if not settings.rule("evidence_selection"):
        return list(passages)
    return select_sentences(
        dm, index, question, passages, settings.final_read_words, every_passage=True
    )


def select_sentences(
    dm: DecisionModel,
    index: CorpusIndex,
    question: str,
    passages: Sequence[dict[str, Any]],
    budget: int,
    *,
    every_passage: bool = False,
) -> list[dict[str, Any]]:
    """The best sentences of `passages` (best first) for `question` within `budget` words
    (at least one sentence), as excerpts in the passages' order; `every_passage`: each
    passage's best sentence first, then by score."""
    split = [sentences_of(index, p) for p in passages]
    flat = [(i, pos, text) for i, texts in enumerate(split) for pos, text in enumerate(texts)]
    if not flat:
        return []
    scores = dm.p_rel(
        question,
        [{"title": passages[i]["title"], "text": text} for i, _, text in flat],
        stored=False,
    )
    ranked = by_score(scores)
    if every_passage:
        best_of_passage: dict[int, int] = {}
        for n in ranked:
            best_of_passage.setdefault(flat[n][0], n)
        firsts = set(best_of_passage.values())
        order = list(best_of_passage.values()) + [n for n in ranked if n not in firsts]
    else:
        in_passage_order = sorted(range(len(flat)), key=lambda n: (flat[n][0], -scores[n]))
        order = fused_with_scores(in_passage_order, scores, STEP_FUSION_K)
    chosen: dict[int, dict[int, str]] = {}
    words = 0
    for n in order:
        i, pos, text = flat[n]
        wanted = [(pos, text)]
        if pos > 0 and opens_with_pronoun(text):
            wanted.insert(0, (pos - 1, split[i][pos - 1]))
        new = [(p, t) for p, t in wanted if p not in chosen.get(i, {})]
        size = sum(len(t.split()) for _, t in new)
        if chosen and words + size > budget:
            continue
        chosen.setdefault(i, {}).update(new)
        words += size
    return [excerpt(passages[i], list(chosen[i].items())) for i in sorted(chosen)]
