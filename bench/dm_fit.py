"""How well trained DMs fit their own training pairs: a DM that ranks its `train`
examples badly did not converge (rather than overfit), which `hoprag dm eval` on dev
cannot tell apart.

    .venv/bin/python -m bench.dm_fit --dm NAME=DIR [NAME=DIR ...] [--data dm_data] [--n 250]

AUC of each DM's calibrated p(yes) on a seeded sample of `--n` `train` examples of each
cross-encoder kind (`rel` split by query: the whole question or one sub-question).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from app.dm.data import DMExample, read_jsonl
from app.dm.eval import auc
from app.dm.features import CROSS_KINDS
from app.settings import Settings
from bench.common import save
from tools.decision import TrainedDM


def groups(rows: list[DMExample]) -> dict[str, list[DMExample]]:
    """Train examples by kind, `rel` by query."""
    out: dict[str, list[DMExample]] = {}
    for e in rows:
        if e.kind in CROSS_KINDS:
            name = f"rel, {e.extra.get('query')}" if e.kind == "rel" else e.kind
            out.setdefault(name, []).append(e)
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dm", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    parser.add_argument("--n", type=int, default=250)
    args = parser.parse_args()
    settings = Settings()
    sample = {
        name: random.Random(13).sample(rows, min(args.n, len(rows)))
        for name, rows in groups(read_jsonl(args.data / "train.jsonl")).items()
    }
    results = {}
    for spec in args.dm:
        name, _, folder = spec.partition("=")
        trained = TrainedDM.load(Path(folder), settings.runtime_dir)
        if trained is None:
            raise SystemExit(f"no trained DM in {folder}")
        results[name] = {
            group: round(
                auc(
                    trained.p(rows[0].kind, [(e.text_a, e.text_b) for e in rows]),
                    [e.label for e in rows],
                )
                or 0.0,
                3,
            )
            for group, rows in sample.items()
        }
        print(name, results[name], flush=True)
    command = f"python -m bench.dm_fit --dm {' '.join(args.dm)} --data {args.data} --n {args.n}"
    save("dm_fit", {"command": command, "n": args.n, "results": results})


if __name__ == "__main__":
    main()
