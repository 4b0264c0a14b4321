"""Fast CPU runtimes for the two MiniLM encoders (the embedder and the trained DM): the
torch module exported to ONNX once, its attention and layer norms fused by
onnxruntime's BERT optimizer, optionally int8-quantised per channel. Built on first use
into the models folder and reused while what it was built from is unchanged. Running
one needs neither torch nor transformers (`open_session`, `Tokenizer`)."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
from tokenizers import Tokenizer as Backend

INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def runtime_path(runtime_dir: Path, stem: str, version: str, weights: Path) -> Path:
    """Where the runtime built from `weights` by export recipe `version` lives: a new
    file whenever either changes, so a stale runtime is never served."""
    digest = hashlib.sha256(version.encode())
    digest.update(weights.read_bytes())
    return runtime_dir / f"{stem}-{digest.hexdigest()[:16]}.onnx"


def cached_session(path: Path, export: Callable[[Path], None]) -> Any:
    """An inference session of the runtime at `path`, exported there first if missing."""
    if not path.is_file():
        export(path)
    return open_session(path)


def export_bert(model: Any, tokenizer: Any, path: Path, output: str, *, int8: bool) -> None:
    """Export a transformers BERT-type `model`, returning its `output` field (`logits`,
    `last_hidden_state`), to `path`; fused, and int8 per channel when `int8`. Written
    atomically: a stopped export never leaves a half-written file behind."""
    # torch and the ONNX exporter: only to build a runtime, never to run one
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    class Named(torch.nn.Module):  # named inputs: BERT's positional order differs
        def forward(self, input_ids: Any, token_type_ids: Any, attention_mask: Any) -> Any:
            result = model(
                input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask
            )
            return getattr(result, output)

    model.requires_grad_(False)  # tracing cannot take weights that want gradients
    config = model.config
    sample = tokenizer(
        ["Who?", "Where is it?"], ["Someone did it.", "Here."], padding=True, return_tensors="pt"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    quiet = logging.getLogger()  # the quantiser advises on the root logger; tracing warns
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain, fused = Path(scratch) / "plain.onnx", Path(scratch) / "fused.onnx"
            torch.onnx.export(
                Named().eval(),
                tuple(sample[n] for n in INPUTS),
                str(plain),
                input_names=list(INPUTS),
                output_names=[output],
                dynamic_axes={
                    **{n: {0: "batch", 1: "tokens"} for n in INPUTS},
                    output: {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
            optimizer.optimize_model(
                str(plain),
                model_type="bert",
                num_heads=config.num_attention_heads,
                hidden_size=config.hidden_size,
            ).save_model_to_file(str(fused))
            final = fused
            if int8:
                final = Path(scratch) / "int8.onnx"
                quantize_dynamic(
                    str(fused),
                    str(final),
                    weight_type=QuantType.QInt8,
                    per_channel=True,
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                )
            final.replace(path)
    finally:
        quiet.setLevel(level)


def open_session(path: Path) -> Any:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # warnings about unused initialisers are noise
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def feed(batch: Any) -> dict[str, Any]:
    """A tokenizer's batch (numpy or torch) as the session's inputs."""
    return {name: np.asarray(batch[name]) for name in INPUTS}


class Tokenizer:
    """A model folder's `tokenizer.json` through `tokenizers` alone, called as its
    transformers fast tokenizer is called here (the same backend, set up the same way,
    so the same tokens) without importing transformers, which imports torch."""

    def __init__(self, model_dir: Path) -> None:
        self.backend = Backend.from_file(str(model_dir / "tokenizer.json"))
        config = json.loads((model_dir / "tokenizer_config.json").read_text())
        self.pad_token = config.get("pad_token", "[PAD]")
        self.pad_id = self.backend.token_to_id(self.pad_token)
        # Truncation and padding are settings of the shared backend, and `encode_batch`
        # runs without the GIL: setting them while another thread encodes raises
        # "Already borrowed". The server's concurrent runs share one tokenizer.
        self.lock = threading.Lock()

    def __call__(
        self,
        texts: list[str],
        pairs: list[str] | None = None,
        *,
        truncation: bool | str,
        max_length: int,
        padding: bool,
        return_tensors: str = "np",
    ) -> dict[str, np.ndarray]:
        """Token ids, type ids and attention mask of each text (or pair), cut to
        `max_length` (`truncation=True`: longest first; or a named strategy such as
        "only_second") and padded to the longest."""
        if return_tensors != "np":
            raise ValueError("this tokenizer returns numpy arrays only")
        strategy = "longest_first" if truncation is True else truncation
        inputs = texts if pairs is None else list(zip(texts, pairs, strict=True))
        with self.lock:
            if strategy:
                self.backend.enable_truncation(max_length, strategy=strategy)
            else:
                self.backend.no_truncation()
            if padding:
                self.backend.enable_padding(pad_id=self.pad_id, pad_token=self.pad_token)
            else:
                self.backend.no_padding()
            encodings = self.backend.encode_batch(inputs)
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        }
