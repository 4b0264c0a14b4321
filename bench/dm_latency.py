"""How long does the trained DM take to judge one step's relevance: one question against
w = 10 passages in one batched forward pass (issue target: under 150 ms on this CPU)?

    python -m bench.dm_latency [--data dm_data] [--batches 50]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.dm.data import read_jsonl
from app.dm.eval import rel_latency_ms
from app.dm.features import DM_DIR
from app.settings import Settings
from bench.common import save
from tools.decision import TrainedDM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    parser.add_argument("--batches", type=int, default=50)
    args = parser.parse_args()
    dm = TrainedDM.load(DM_DIR, Settings().runtime_dir)
    if dm is None:
        raise SystemExit(f"no trained DM in {DM_DIR}")
    rows = [e for e in read_jsonl(args.data / "dev.jsonl") if e.kind == "rel"]
    dm.p("rel", [(rows[0].text_a, e.text_b) for e in rows[:10]])  # warm-up
    latency = rel_latency_ms(dm, rows, args.batches)
    median, p90 = round(latency["median"], 1), round(latency["p90"], 1)
    save(
        "dm_latency",
        {
            "command": f"python -m bench.dm_latency --batches {args.batches}",
            "passages": latency["passages"],
            "batches": latency["batches"],
            "median_ms": median,
            "p90_ms": p90,
        },
    )
    print(f"median {median} ms, p90 {p90} ms")


if __name__ == "__main__":
    main()
