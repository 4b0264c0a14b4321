"""The DM trained from scratch on this machine, timed.

    .venv/bin/python -m bench.dm_train [--keep DIR]

`hoprag dm train` alone builds the examples first when it finds none; this script runs
the two steps as separate child processes (`hoprag dm data`, `hoprag dm train`) into a
scratch folder to time each (the shipped adapter in app/data/dm is left alone), and
records each one's wall seconds and peak RSS, plus the trained adapter's calibration
summary. The issue's budget is 60 minutes for training; run it with nothing else on the
CPU. `--keep DIR` keeps the trained DM there, for `hoprag dm eval --dm DIR`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from bench.common import ROOT, run_measured, save

HOPRAG = str(ROOT / ".venv" / "bin" / "hoprag")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", type=Path, help="Keep the trained DM in this folder.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hoprag-dm-") as scratch:
        data, out = Path(scratch) / "data", Path(scratch) / "dm"
        data_s, data_gib, _ = run_measured([HOPRAG, "dm", "data", "--out", str(data)])
        print(f"dm data: {data_s:.0f} s", flush=True)
        train_s, train_gib, stdout = run_measured(
            [HOPRAG, "dm", "train", "--data", str(data), "--out", str(out)]
        )
        print(f"dm train: {train_s:.0f} s", flush=True)
        meta = json.loads(stdout)
        adapters = list(meta["adapters"].values())
        counts = json.loads((data / "counts.json").read_text())
        if args.keep:
            shutil.copytree(out, args.keep, dirs_exist_ok=True)
    save(
        "dm_train",
        {
            "command": "python -m bench.dm_train" + (f" --keep {args.keep}" if args.keep else ""),
            "data_seconds": round(data_s, 1),
            "data_peak_rss_gib": round(data_gib, 2),
            "train_seconds": round(train_s, 1),
            "train_peak_rss_gib": round(train_gib, 2),
            "fit_seconds": round(sum(a["train_seconds"] for a in adapters), 1),
            "calibration_seconds": meta["calibration_seconds"],
            "train_examples": sum(a["train_examples"] for a in adapters),
            "adapters": {
                name: {
                    k: a.get(k)
                    for k in (
                        "kinds",
                        "train_examples",
                        "train_seconds",
                        "loss_per_100_batches_by_kind",
                    )
                }
                for name, a in meta["adapters"].items()
            },
            "recipe": meta["recipe"],
            "device": meta["device"],
            "counts": counts,
        },
    )


if __name__ == "__main__":
    main()
