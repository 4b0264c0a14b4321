"""Why the trained DM_same's temperature cannot calibrate it: per split and per kind of
pair, the trained cross-encoder's calibrated p(same) against the labels.

    .venv/bin/python -m bench.same_calibration [--data dm_data] [--max 1500]

The temperature is fitted on `calib`, whose questions ask about the relations of the
`train` questions the adapter learnt from. If the DM tells those pairs apart perfectly,
no temperature fitted there can learn how often it is wrong on `dev` pairs that ask
another relation ("near-miss-relation"). `--max` samples at most that many pairs of a
split (seeded, but not the sample `hoprag dm eval` draws, so dev ECE differs slightly
from its table); `calib` is read whole.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from app.dm_data import read_jsonl
from app.dm_eval import auc, ece
from app.dm_train import DM_DIR
from app.settings import Settings
from bench.common import save
from tools.decision import TrainedDM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    parser.add_argument("--max", type=int, default=1500)
    args = parser.parse_args()
    settings = Settings()
    trained = TrainedDM.load(DM_DIR, settings.runtime_dir)
    if trained is None:
        raise SystemExit(f"no trained DM in {DM_DIR}")
    results = {}
    for split in ("train", "calib", "dev"):
        rows = [e for e in read_jsonl(args.data / f"{split}.jsonl") if e.kind == "same"]
        if split != "calib" and len(rows) > args.max:
            rows = random.Random(13).sample(rows, args.max)
        p = trained.p("same", [(e.text_a, e.text_b) for e in rows])
        labels = [e.label for e in rows]
        by_how = {}
        for how in sorted({e.how for e in rows}):
            ix = [i for i, e in enumerate(rows) if e.how == how]
            by_how[how] = {
                "n": len(ix),
                "label": labels[ix[0]],
                "mean_p": round(sum(p[i] for i in ix) / len(ix), 3),
                "share_at_or_above_tau_same": round(
                    sum(p[i] >= settings.tau_same for i in ix) / len(ix), 3
                ),
            }
        results[split] = {
            "n": len(rows),
            "auc": round(auc(p, labels) or 0.0, 3),
            "ece": round(ece(p, labels), 3),
            "by_how": by_how,
        }
        print(split, results[split], flush=True)
    save(
        "same_calibration",
        {"command": f"python -m bench.same_calibration --data {args.data} --max {args.max}"}
        | {"tau_same": settings.tau_same, "results": results},
    )


if __name__ == "__main__":
    main()
