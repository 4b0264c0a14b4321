"""The DM trainer end to end on a handful of examples: it trains a LoRA adapter, fits the
calibration, saves a small adapter, and the saved model loads and scores like the trained
one. (Quality is measured by `hoprag dm eval`, not here.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from app import dm_train
from app.dm_data import DMExample, write_jsonl

PASSAGES = {
    1: "Raise Your Voice: Raise Your Voice is a 2004 film directed by Sean McNamara.",
    2: "Burbank: Burbank is a city in Los Angeles County, California.",
    3: "Basalt: Basalt is a fine-grained volcanic rock.",
}


def _examples() -> list[DMExample]:
    q = "Who directed Raise Your Voice?"
    rows = [
        DMExample("rel", q, PASSAGES[1], 1, "gold-step", "t", "a"),
        DMExample("rel", q, PASSAGES[3], 0, "retrieved-negative", "t", "a"),
        DMExample("same", q, "What is the director of Raise Your Voice?", 1, "tp", "t", "a"),
        DMExample("same", q, "When was Raise Your Voice released?", 0, "nm", "t", "a"),
        DMExample("suff", "Q?", "- Who directed X? Y", 0, "chain-prefix", "t", "a"),
        DMExample(
            "suff", "Q?", "- Who directed X? Y\n- Where was Y born? Z", 1, "gold-chain", "t", "a"
        ),
        DMExample("depth", "Who directed Raise Your Voice?", "", 1, "gold-hops", "t", "a"),
        DMExample(
            "depth",
            "When did the capital of the birthplace of X's director fall?",
            "",
            0,
            "gold-hops",
            "t",
            "a",
        ),
    ]
    rows += [
        DMExample("direct", q, "", 1, "gold-in-top-w", "t", "a", {"passage_ids": [1, 3]}),
        DMExample(
            "direct", "Where was Y born?", "", 0, "gold-in-top-w", "t", "b", {"passage_ids": [3]}
        ),
    ]
    return rows


def test_train_save_load_and_score(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_jsonl(data / "train.jsonl", _examples())
    write_jsonl(data / "calib.jsonl", _examples())
    out = tmp_path / "dm"
    meta = dm_train.train(data, out, passages=lambda _b, ids: [PASSAGES[i] for i in ids])
    assert meta["version"] == dm_train.DM_VERSION
    assert set(meta["platt"]) == set(dm_train.CROSS_KINDS)
    assert len(meta["direct"]["weights"]) == dm_train.DIRECT_FEATURES + 1
    saved = json.loads((out / "dm.json").read_text())
    assert saved["platt"] == meta["platt"]
    adapter = out / "adapter_model.safetensors"
    assert 0 < adapter.stat().st_size < 20 * 2**20  # small enough to commit
    loaded = dm_train.load_model(out)
    pairs = [("rel", "Who directed Raise Your Voice?", PASSAGES[i]) for i in (1, 2, 3)]
    logits = loaded.logits(pairs)
    assert logits.shape == (3,) and np.isfinite(logits).all()
    long_passage = "word " * 5000  # longer than the window: cut, not an error
    assert np.isfinite(loaded.logits([("rel", "Q?", long_passage)])).all()
