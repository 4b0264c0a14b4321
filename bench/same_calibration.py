"""The trained DM_same's calibrated p(same) per split and per kind of pair, for one or
more DM folders on the same examples.

    .venv/bin/python -m bench.same_calibration [--data dm_data] [--max 1500]
        [--dm NAME=DIR ...]

Template pairs put a relation's template against its plain form ("What is the R of
S?"), and near misses come in both forms (`-plain`): when they were templates only, the
DM learnt that a plain second question means "same". Template pairs word a relation one
way only, so pairs from the chat model's rewordings (`llm-*`, `hoprag dm rewordings`)
follow, and `PROBES`, hand-written pairs no template makes, show how a DM takes
rewordings and near misses it has never seen. `--dm` names the folders to compare
(default: `shipped=app/data/dm`); a folder laid out before the split, whose main adapter
also judged `same`, is scored with a copy of that adapter in `same/`. `--max` samples at
most that many pairs of a split (seeded, but not the sample `hoprag dm eval` draws, so
dev ECE differs slightly from its table); `calib` is read whole.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from app.dm.data import read_jsonl
from app.dm.eval import auc, ece
from app.dm.features import DM_DIR
from app.settings import Settings
from bench.common import save
from tools.decision import TrainedDM


def laid_out(folder: Path, scratch: Path) -> Path:
    """`folder`, or a copy of it whose `same/` holds its main adapter (a DM from before
    `same` had an adapter of its own)."""
    if (folder / "same").is_dir():
        return folder
    copy = scratch / "dm"
    shutil.copytree(folder, copy)
    shutil.copytree(folder, copy / "same", ignore=shutil.ignore_patterns("dm.json", "same"))
    return copy


# Hand-written pairs that no template or benchmark relation makes: natural rewordings
# (yes) and near misses (no), scored as they are by each DM.
PROBES = (
    ("Who founded Velloway Ironworks?", "Who was the founder of Velloway Ironworks?", 1),
    ("Who founded Velloway Ironworks?", "Where was Odile Farrengast born?", 0),
    ("Who directed Titanic?", "Who was the director of the film Titanic?", 1),
    ("When was Ada Lovelace born?", "What is the birth date of Ada Lovelace?", 1),
    ("When was Ada Lovelace born?", "Where was Ada Lovelace born?", 0),
    ("Who is the spouse of Marie Curie?", "Who was Marie Curie married to?", 1),
    ("Who is the spouse of Marie Curie?", "Who is the father of Marie Curie?", 0),
    ("What is the capital of Peru?", "Which city is Peru's capital?", 1),
    ("What is the capital of Peru?", "What is the capital of Chile?", 0),
    ("Who is Jack Clay's employer?", "What is the name of Jack Clay's employer?", 1),
    ("When did the Battle of Guam take place?", "When was the Battle of Manila?", 0),
)


def probe_scores(trained: TrainedDM) -> list[dict[str, Any]]:
    p = trained.p("same", [(a, b) for a, b, _ in PROBES])
    return [
        {"first": a, "second": b, "label": y, "p": round(q, 3)}
        for (a, b, y), q in zip(PROBES, p, strict=True)
    ]


def scores(trained: TrainedDM, data: Path, most: int, tau_same: float) -> dict[str, Any]:
    """AUC and ECE per split, and mean p per kind of pair."""
    results = {}
    for split in ("train", "calib", "dev"):
        rows = [e for e in read_jsonl(data / f"{split}.jsonl") if e.kind == "same"]
        if split != "calib" and len(rows) > most:
            rows = random.Random(13).sample(rows, most)
        p = trained.p("same", [(e.text_a, e.text_b) for e in rows])
        labels = [e.label for e in rows]
        by_how = {}
        for how in sorted({e.how for e in rows}):
            ix = [i for i, e in enumerate(rows) if e.how == how]
            by_how[how] = {
                "n": len(ix),
                "label": labels[ix[0]],
                "mean_p": round(sum(p[i] for i in ix) / len(ix), 3),
                "share_at_or_above_tau_same": round(sum(p[i] >= tau_same for i in ix) / len(ix), 3),
            }
        results[split] = {
            "n": len(rows),
            "auc": round(auc(p, labels) or 0.0, 3),
            "ece": round(ece(p, labels), 3),
            "by_how": by_how,
        }
        print(split, results[split], flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    parser.add_argument("--max", type=int, default=1500)
    parser.add_argument("--dm", nargs="+", default=[f"shipped={DM_DIR}"], metavar="NAME=DIR")
    args = parser.parse_args()
    settings = Settings()
    results = {}
    for spec in args.dm:
        name, _, folder = spec.partition("=")
        with tempfile.TemporaryDirectory() as scratch:
            trained = TrainedDM.load(laid_out(Path(folder), Path(scratch)), settings.runtime_dir)
            if trained is None:
                raise SystemExit(f"no trained DM in {folder}")
            results[name] = scores(trained, args.data, args.max, settings.tau_same)
            results[name]["probes"] = probe_scores(trained)
    save(
        "same_calibration",
        {
            "command": f"python -m bench.same_calibration --data {args.data} --max {args.max}"
            + (f" --dm {' '.join(args.dm)}" if args.dm != parser.get_default("dm") else "")
        }
        | {"tau_same": settings.tau_same, "results": results},
    )


if __name__ == "__main__":
    main()
