"""What the trained decision model computes around its cross-encoder, at serving time as
at fitting time: numpy only (no torch, no training code), so that the graph can import it.

Inputs are `"<kind>: <text_a>"` and `text_b`, cut to `DM_MAX_TOKENS` by dropping the end
of `text_b` first (a passage loses its tail, never the question). `direct` reads ten
passages, more than the window holds, so it is a logistic model, fitted on training
questions, over features of the question's passages (`direct_features`) with their
squares and pairwise products: their calibrated relevance, the relevance carried over
title links (a later hop's passage is named in an earlier one's text, never in the
question), and the depth estimate. Relevance to the whole question has the same blind
spot (a bridge passage shares nothing with the question), so where the graph judges
passages against the whole question (the direct answer, the fallback) a second logistic
model over the batch (`question_rel_features`) carries relevance over those title links.
`app.dm.train` fits these models; `app.dm.runtime` runs the cross-encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.dm.calibration import Platt, sigmoid
from app.index.title_links import title_links, titles_named

DM_DIR = Path(__file__).resolve().parents[1] / "data" / "dm"
DM_VERSION = "minilm-lora-1"
DM_MAX_TOKENS = 256


@dataclass(frozen=True)
class Adapter:
    """One LoRA adapter of the DM: where it lives in the DM folder and what it judges."""

    name: str
    folder: str  # "." is the DM folder itself
    kinds: tuple[str, ...]


# `same` compares two sub-questions and reads no passage, so it has an adapter of its
# own: its pairs can be rebuilt and retrained (`hoprag dm train --adapter same`, about 7
# minutes on this CPU with calibration) without retraining the passage kinds the graph
# was measured with.
ADAPTERS = (Adapter("main", ".", ("rel", "suff", "depth")), Adapter("same", "same", ("same",)))
CROSS_KINDS = tuple(kind for adapter in ADAPTERS for kind in adapter.kinds)
# The kinds whose logits the fitted models read (direct, whole-question relevance, depth):
# retraining their adapter refits those models too.
FEATURE_KINDS = ("rel", "depth")
DIRECT_FEATURES = (  # what `direct_features` returns, in order
    *(f"{name}relevance, rank {k}" for name in ("", "linked ", "reached ") for k in (1, 2)),
    "p(at most two hops)",
    "titles named in the question",
    *(f"whole-question relevance, rank {k}" for k in (1, 2)),
    "passages relevant to the whole question",
)
RETRIEVAL_SIGNALS = (  # what `Retriever.retrieval_signals` returns, in order
    "fused score, rank 2",
    "fused score, lead of rank 2 over rank 3",
    "best BM25 score",
)
# DM_direct on the question's top w reads how surely retrieval found them too (query
# performance prediction): on dev AUC 0.905 against 0.881 without, MuSiQue 0.688
# against 0.626 (`python -m bench.direct_models`). Text gathered without a retrieval of
# its own (the sentence-graph expansion) is judged on DIRECT_FEATURES alone.
DIRECT_RETRIEVED_FEATURES = (*DIRECT_FEATURES, *RETRIEVAL_SIGNALS)
DIRECT_PASSING = 0.5  # tau_rel: a passage counts as relevant to the whole question
DESIGN = "quadratic"  # how `quadratic_design` expands the features; dm.json records it
QUESTION_REL_FEATURES = (  # what `question_rel_features` returns per passage, in order
    "relevance (logit)",
    "relevance of a passage naming its title",
    "relevance of a passage it names by title",
    "reached relevance of a passage naming its title",
    "its title named in the question",
    "named by a passage whose title the question names",
    "best relevance in the batch",
    "second-best relevance in the batch",
)
DEPTH_FEATURES = "question embedding (all-MiniLM-L6-v2), depth adapter logit"


def direct_features(
    question: str,
    passages: Sequence[str],
    rel_probabilities: Sequence[float],
    p_shallow: float,
    question_rel: Sequence[float],
) -> list[float]:
    """The `DIRECT_FEATURES` of a question's top passages. Whether all gold passages are
    among them turns on the later hops, whose passages nothing in the question names:
    a passage whose title appears in the text of a relevant one is reached through it,
    so it carries that passage's relevance ("linked"); "reached" is the larger of the two.
    `question_rel` is the whole-question relevance of each passage (`p_question_rel`),
    which reads those links with the rest of the batch; how many pass it counts the
    hops already in hand."""
    rel = np.asarray(rel_probabilities, dtype=float)
    links = title_links(passages).astype(float)
    linked = (links * rel[:, None]).max(axis=0) if len(rel) else rel
    reached = np.maximum(rel, linked)

    def top(values: Any) -> list[float]:
        return [*sorted(np.asarray(values, dtype=float).tolist(), reverse=True), 0.0, 0.0][:2]

    named = titles_named(question, passages)
    passing = float(sum(p >= DIRECT_PASSING for p in question_rel))
    return [
        *top(rel),
        *top(linked),
        *top(reached),
        p_shallow,
        float(named),
        *top(question_rel),
        passing,
    ]


def quadratic_design(features: np.ndarray) -> np.ndarray:
    """Rows of features -> the features, their squares and pairwise products."""
    n = features.shape[1]
    products = [features[:, i] * features[:, j] for i in range(n) for j in range(i, n)]
    return np.hstack([features, np.stack(products, axis=1)])


def quadratic_probabilities(model: dict[str, Any], features: np.ndarray) -> list[float]:
    """p(yes) of each row of features under a `fit_quadratic` model."""
    design = (quadratic_design(np.asarray(features, dtype=float)) - model["mean"]) / model["scale"]
    *weights, bias = model["weights"]
    return [sigmoid(float(x) + bias) for x in design @ np.asarray(weights)]


def fits(model: dict[str, Any] | None, names: Sequence[str]) -> bool:
    """Whether a saved model was fitted on these features and this design (an older
    `dm.json` may hold one fitted on others, which cannot score ours)."""
    return bool(model) and model.get("features") == list(names) and model.get("design") == DESIGN


def direct_probability(model: dict[str, Any], features: Sequence[float]) -> float:
    """p(all gold passages are here) from the first of one question's `direct_inputs`
    that the model was fitted on (as `fit_direct` took them)."""
    return quadratic_probabilities(model, np.asarray([features[: len(model["features"])]]))[0]


def question_rel_features(
    question: str, passages: Sequence[str], rel_probabilities: Sequence[float]
) -> np.ndarray:
    """One row of `QUESTION_REL_FEATURES` per passage, from the batch it was judged in:
    a bridge passage is named by title in a relevant passage (directly or through one
    more), or in a passage the question names."""
    rel = np.asarray(rel_probabilities, dtype=float)
    if not len(rel):
        return np.zeros((0, len(QUESTION_REL_FEATURES)))
    links = title_links(passages).astype(float)
    linked_in = (links * rel[:, None]).max(axis=0)
    linked_out = (links.T * rel[:, None]).max(axis=0)
    linked_twice = (links * np.maximum(rel, linked_in)[:, None]).max(axis=0)
    named = np.array([titles_named(question, [p]) for p in passages], dtype=float)
    from_named = (links * named[:, None]).max(axis=0)
    best = [*sorted(rel.tolist(), reverse=True), 0.0][:2]
    clipped = np.clip(rel, 1e-6, 1 - 1e-6)
    return np.column_stack(
        [
            np.log(clipped / (1 - clipped)),
            linked_in,
            linked_out,
            linked_twice,
            named,
            from_named,
            np.full(len(rel), best[0]),
            np.full(len(rel), best[1]),
        ]
    )


def rel_probabilities(
    encoder: Any, platt: dict[str, dict[str, float]], question: str, passages: Sequence[str]
) -> list[float]:
    """Calibrated DM_rel of each passage, in one forward pass."""
    scale = Platt(**platt["rel"])
    return [scale(float(x)) for x in encoder.logits([("rel", question, t) for t in passages])]


def question_rel_inputs(
    encoder: Any, platt: dict[str, dict[str, float]], question: str, passages: Sequence[str]
) -> np.ndarray:
    """`question_rel_features` of a batch, as fitted and as served."""
    return question_rel_features(
        question, passages, rel_probabilities(encoder, platt, question, passages)
    )


def whole_question_relevance(
    model: dict[str, Any] | None, question: str, passages: Sequence[str], rel: Sequence[float]
) -> list[float]:
    """Each passage's relevance to the whole question under the saved whole-question
    `model`, from its per-passage relevance `rel` in the same batch; `rel` itself
    without a model fitted on `QUESTION_REL_FEATURES` (an older `dm.json`)."""
    if model is None or not passages or not fits(model, QUESTION_REL_FEATURES):
        return list(rel)
    return quadratic_probabilities(model, question_rel_features(question, passages, rel))


def direct_inputs(
    encoder: Any,
    platt: dict[str, dict[str, float]],
    question_rel: dict[str, Any],
    question: str,
    passages: Sequence[str],
    retrieval: Sequence[float] | None = None,
) -> list[float]:
    """`direct_features` from the cross-encoder, as fitted and as served: relevance of
    every passage and the depth adapter's estimate (not `fit_depth`'s model, which came
    after DM_direct was fitted) in one forward pass (the int8 runtime's scores
    shift slightly with the batch, so fitting and serving must batch alike), and the
    whole-question relevance from `question_rel` (per-passage relevance without one);
    then the `RETRIEVAL_SIGNALS` of the retrieval that found the passages, if any."""
    logits = encoder.logits([("rel", question, t) for t in passages] + [("depth", question, "")])
    rel = [Platt(**platt["rel"])(float(x)) for x in logits[:-1]]
    whole = whole_question_relevance(question_rel, question, passages, rel)
    p_shallow = Platt(**platt["depth"])(float(logits[-1]))
    return [*direct_features(question, passages, rel, p_shallow, whole), *(retrieval or ())]


def depth_inputs(encoder: Any, embedder: Any, questions: Sequence[str]) -> np.ndarray:
    """The depth model's features (`DEPTH_FEATURES`), one row per question."""
    logits = encoder.logits([("depth", q, "") for q in questions])
    return np.hstack([embedder.embed(list(questions)), np.asarray(logits)[:, None]])


def depth_probabilities(model: dict[str, Any], features: np.ndarray) -> list[float]:
    *weights, bias = model["weights"]
    return [sigmoid(float(x)) for x in features @ np.array(weights) + bias]
