"""DM_direct: the shipped model against the same without the retrieval signals (the
model that judges gathered text), without the whole-question relevance features too, and
a linear model.

    .venv/bin/python -m bench.direct_models [--data dm_data]

Both are fitted on the `direct` examples of `train` and `calib` (as `hoprag dm
calibrate` fits the shipped one) and scored on every `dev` example, from the features
the served runtime gives (`app.dm.features.direct_inputs`). "Linear" is a logistic model
over `DIRECT_RETRIEVED_FEATURES` (ridge 1); "quadratic" is `fit_direct`, the shipped
model; "without retrieval signals" drops `RETRIEVAL_SIGNALS` (as shipped before them,
and as `direct_gathered` is); "per-passage relevance only" drops the features read from
the whole-question relevance model as well (as shipped before it). Per benchmark too: the
overall AUC also rewards telling benchmarks apart (MuSiQue's 3- and 4-hop questions
seldom have all gold passages in the top w).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.cli.dm import _benchmark_passages
from app.dm.calibration import sigmoid
from app.dm.data import read_jsonl, retrieval_signals_of
from app.dm.eval import auc, ece
from app.dm.features import (
    DIRECT_FEATURES,
    DM_DIR,
    direct_inputs,
    direct_probability,
    quadratic_probabilities,
)
from app.dm.runtime import load_runtime
from app.dm.train import DIRECT_L2, fit_direct, fit_logistic, fit_quadratic
from app.settings import Settings
from bench.common import by_benchmark, save

LINEAR_L2 = 1.0


def features(
    data: Path,
    split: str,
    encoder: Any,
    platt: dict[str, dict[str, float]],
    question_rel: dict[str, Any],
    passages: Callable[[str, list[int]], list[str]],
) -> tuple[np.ndarray, list[int], list[str]]:
    rows = [e for e in read_jsonl(data / f"{split}.jsonl") if e.kind == "direct"]
    x = [
        direct_inputs(
            encoder,
            platt,
            question_rel,
            e.text_a,
            passages(e.source, e.extra["passage_ids"]),
            retrieval_signals_of(e),
        )
        for e in tqdm(rows, desc=split, unit="question")
    ]
    return np.array(x), [e.label for e in rows], [e.source for e in rows]


def scores(
    p: list[float], y: list[int], sources: list[str], threshold: float
) -> dict[str, dict[str, float]]:
    """AUC and ECE per group, and what the direct answer would take at `threshold`: the
    share of questions it takes and the share of those whose top w holds all gold."""
    out = {}
    for name, ix in by_benchmark(sources).items():
        taken = [i for i in ix if p[i] >= threshold]
        out[name] = {
            "n": len(ix),
            "positives": sum(y[i] for i in ix),
            "auc": round(auc([p[i] for i in ix], [y[i] for i in ix]) or 0.0, 3),
            "ece": round(ece([p[i] for i in ix], [y[i] for i in ix]), 3),
            "taken": round(len(taken) / len(ix), 3),
            "precision": round(sum(y[i] for i in taken) / len(taken), 3) if taken else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    args = parser.parse_args()
    settings = Settings()
    tau = settings.tau_direct
    meta = json.loads((DM_DIR / "dm.json").read_text())
    platt, question_rel = meta["platt"], meta.get("question_rel", {})
    encoder = load_runtime(DM_DIR, settings.runtime_dir)
    passages = _benchmark_passages(settings)
    fit_parts = [
        features(args.data, s, encoder, platt, question_rel, passages) for s in ("train", "calib")
    ]
    x_fit = np.vstack([part[0] for part in fit_parts])
    y_fit = np.array([label for part in fit_parts for label in part[1]], dtype=float)
    x_dev, y_dev, sources = features(args.data, "dev", encoder, platt, question_rel, passages)

    *weights, bias = fit_logistic(x_fit, y_fit, LINEAR_L2)
    linear = [sigmoid(float(np.dot(weights, x)) + bias) for x in x_dev]
    model = fit_direct(x_fit, y_fit)
    quadratic = [direct_probability(model, x) for x in x_dev]
    gathered = fit_direct(x_fit, y_fit, DIRECT_FEATURES)
    without_signals = [direct_probability(gathered, x) for x in x_dev]
    per_passage = [i for i, name in enumerate(DIRECT_FEATURES) if "whole-question" not in name]
    names = [DIRECT_FEATURES[i] for i in per_passage]
    without = fit_quadratic(x_fit[:, per_passage], y_fit, names, DIRECT_L2)
    without_whole = quadratic_probabilities(without, x_dev[:, per_passage])
    results = {
        f"linear (ridge {LINEAR_L2})": scores(linear, y_dev, sources, tau),
        f"quadratic (ridge {DIRECT_L2}), per-passage relevance only, no retrieval signals": (
            scores(without_whole, y_dev, sources, tau)
        ),
        f"quadratic (ridge {DIRECT_L2}), no retrieval signals (direct_gathered)": scores(
            without_signals, y_dev, sources, tau
        ),
        f"quadratic (ridge {DIRECT_L2}, shipped)": scores(quadratic, y_dev, sources, tau),
    }
    for name, r in results.items():
        print(name, r, flush=True)
    save(
        "direct_models",
        {
            "command": f"python -m bench.direct_models --data {args.data}",
            "fit_examples": len(y_fit),
            "threshold": tau,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
