"""The DM's cross-encoder in torch: MiniLM with a LoRA adapter (`peft`), built fresh for
training by a `Recipe` (`new_model`; app/dm/train.py trains it) or loaded from a saved
adapter and merged (`load_model`), which is what the fast runtime is exported from
(`app.dm.runtime`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import AutoModelForSequenceClassification, AutoTokenizer, logging

from app.dm.runtime import base_model_dir, tokenise
from app.encoders.onnx_runtime import export_bert


@dataclass(frozen=True)
class Recipe:
    """How the cross-encoder is trained; the default is the shipped DM's recipe, sized so
    that `hoprag dm train` finishes within an hour on a 2-core CPU."""

    epochs: float = 1.5
    learning_rate: float = 5e-4
    batch_size: int = 16
    lora: dict[str, Any] | None = field(
        default_factory=lambda: {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05}
    )  # None: fine-tune every weight instead (kept for comparisons)
    warmup_steps: int = 50
    # Gradient-norm clipping. Without it, a run on this CPU (same data builder and seed,
    # one run each) gave `rel` a dev AUC of 0.843 (sub-question queries 0.680) while
    # `suff` and `depth` fit; with it 0.957 (0.989), as good as the GPU-trained adapter
    # (docs/BENCHMARKS.md, "training from scratch"). None turns it off.
    max_grad_norm: float | None = 1.0


def device() -> str:
    """Train on a GPU when torch sees one; everything else runs on the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class CrossEncoder:
    """The fine-tuned cross-encoder, loaded once (adapter merged for speed); a freshly
    trained one keeps its mean training loss per `LOSS_WINDOW` batches, overall and per
    decision kind (a kind that stalls while the others fit shows there)."""

    model: Any
    tokenizer: Any
    loss_curve: list[float] = field(default_factory=list)
    kind_loss_curves: dict[str, list[float]] = field(default_factory=dict)

    def logits(self, pairs: Sequence[tuple[str, str, str]], batch_size: int = 32) -> np.ndarray:
        """Raw logits for (kind, text_a, text_b) triples, batched; no gradients."""
        out: list[np.ndarray] = []
        where = next(self.model.parameters()).device
        with torch.inference_mode():
            for start in range(0, len(pairs), batch_size):
                batch = tokenise(self.tokenizer, pairs[start : start + batch_size], "pt").to(where)
                out.append(self.model(**batch).logits[:, 0].float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def new_model(recipe: Recipe) -> CrossEncoder:
    """The base with a fresh classification head and a LoRA adapter to train."""
    logging.set_verbosity_error()  # "newly initialised classifier" is expected here
    base = base_model_dir()
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    if recipe.lora is None:
        return CrossEncoder(model, tokenizer)
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        target_modules=["query", "key", "value", "dense"],
        modules_to_save=["classifier", "pooler"],
        **recipe.lora,
    )
    return CrossEncoder(get_peft_model(model, config), tokenizer)


def load_model(adapter_dir: Path) -> CrossEncoder:
    """Base plus the saved adapter, merged; raises if the adapter is missing or corrupt."""
    logging.set_verbosity_error()
    base = base_model_dir()
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    model.eval()
    return CrossEncoder(model, AutoTokenizer.from_pretrained(str(base)))


def export_runtime(adapter_dir: Path, path: Path) -> None:
    """The saved adapter, merged, as the fast runtime's int8 ONNX graph at `path`."""
    encoder = load_model(adapter_dir)
    export_bert(encoder.model, encoder.tokenizer, path, "logits", int8=True)
