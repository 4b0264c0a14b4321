"""Which training recipe makes the best decision model within the CPU budget?

Trains the MiniLM cross-encoder with each recipe on `train.jsonl` and scores the `dev`
examples of the cross-encoder kinds with raw logits: AUC per kind (calibration is monotone,
so it cannot change AUC) and training seconds. Each recipe trains one adapter on every
cross-encoder kind, as the shipped main adapter was trained before `same` got its own;
one saved with `--adapters` can serve as the main adapter (`hoprag dm calibrate`). The
comparison decides the default `Recipe` of `app/dm/train.py`; it needs a GPU to finish in
minutes (on the 2-core CPU one epoch takes about 40 minutes), and runs anywhere torch
does.

    python -m bench.dm_recipes --data dm_data [--adapters DIR] [--recipes NAME...]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from app.dm.data import read_jsonl
from app.dm.eval import auc
from app.dm.features import CROSS_KINDS
from app.dm.torch_model import device
from app.dm.train import Recipe, save_adapter, train_cross_encoder
from bench.common import RESULTS, machine, save

COMMAND = "python -m bench.dm_recipes --data dm_data"

LORA_R32 = {"r": 32, "lora_alpha": 64, "lora_dropout": 0.05}
RECIPES = {
    "lora16-1ep": Recipe(),
    "lora16-1.5ep": Recipe(epochs=1.5),
    "lora16-2ep": Recipe(epochs=2),
    "lora16-3ep": Recipe(epochs=3),
    "lora16-lr1e-3-1ep": Recipe(learning_rate=1e-3),
    "lora32-lr1e-3-2ep": Recipe(epochs=2, learning_rate=1e-3, lora=LORA_R32),
    "full-lr5e-5-1ep": Recipe(learning_rate=5e-5, lora=None),
    "full-lr5e-5-2ep": Recipe(epochs=2, learning_rate=5e-5, lora=None),
}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("dm_data"))
    parser.add_argument(
        "--adapters", type=Path, default=None, help="Also save each LoRA adapter here."
    )
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    args = parser.parse_args()
    train_set = read_jsonl(args.data / "train.jsonl")
    dev = [e for e in read_jsonl(args.data / "dev.jsonl") if e.kind in CROSS_KINDS]
    gpu = torch.cuda.get_device_name() if device() == "cuda" else None
    previous = RESULTS / "dm_recipes.json"
    rows = json.loads(previous.read_text())["rows"] if previous.is_file() else {}
    for name in args.recipes:
        recipe = RECIPES[name]
        started = time.monotonic()
        encoder = train_cross_encoder(train_set, recipe)
        seconds = time.monotonic() - started
        logits = encoder.logits([(e.kind, e.text_a, e.text_b) for e in dev], batch_size=256)
        rows[name] = {
            "recipe": asdict(recipe),
            "machine": machine(gpu),
            "train_seconds": round(seconds, 1),
            "dev_auc": {
                kind: auc(
                    [float(x) for x, e in zip(logits, dev, strict=True) if e.kind == kind],
                    [e.label for e in dev if e.kind == kind],
                )
                for kind in CROSS_KINDS
            },
        }
        print(name, json.dumps(rows[name]), flush=True)
        if args.adapters and recipe.lora is not None:  # a full fine-tune is 90 MB
            save_adapter(
                encoder, args.adapters / name, recipe, CROSS_KINDS, len(train_set), seconds
            )
        save("dm_recipes", {"command": COMMAND, "rows": rows}, gpu)


if __name__ == "__main__":
    main()
