"""The depth estimate: the depth adapter alone (as served before the depth model) against
the depth model with the weights of its fit on a small grid, on every `dev` question.

    .venv/bin/python -m bench.depth_models [--data dm_data]

Each model is fitted on the `depth` rows of `train` and `calib` (as `hoprag dm calibrate`
fits the shipped one, `app.dm.train.fit_depth`): `extra` is the weight of `extra_train`'s
HotpotQA questions (0 leaves them out), `deep` the weight of questions of more than two
hops. Per benchmark, `shallow passing` and `deep passing` are the shares of questions of at
most two hops, and of more, whose estimate reaches `tau_shallow`: the first is the share
the direct answer can take at all (SPEC step 2), the second the share it takes wrongly.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from app.dm.calibration import Platt
from app.dm.data import EXTRA_HOTPOTQA_SOURCE, read_jsonl
from app.dm.eval import auc, ece
from app.dm.features import DM_DIR, depth_inputs, depth_probabilities
from app.dm.runtime import load_runtimes
from app.dm.train import (
    DEPTH_DEEP_WEIGHT,
    DEPTH_EXTRA_WEIGHT,
    DEPTH_L2,
    depth_weights,
    fit_logistic,
)
from app.encoders.embeddings import Embedder
from app.settings import Settings
from bench.common import by_benchmark, save

EXTRA_WEIGHTS = (0.0, DEPTH_EXTRA_WEIGHT, 1.0)
DEEP_WEIGHTS = (1.0, DEPTH_DEEP_WEIGHT)


def scores(p: list[float], rows: list[Any], threshold: float) -> dict[str, dict[str, Any]]:
    out = {}
    for name, ix in by_benchmark([r.source for r in rows]).items():
        ps, ys = [p[i] for i in ix], [rows[i].label for i in ix]
        shallow = [q for q, y in zip(ps, ys, strict=True) if y == 1]
        deep = [q for q, y in zip(ps, ys, strict=True) if y == 0]
        out[name] = {
            "n": len(ix),
            "deep": len(deep),
            "auc": round(auc(ps, ys), 3) if deep and shallow else None,
            "ece": round(ece(ps, ys), 3),
            "shallow_passing": round(float(np.mean([q >= threshold for q in shallow])), 3),
            "deep_passing": (
                round(float(np.mean([q >= threshold for q in deep])), 3) if deep else None
            ),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    args = parser.parse_args()
    settings = Settings()
    meta = json.loads((DM_DIR / "dm.json").read_text())
    encoder = load_runtimes(DM_DIR, settings.runtime_dir)["depth"]
    embedder = Embedder(settings.runtime_dir)
    fit = [
        e
        for split in ("train", "calib")
        for e in read_jsonl(args.data / f"{split}.jsonl")
        if e.kind == "depth"
    ]
    dev = [e for e in read_jsonl(args.data / "dev.jsonl") if e.kind == "depth"]
    x_fit = depth_inputs(encoder, embedder, [e.text_a for e in fit])
    x_dev = depth_inputs(encoder, embedder, [e.text_a for e in dev])
    y_fit = np.array([e.label for e in fit], dtype=float)
    threshold = settings.tau_shallow

    adapter = Platt(**meta["platt"]["depth"])
    results = {"depth adapter (Platt)": scores([adapter(x) for x in x_dev[:, -1]], dev, threshold)}
    for extra_weight in EXTRA_WEIGHTS:
        for deep_weight in DEEP_WEIGHTS:
            weights = depth_weights(fit, extra_weight, deep_weight)
            model = {"weights": fit_logistic(x_fit, y_fit, DEPTH_L2, weights)}
            shipped = (extra_weight, deep_weight) == (DEPTH_EXTRA_WEIGHT, DEPTH_DEEP_WEIGHT)
            name = f"depth model, extra {extra_weight}, deep {deep_weight}"
            name += ", shipped" if shipped else ""
            results[name] = scores(depth_probabilities(model, x_dev), dev, threshold)
            print(name, results[name]["all"], flush=True)
    save(
        "depth_models",
        {
            "command": f"python -m bench.depth_models --data {args.data}",
            "fit_examples": len(fit),
            "extra_examples": sum(e.source == EXTRA_HOTPOTQA_SOURCE for e in fit),
            "threshold": threshold,
            "ridge": DEPTH_L2,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
