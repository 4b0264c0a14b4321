"""How good are the decision model's probabilities? AUC, accuracy at the threshold,
expected calibration error (10 equal-width bins) and a reliability diagram per kind."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.dm.data import is_question_rel, question_batch, question_contexts, retrieval_signals_of

ECE_BINS = 10
# The trained DM takes over a kind only where it ranks at least this well: a judge wrong
# one time in three does harm where the zero-shot model abstains (`direct` is "off"
# zero-shot, and a weak `direct` would stop graph expansion and the step loop early).
MIN_TRAINED_AUC = 0.8
EVAL_KINDS = ("rel", "direct", "depth", "suff", "same")


def auc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    """Area under the ROC curve: P(a random positive outranks a random negative), ties
    counting half (the Mann-Whitney statistic). None when one class is missing."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return None
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def reliability(
    probabilities: Sequence[float], labels: Sequence[int], bins: int = ECE_BINS
) -> list[tuple[float, float, int]]:
    """(mean predicted p, observed rate of yes, count) per equal-width bin that holds data."""
    p, y = np.asarray(probabilities, dtype=float), np.asarray(labels, dtype=float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    return [
        (float(p[which == b].mean()), float(y[which == b].mean()), int((which == b).sum()))
        for b in range(bins)
        if (which == b).any()
    ]


def ece(probabilities: Sequence[float], labels: Sequence[int], bins: int = ECE_BINS) -> float:
    """Expected calibration error: the count-weighted gap between confidence and accuracy."""
    table = reliability(probabilities, labels, bins)
    total = sum(n for _, _, n in table)
    return float(sum(n * abs(conf - rate) for conf, rate, n in table) / total) if total else 0.0


def accuracy_at(probabilities: Sequence[float], labels: Sequence[int], threshold: float) -> float:
    p, y = np.asarray(probabilities, dtype=float), np.asarray(labels, dtype=int)
    return float(((p >= threshold).astype(int) == y).mean()) if len(y) else 0.0


def trained_kinds(report: dict[str, Any]) -> list[str]:
    """The kinds the trained DM should judge: on the very examples the zero-shot backend
    was scored on, its AUC is at least the zero-shot one; and on all its dev examples
    it is at least `MIN_TRAINED_AUC`."""

    def serves(r: dict[str, Any]) -> bool:
        paired = r.get("trained_paired", r["trained"])["auc"] or 0
        return (
            paired >= (r["zero_shot"]["auc"] or 0.5)
            and (r["trained"]["auc"] or 0) >= MIN_TRAINED_AUC
        )

    return [
        kind for kind, r in report.items() if isinstance(r, dict) and "trained" in r and serves(r)
    ]


def merged(
    earlier: dict[str, Any], report: dict[str, Any], asked: Sequence[str], served: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """An evaluation of some kinds (`asked`) joined to an `earlier` report of all: the
    report with the kinds not asked as they were (its commands kept as a list), and the
    kinds the trained DM serves: those it `served` before that were not asked, plus the
    asked ones it now wins."""
    kept = {k: v for k, v in earlier.items() if k not in asked and k not in ("use_for", "date")}
    if "command" in kept and not isinstance(kept["command"], list):
        kept["command"] = [kept["command"]]
    use_for = [k for k in served if k not in asked] + trained_kinds(
        {k: v for k, v in report.items() if k in asked}
    )
    return {**kept, **report}, use_for


def kind_report(
    probabilities: Sequence[float], labels: Sequence[int], threshold: float
) -> dict[str, Any]:
    return {
        "n": len(labels),
        "positives": int(sum(labels)),
        "auc": auc(probabilities, labels),
        "accuracy": accuracy_at(probabilities, labels, threshold),
        "ece": ece(probabilities, labels),
    }


def by_query(
    rows: Sequence[Any], trained_p: Sequence[float], zero_p: Sequence[float], threshold: float
) -> dict[str, dict[str, Any]]:
    """Both backends on the examples of each query type (`extra["query"]`): relevance to
    a whole question and to one sub-question are different tasks, and the graph's step
    filter asks only the second. Needs both backends scored on all rows."""
    report = {}
    for query in sorted({e.extra["query"] for e in rows if "query" in e.extra}):
        picked = [i for i, e in enumerate(rows) if e.extra.get("query") == query]
        labels = [rows[i].label for i in picked]
        report[query] = {
            "trained": kind_report([trained_p[i] for i in picked], labels, threshold),
            "zero_shot": kind_report([zero_p[i] for i in picked], labels, threshold),
        }
    return report


def reliability_diagram(
    curves: dict[str, tuple[Sequence[float], Sequence[int]]], title: str, out: Path
) -> Path:
    """One PNG: the diagonal, and one reliability curve per backend."""
    import matplotlib  # only to draw: the metrics above serve bench scripts without it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 4.2))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="calibrated")
    for name, (probabilities, labels) in curves.items():
        table = reliability(probabilities, labels)
        ax.plot([c for c, _, _ in table], [r for _, r, _ in table], marker="o", label=name)
    ax.set(xlabel="predicted p(yes)", ylabel="observed rate of yes", title=title)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def rel_latency_ms(trained: Any, rel_rows: Sequence[Any], batches: int) -> dict[str, Any]:
    """Latency as the graph sees it: one question against 10 passages, one batch each."""
    timings = []
    for start in range(0, min(len(rel_rows), 10 * batches) - 9, 10):
        chunk = rel_rows[start : start + 10]
        started = time.perf_counter()
        trained.p("rel", [(chunk[0].text_a, e.text_b) for e in chunk])
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "passages": 10,
        "batches": len(timings),
        "median": float(np.median(timings)) if timings else None,
        "p90": float(np.percentile(timings, 90)) if timings else None,
    }


def evaluate(
    dev: Sequence[Any],
    trained: Any,
    zero_shot: Any,
    passages: Any,
    out_dir: Path,
    llm_per_kind: int,
    thresholds: dict[str, float],
    max_per_kind: int | None = None,
    kinds: Sequence[str] = EVAL_KINDS,
) -> dict[str, Any]:
    """Score dev examples of `kinds` with the trained DM (a seeded sample of
    `max_per_kind` per kind, all when None) and the zero-shot backend (`llm_per_kind` of
    those where it calls the chat model, which takes seconds per call; all of them where
    it is cheap). Writes one reliability PNG per kind."""
    report: dict[str, Any] = {}
    for kind in kinds:
        rng = random.Random(f"13 {kind}")  # each kind's sample whichever kinds are asked
        rows = [e for e in dev if e.kind == kind]
        if not rows:
            continue
        if max_per_kind is not None and len(rows) > max_per_kind:
            rows = rng.sample(rows, max_per_kind)
        labels = [e.label for e in rows]
        if kind == "direct":
            trained_p = [
                trained.p_direct(
                    e.text_a, passages(e.source, e.extra["passage_ids"]), retrieval_signals_of(e)
                )
                for e in tqdm(rows, desc="trained direct", unit="ex")
            ]
        else:
            chunks = [rows[i : i + 256] for i in range(0, len(rows), 256)]
            trained_p = [
                p
                for chunk in tqdm(chunks, desc=f"trained {kind}", unit="batch")
                for p in trained.p(kind, [(e.text_a, e.text_b) for e in chunk])
            ]
            if kind == "rel":  # whole-question rows as the graph judges them: in a batch
                contexts = question_contexts(dev)
                for i, e in enumerate(tqdm(rows, desc="trained rel, whole question", unit="ex")):
                    if is_question_rel(e):
                        batch, at = question_batch(e, contexts, passages)
                        trained_p[i] = trained.p_question_rel(e.text_a, batch)[at]
        backend = zero_shot.backend(kind)
        picked = list(range(len(rows)))
        if backend == "llm" and len(rows) > llm_per_kind:
            picked = rng.sample(picked, llm_per_kind)
        sample = [rows[i] for i in picked]
        if backend == "off":
            zero_p = [0.0] * len(sample)
        elif kind == "direct":
            zero_p = [
                zero_shot.p_direct(
                    e.text_a,
                    [
                        {"id": i, "title": t.partition(": ")[0], "text": t.partition(": ")[2]}
                        for i, t in zip(
                            e.extra["passage_ids"],
                            passages(e.source, e.extra["passage_ids"]),
                            strict=True,
                        )
                    ],
                )
                for e in tqdm(sample, desc=f"zero-shot {kind}", unit="ex")
            ]
        else:
            zero_p = [
                zero_shot.p_text(kind, e.text_a, e.text_b)
                for e in tqdm(sample, desc=f"zero-shot {kind}", unit="ex")
            ]
        threshold = thresholds.get(kind, 0.5)
        report[kind] = {
            "trained": kind_report(trained_p, labels, threshold),
            # the trained DM on the zero-shot backend's examples: the fair comparison
            "trained_paired": kind_report(
                [trained_p[i] for i in picked], [labels[i] for i in picked], threshold
            ),
            "zero_shot": {
                "backend": backend,
                **kind_report(zero_p, [e.label for e in sample], threshold),
            },
            "threshold": threshold,
        }
        if backend != "llm" and any("query" in e.extra for e in rows):
            report[kind]["by_query"] = by_query(rows, trained_p, zero_p, threshold)
        reliability_diagram(
            {
                "trained DM": (trained_p, labels),
                f"zero-shot ({backend})": (zero_p, [e.label for e in sample]),
            },
            kind,
            out_dir / f"reliability_{kind}.png",
        )
    if "rel" in kinds:
        rel_rows = [e for e in dev if e.kind == "rel"]
        report["rel_latency_ms"] = rel_latency_ms(trained, rel_rows, batches=20)
    return report
